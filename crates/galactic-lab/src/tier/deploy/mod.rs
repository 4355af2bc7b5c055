//! The deployment tier (`cargo xtask test-deploy`): the node as shipped. The installer image is
//! built from `deploy/kubernetes/Dockerfile`'s runtime stage on a Debian bookworm base made here
//! from Debian's packages ([`image`]); the DaemonSet's `install-cni` and `refresh-credentials`
//! containers run under Podman with exactly what `deploy/kubernetes/daemonset.yaml` says, read
//! from it ([`manifest`]), their `hostPath` volumes bind mounts of a simulated host root
//! ([`host`]), the Kubernetes API the test kit's loopback server inside the node's network
//! namespace with the service account the kubelet mounts ([`api`]). The scenarios
//! ([`scenario`]): a fresh node, restarts and DaemonSet updates, a node the Go chain served, a
//! failing API server during its export.

pub mod api;
mod go_pod;
pub mod host;
pub mod image;
pub mod manifest;
pub mod scenario;

use crate::tier::podman::{engine::Engine, machine, report};
use crate::tier::{Chain, Context, Result, Workspace};
use galactic_testkit::privileged::TestNetns;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Runs the tier with the release plugins in `plugins`; `started` is when the run began (the
/// build included), for the total time it reports. The machine's own state is compared before
/// and after, as the Podman tier does.
pub fn run(plugins: &Path, workspace: &Workspace, started: Instant) -> Result<()> {
    machine::untouched(
        "the deployment tier",
        "test-deploy",
        started,
        String::new,
        || play(plugins, workspace),
    )
}

/// The simulated node (its network namespace, the tier's Podman in it), the image, the
/// scenarios; everything torn down whatever happened.
fn play(plugins: &Path, workspace: &Workspace) -> Result<()> {
    let tier_dir = workspace.target_dir.join("deploy-tier");
    let work = tier_dir.join("run");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("remove {}", work.display()))?;
    }
    // Podman's CNI settings are unused (the pods have the host's network): an empty plugin
    // dir and no node config.
    let no_plugins = work.join("no-cni-plugins");
    std::fs::create_dir_all(&no_plugins).context("create the tier's run directory")?;
    let netns = TestNetns::new("deploy");
    let engine = report::step("the tier's Podman in the node's network namespace", || {
        Engine::start(
            workspace,
            &no_plugins,
            &work.join("no-node-config"),
            netns.name(),
        )
    })?;
    let outcome = scenes(&engine, plugins, workspace, &tier_dir, &netns);
    let teardown = engine.teardown();
    outcome.and(teardown)
}

fn scenes(
    engine: &Engine,
    plugins: &Path,
    workspace: &Workspace,
    tier_dir: &Path,
    netns: &TestNetns,
) -> Result<()> {
    let manifest_path = workspace.root.join("deploy/kubernetes/daemonset.yaml");
    let manifest = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("read {}", manifest_path.display()))?;
    let shipped = manifest::DaemonSet::parse(&manifest, "deploy/kubernetes/daemonset.yaml")?;
    let image_tag = installer_image(&shipped)?;
    let work = tier_dir.join("run");
    let (tarball, made) = report::step("the bookworm base from Debian's packages", || {
        image::base_tarball(&tier_dir.join("base"))
    })?;
    println!(
        "       {}",
        if made {
            "made with mmdebstrap"
        } else {
            "cached"
        }
    );
    report::step(
        &format!("the Dockerfile's runtime stage as {image_tag}, offline"),
        || {
            image::build(
                engine,
                &workspace.root,
                &tarball,
                plugins,
                &work.join("image"),
                &image_tag,
            )
        },
    )?;
    let (api, service_account) = cluster(netns, &work, shipped.namespace())?;
    let mut scene = scenario::Scene {
        podman: engine,
        manifest,
        api,
        service_account,
        run_dir: work.join("nodes"),
        plugins: plugins.to_path_buf(),
        node: netns,
    };
    let (outcome, timings) = scene.play();
    let show = |t: Option<f64>| t.map_or("-".to_owned(), |s| format!("{s:.1} s"));
    println!(
        "install time: fresh node {}, Go node {}",
        show(timings.fresh),
        show(timings.go_node)
    );
    outcome.map_err(|e| crate::tier::Error::failed(Chain(&e).to_string()))
}

/// The simulated cluster: the API server inside the node's namespace, and the service account
/// volume the kubelet mounts (its token the one the server requires, its CA the server's).
fn cluster(
    netns: &TestNetns,
    work: &Path,
    namespace: &str,
) -> Result<(api::Api, api::ServiceAccount)> {
    let api = api::Api::start_in(netns, galactic_testkit::apiserver::Fixture::new())?;
    println!(
        "       API server {} inside the node's network namespace (HTTPS, a cluster CA of its own)",
        api.url()
    );
    api::node_address(netns)?;
    api.register_node(scenario::NODE, api::NODE_IP);
    let service_account = api::ServiceAccount::new(
        work.join("serviceaccount"),
        &api.token,
        Some(&api.ca_pem),
        namespace,
    )?;
    Ok((api, service_account))
}

/// The image the manifest's init container runs: the tier builds it under that name.
fn installer_image(ds: &manifest::DaemonSet) -> Result<String> {
    let probe = manifest::Kubelet {
        node_name: String::new(),
        host_root: PathBuf::from("/"),
        service_account: PathBuf::from("/"),
        service_host: String::new(),
        service_port: 0,
    };
    Ok(ds.container("install-cni", &probe)?.image)
}
