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
pub mod host;
pub mod image;
pub mod manifest;
pub mod scenario;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

/// Why the tier, or one of its scenarios, failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The manifest says something the tier does not apply.
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// A check did not hold, or a program failed: the message says what was found.
    #[error("{0}")]
    Failed(String),
}

/// The tier's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The Podman the tier runs its images and containers with: private storage and configuration,
/// inside the simulated node's network namespace.
pub trait Podman {
    /// `podman ARGS`, whatever its outcome.
    fn output(&self, args: &[&str]) -> Output;
    /// Flags every `podman run` of the tier takes (its cgroup parent).
    fn run_flags(&self) -> Vec<&str>;

    /// `podman ARGS`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> Result<String> {
        let out = self.output(args);
        if !out.status.success() {
            return Err(Error::Failed(format!(
                "podman {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// What the tier is given.
pub struct Setup<'a> {
    /// The workspace root (the Dockerfile, install.sh, the manifest).
    pub workspace: &'a Path,
    /// The tier's directory (`target/deploy-tier/`): the base's cache, the runs.
    pub tier_dir: PathBuf,
    /// The release plugins, built beforehand.
    pub plugins: &'a Path,
    /// The simulated node's network namespace, which Podman runs in.
    pub netns: &'a galactic_testkit::privileged::TestNetns,
}

/// Builds the image and plays every scenario, printing one line per step.
pub fn run(setup: &Setup<'_>, podman: &dyn Podman) -> Result<()> {
    let manifest_path = setup.workspace.join("deploy/kubernetes/daemonset.yaml");
    let manifest = std::fs::read_to_string(&manifest_path).map_err(|source| Error::Io {
        what: format!("read {}", manifest_path.display()),
        source,
    })?;
    let shipped = manifest::DaemonSet::parse(&manifest, "deploy/kubernetes/daemonset.yaml")?;
    let image_tag = installer_image(&shipped)?;
    let work = setup.tier_dir.join("run");
    let _ = std::fs::remove_dir_all(&work);
    let started = Instant::now();
    let (tarball, made) = image::base_tarball(&setup.tier_dir.join("base"))?;
    println!(
        "[PASS] the bookworm base ({}, {:.1} s)",
        if made {
            "made with mmdebstrap"
        } else {
            "cached"
        },
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let built = image::build(
        podman,
        setup.workspace,
        &tarball,
        setup.plugins,
        &work.join("image"),
        &image_tag,
    );
    report_step(
        &format!("the Dockerfile's runtime stage as {image_tag}, offline"),
        started,
        &built,
    );
    built?;
    let fixture = galactic_testkit::apiserver::Fixture::new();
    let api = api::Api::start_in(setup.netns, fixture)?;
    println!(
        "       API server {} inside the node's network namespace ({})",
        api.url(),
        if api.ca_pem.is_some() {
            "HTTPS, cluster CA"
        } else {
            "plain HTTP: the export's HTTPS client cannot reach it"
        }
    );
    let service_account = api::ServiceAccount::new(
        work.join("serviceaccount"),
        &api.token,
        api.ca_pem.as_deref(),
        shipped.namespace(),
    )?;
    let mut scene = scenario::Scene {
        podman,
        manifest,
        api,
        service_account,
        run_dir: work.join("nodes"),
        plugins: setup.plugins.to_path_buf(),
    };
    let (outcome, timings) = scene.play();
    let show = |t: Option<f64>| t.map_or("-".to_owned(), |s| format!("{s:.1} s"));
    println!(
        "install time: fresh node {}, Go node {}",
        show(timings.fresh),
        show(timings.go_node)
    );
    outcome
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

fn report_step<T>(what: &str, started: Instant, out: &Result<T>) {
    let secs = started.elapsed().as_secs_f64();
    match out {
        Ok(_) => println!("[PASS] {what} ({secs:.1} s)"),
        Err(e) => println!("[FAIL] {what} ({secs:.1} s): {e}"),
    }
}
