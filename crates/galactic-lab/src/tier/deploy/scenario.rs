//! The deployment tier's scenarios, each a named check printed PASS or FAIL: a fresh node, the
//! init container run again (a restart, a DaemonSet update), a node the Go chain served, and a
//! failing API server during the Go node's export.

use super::api::{Api, ApiFailure, ServiceAccount};
use super::go_pod::GoPod;
use super::host::{Entry, HostRoot, Tree, GO_BINARIES, GO_SHARD_SIDS, GO_UPLINKS};
use super::manifest::{Container, DaemonSet, Kubelet};
use crate::tier::podman::engine::Engine;
use crate::tier::podman::report::step;
use crate::tier::{Context, Error, Result};
use galactic_testkit::apiserver::Fault;
use galactic_testkit::privileged::TestNetns;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The simulated node's name (the downward API's `spec.nodeName`).
pub const NODE: &str = "deploy-node";

/// The one setting the tier adds to the manifest's environment: the refresh container's period
/// (300 s by default), so a rotation shows within the tier's budget.
const REFRESH_SECONDS: &str = "1";

/// Longest an init container may run before the tier calls it hung (the export's client gives
/// up after its retries, well within it).
const INIT_TIMEOUT_SECONDS: u32 = 150;

/// What the scenarios share: Podman, the manifest, the cluster, the plugins.
pub struct Scene<'a> {
    /// The tier's Podman.
    pub podman: &'a Engine,
    /// The manifest's text, as shipped.
    pub manifest: String,
    /// The API server.
    pub api: Api,
    /// The service account volume.
    pub service_account: ServiceAccount,
    /// Where the simulated host roots go.
    pub run_dir: PathBuf,
    /// The release plugins the image holds.
    pub plugins: PathBuf,
    /// The node's network namespace (the containers' host network).
    pub node: &'a TestNetns,
}

/// One run of a container.
#[derive(Debug)]
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
    seconds: f64,
}

/// Install times, for the report.
#[derive(Debug, Default)]
pub struct Timings {
    /// The init container on a fresh node (s).
    pub fresh: Option<f64>,
    /// The init container on a node the Go chain served (s).
    pub go_node: Option<f64>,
}

impl Scene<'_> {
    /// Every scenario; the tier fails when any does. Each prints its own line.
    pub fn play(&mut self) -> (Result<()>, Timings) {
        let mut timings = Timings::default();
        let fresh = HostRoot::new(self.run_dir.join("fresh"));
        let go = HostRoot::new(self.run_dir.join("go"));
        let outcomes = match (fresh, go) {
            (Ok(fresh), Ok(go)) => vec![
                step("(a) fresh node: install under the read-only root, host files and modes", || {
                    timings.fresh = Some(self.fresh_node(&fresh)?);
                    Ok(())
                }),
                step("(b) fresh node: a restart and a DaemonSet update (log level) change only what they must", || {
                    self.rerun(&fresh, &[])
                }),
                step("(a) fresh node: the refresh container rewrites only the kubeconfig on a token rotation", || {
                    self.refresh(&fresh)
                }),
                step("(c) Go node with a live Go pod and VM: export under the read-only root, binaries switched, settings carried, pod and VM untouched", || {
                    timings.go_node = Some(self.go_node(&go)?);
                    Ok(())
                }),
                step("(b) Go node: a restart and a DaemonSet update keep every carried setting", || {
                    self.rerun(&go, &carried_settings())
                }),
                step("(e) Go node whose Node object has another address: the identity check fails the install, nothing changes", || {
                    self.wrong_node()
                }),
                step("(f) fresh node: install.sh rollback from the image, as a node debug pod runs it: markers of every live allocation, the Go conflist", || {
                    self.rollback(&fresh)
                }),
                step("(d) Go node, API server answering 500: the install fails saying what to do, the Go chain serves", || {
                    self.failing_api(ApiFailure::Answers500)
                }),
                step("(d) Go node, API server timing out: the install fails saying what to do, the Go chain serves", || {
                    self.failing_api(ApiFailure::TimesOut)
                }),
            ],
            (Err(e), _) | (_, Err(e)) => vec![Err(e)],
        };
        let failed = outcomes.iter().filter(|o| o.is_err()).count();
        let outcome = if failed == 0 {
            Ok(())
        } else {
            Err(Error::failed(format!(
                "{failed} scenario(s) failed (see [FAIL] above)"
            )))
        };
        (outcome, timings)
    }

    /// The shipped manifest, or the shipped manifest with `edits` applied.
    fn daemonset(&self, edits: &[(&str, &str)]) -> Result<DaemonSet> {
        let mut text = self.manifest.clone();
        for (from, to) in edits {
            if !text.contains(from) {
                return Err(Error::failed(format!(
                    "the manifest has no `{from}` to edit"
                )));
            }
            text = text.replacen(from, to, 1);
        }
        Ok(DaemonSet::parse(&text, "deploy/kubernetes/daemonset.yaml")?)
    }

    fn kubelet(&self, host: &HostRoot) -> Kubelet {
        Kubelet {
            node_name: NODE.to_owned(),
            host_root: host.dir().to_path_buf(),
            service_account: self.service_account.dir().to_path_buf(),
            service_host: self.api.host.clone(),
            service_port: self.api.port,
        }
    }

    /// Runs `container` to its end, as the kubelet starts it.
    fn run(&self, container: &Container, extra: &[&str]) -> Result<Ran> {
        prepare_host_dirs(container)?;
        let name = format!("deploy-{}", container.name);
        let timeout = format!("--timeout={INIT_TIMEOUT_SECONDS}");
        let mut args = vec!["run", "--rm", "--name", &name, &timeout];
        args.extend(["--cgroup-parent", self.podman.cgroup_parent()]);
        args.extend(container.flags.iter().map(String::as_str));
        args.extend_from_slice(extra);
        args.push(&container.image);
        args.extend(container.args.iter().map(String::as_str));
        let started = Instant::now();
        let out = self.podman.podman(&args);
        Ok(Ran {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The init container of `ds` on `host`, which must succeed.
    fn install(&self, ds: &DaemonSet, host: &HostRoot) -> Result<Ran> {
        let container = ds.container("install-cni", &self.kubelet(host))?;
        let ran = self.run(&container, &[])?;
        if !ran.success {
            return Err(Error::failed(format!(
                "install-cni failed after {:.1} s: {}",
                ran.seconds,
                ran.stderr.trim()
            )));
        }
        Ok(ran)
    }

    /// (a): the shipped manifest's init container on an empty host root.
    fn fresh_node(&self, host: &HostRoot) -> Result<f64> {
        let ran = self.install(&self.daemonset(&[])?, host)?;
        let tree = host.snapshot()?;
        self.expect_installed(&tree, host, false)?;
        for (path, mode) in [
            ("etc/galactic/node.json", 0o644),
            ("etc/galactic/datapath/10-galactic.conflist", 0o644),
            ("var/lib/galactic/kubeconfig", 0o600),
            ("var/log/galactic", 0o755),
        ] {
            expect_mode(&tree, path, mode)?;
        }
        expect_mode(&tree, "var/lib/galactic/ca.crt", 0o644)?;
        let node = node_config(host)?;
        expect("node_name", &node["node_name"], &json!(NODE))?;
        expect("publisher", &node["publisher"], &json!("kubernetes"))?;
        expect("routing_domain", &node["routing_domain"], &json!("auto"))?;
        self.expect_kubeconfig(host, &self.api.token)?;
        Ok(ran.seconds)
    }

    /// The five plugins (and, on a Go node, the aliases) are links through the one `current`
    /// set to copies of the release plugins, mode 755.
    fn expect_installed(&self, tree: &Tree, host: &HostRoot, aliases: bool) -> Result<()> {
        let mut names: Vec<(&str, &str)> = galactic_core::plugins::BINARIES
            .iter()
            .map(|p| (*p, *p))
            .collect();
        if aliases {
            names.extend([
                ("galactic-veth", "galactic-cni"),
                ("galactic-tap", "galactic-tap-cni"),
            ]);
        } else if tree.get("opt/cni/bin/galactic-veth").is_some() {
            return Err(Error::failed(
                "a fresh node got the upstream alias galactic-veth".to_owned(),
            ));
        }
        for (name, of) in names {
            let link = format!("opt/cni/bin/{name}");
            expect(
                &link,
                &json!(format!("{:?}", tree.get(&link))),
                &json!(format!(
                    "{:?}",
                    Some(&Entry::Link(format!(".galactic/current/{name}")))
                )),
            )?;
            let staged = std::fs::read(host.path(&link)).with_context(|| format!("read {link}"))?;
            let release =
                std::fs::read(self.plugins.join(of)).with_context(|| format!("read {of}"))?;
            if staged != release {
                return Err(Error::failed(format!("{link} is not the release {of}")));
            }
            let mode = std::fs::metadata(host.path(&link))
                .with_context(|| format!("stat {link}"))?
                .permissions();
            expect(
                &format!("{link} mode"),
                &json!(format!(
                    "{:o}",
                    std::os::unix::fs::PermissionsExt::mode(&mode) & 0o7777
                )),
                &json!("755"),
            )?;
        }
        Ok(())
    }

    fn expect_kubeconfig(&self, host: &HostRoot, token: &str) -> Result<()> {
        let path = host.path("/var/lib/galactic/kubeconfig");
        let text = std::fs::read_to_string(&path).context("read the kubeconfig".to_owned())?;
        let server = format!("server: https://{}:{}", self.api.host, self.api.port);
        for line in [
            server.as_str(),
            &format!("token: {token}"),
            "certificate-authority: /var/lib/galactic/ca.crt",
        ] {
            if !text.contains(line) {
                return Err(Error::failed(format!(
                    "the kubeconfig lacks `{line}`:\n{text}"
                )));
            }
        }
        Ok(())
    }

    /// (a): the refresh container, running, changes nothing until the token rotates, then
    /// only the kubeconfig.
    fn refresh(&mut self, host: &HostRoot) -> Result<()> {
        let container = self
            .daemonset(&[])?
            .container("refresh-credentials", &self.kubelet(host))?;
        prepare_host_dirs(&container)?;
        let period = format!("--env=REFRESH_SECONDS={REFRESH_SECONDS}");
        let mut args = vec!["run", "--detach", "--name", "deploy-refresh-credentials"];
        args.extend(["--cgroup-parent", self.podman.cgroup_parent()]);
        args.extend(container.flags.iter().map(String::as_str));
        args.push(&period);
        args.push(&container.image);
        args.extend(container.args.iter().map(String::as_str));
        let before = host.snapshot()?;
        self.podman.ok(&args)?;
        let outcome = self.rotation(host, &before);
        let logs = self.podman.podman(&["logs", "deploy-refresh-credentials"]);
        let _ = self
            .podman
            .ok(&["rm", "--force", "--time", "0", "deploy-refresh-credentials"]);
        // The API server accepts one token (a cluster accepts the old one for a while too): the
        // later scenarios' installs present it again.
        let server_token = self.api.token.clone();
        self.service_account.rotate(&server_token)?;
        outcome.map_err(|e| {
            Error::failed(format!(
                "{e}; its log: {}",
                String::from_utf8_lossy(&logs.stderr).trim()
            ))
        })
    }

    fn rotation(&mut self, host: &HostRoot, before: &Tree) -> Result<()> {
        // Three periods with the same token: nothing may change.
        std::thread::sleep(Duration::from_secs(3));
        let unchanged = before.changes(&host.snapshot()?);
        if !unchanged.is_empty() {
            return Err(Error::failed(format!(
                "with the same token it changed {unchanged:?}"
            )));
        }
        let token = "eyJhbGciOiJFUzI1NiJ9.galactic-deploy-tier.second";
        self.service_account.rotate(token)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.expect_kubeconfig(host, token).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.expect_kubeconfig(host, token)?;
        let changed = before.changes(&host.snapshot()?);
        let want = vec!["var/lib/galactic/kubeconfig".to_owned()];
        if changed != want {
            return Err(Error::failed(format!(
                "a rotation changed {changed:?}, want {want:?}"
            )));
        }
        Ok(())
    }

    /// (b): the init container again, as a restart (nothing may change) and as a DaemonSet
    /// update setting the log level to `warn` (only node.json and the datapath conflist may
    /// change, and only their log level). `carried` are node config values an earlier install
    /// carried over that every later run must keep.
    fn rerun(&self, host: &HostRoot, carried: &[(&str, Value)]) -> Result<()> {
        let shipped = self.daemonset(&[])?;
        let before = host.snapshot()?;
        let node_before = node_config(host)?;
        for (key, value) in carried {
            expect(
                &format!("{key} before the restart"),
                &node_before[key],
                value,
            )?;
        }
        let restart = self.install(&shipped, host)?;
        let changed = before.changes(&host.snapshot()?);
        if !changed.is_empty() || !restart.stdout.trim().is_empty() {
            return Err(Error::failed(format!(
                "a restart changed {changed:?} (it printed {:?}); node.json now: {}",
                restart.stdout.trim(),
                node_config(host)?
            )));
        }
        let update = self.daemonset(&[(
            "{name: GALACTIC_CNI_LOG_LEVEL, value: info}",
            "{name: GALACTIC_CNI_LOG_LEVEL, value: warn}",
        )])?;
        let before = host.snapshot()?;
        self.install(&update, host)?;
        let changed = before.changes(&host.snapshot()?);
        let want = [
            "etc/galactic/datapath/10-galactic.conflist",
            "etc/galactic/node.json",
        ];
        if changed != want {
            return Err(Error::failed(format!(
                "the update changed {changed:?}, want {want:?}"
            )));
        }
        let node = node_config(host)?;
        expect(
            "log_level after the update",
            &node["log_level"],
            &json!("warn"),
        )?;
        for (key, value) in node_before.as_object().into_iter().flatten() {
            if key != "log_level" && carried.iter().all(|(k, _)| k != key) {
                expect(&format!("{key} after the update"), &node[key], value)?;
            }
        }
        for (key, value) in carried.iter().filter(|(k, _)| *k != "log_level") {
            expect(&format!("{key} after the update"), &node[*key], value)?;
        }
        Ok(())
    }

    /// (c): a node the Go chain served, its allocations in BGPAdvertisement annotations.
    fn go_node(&self, host: &HostRoot) -> Result<f64> {
        host.seed_go_node(NODE)?;
        self.seed_advertisements();
        self.expect_read_only_root(host)?;
        let pod = GoPod::attach(self.node)?;
        let live = pod.state(self.node)?;
        let ran = self.install(&self.daemonset(&[])?, host)?;
        // The install is files only: the Go pod's and VM's links, addresses and routes, on both
        // sides, are as they were, and the pod still reaches its gateway.
        let now = pod.state(self.node)?;
        if now != live {
            fail!(
                "the install changed the live Go pod's or VM's links, addresses or routes: {live:?} became {now:?}"
            );
        }
        pod.reaches_gateway()?;
        let tree = host.snapshot()?;
        let export = host.path("/var/lib/galactic/ipam/legacy-annotations.json");
        let list: Value = serde_json::from_slice(
            &std::fs::read(&export).context("read the annotation export".to_owned())?,
        )
        .map_err(|e| Error::failed(format!("the export is not JSON: {e}")))?;
        let items = list["items"].as_array().map_or(0, Vec::len);
        expect("exported BGPAdvertisements", &json!(items), &json!(2))?;
        let leftovers: Vec<&String> = tree
            .0
            .keys()
            .filter(|p| p.contains(".installer-kubeconfig") || p.contains(".tmp."))
            .collect();
        if !leftovers.is_empty() {
            return Err(Error::failed(format!("the export left {leftovers:?}")));
        }
        self.expect_installed(&tree, host, true)?;
        if tree.get("etc/cni/net.d/10-galactic.conflist").is_some() {
            return Err(Error::failed(
                "the Go conflist is still in the runtime's conf dir".to_owned(),
            ));
        }
        let node = node_config(host)?;
        for (key, value) in carried_settings() {
            expect(key, &node[key], &value)?;
        }
        // The manifest's level, not the Go conflist's.
        expect("log_level", &node["log_level"], &json!("info"))?;
        Ok(ran.seconds)
    }

    /// Under the manifest's flags nothing but the mounts is writable: `mktemp` and `/tmp` fail,
    /// so an install that succeeds wrote its temporary files under the host mounts.
    fn expect_read_only_root(&self, host: &HostRoot) -> Result<()> {
        let container = self
            .daemonset(&[])?
            .container("install-cni", &self.kubelet(host))?;
        let probe = Container {
            args: vec![
                "-c".to_owned(),
                // Each must fail; one that works prints what it wrote.
                "for write in mktemp 'touch /tmp/probe' 'touch /probe'; do $write && echo \"writable: $write\"; done; true".to_owned(),
            ],
            ..container
        };
        let ran = self.run(&probe, &["--entrypoint=/bin/sh"])?;
        if ran.stdout.contains("writable") || !ran.stderr.contains("Read-only file system") {
            return Err(Error::failed(format!(
                "the init container's root is writable under the manifest's flags: {} {}",
                ran.stdout.trim(),
                ran.stderr.trim()
            )));
        }
        Ok(())
    }

    /// Two BGPAdvertisements of the Go chain in the DaemonSet's namespace, with the allocation
    /// annotations its allocator wrote.
    fn seed_advertisements(&self) {
        let cid41 = "0123456789abcdef0123456789abcdef012345678";
        for (name, annotations) in [
            (
                "55-1",
                json!({
                    format!("galactic.datum.net/allocated-subnet-ipv6.{cid41}"): "fd20:10:ff01::100:0/96",
                    format!("galactic.datum.net/allocated-subnet-ipv4.{cid41}"): "172.21.1.2",
                }),
            ),
            ("55-2", json!({"unrelated": "kept"})),
        ] {
            if self
                .api
                .fixture()
                .get("bgpadvertisements", Some("galactic-system"), name)
                .is_none()
            {
                self.api.fixture().insert(json!({
                    "apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPAdvertisement",
                    "metadata": {"name": name, "namespace": "galactic-system", "annotations": annotations},
                    "spec": {"routerRef": {"name": "router-a"},
                             "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
                             "prefixes": ["fd20:10:ff01::/96"]}}));
            }
        }
    }

    /// (d): the export's LIST fails as `failure` says; the install must fail with the
    /// installer's message, saying what to do, and leave the Go chain as it was.
    fn failing_api(&self, failure: ApiFailure) -> Result<()> {
        let host = HostRoot::new(self.run_dir.join(format!("go-{}", failure.label())))?;
        host.seed_go_node(NODE)?;
        self.seed_advertisements();
        let before = host.snapshot()?;
        self.api.fixture().inject(Fault {
            method: Some("GET".to_owned()),
            path_contains: "bgpadvertisements".to_owned(),
            times: 1000,
            action: failure.action(),
        });
        let seen_before = self.api.fixture().requests().len();
        let container = self
            .daemonset(&[])?
            .container("install-cni", &self.kubelet(&host))?;
        let ran = self.run(&container, &[]);
        self.api.fixture().clear_faults();
        let ran = ran?;
        if ran.success {
            fail!("the install succeeded against a failing API server");
        }
        if !failure.met(&self.api, seen_before, &ran.stderr) {
            fail!(
                "the install did not fail on the API server's {} (it failed for another reason): {}",
                failure.label(),
                ran.stderr.trim()
            );
        }
        expect_actionable(&ran.stderr)?;
        let after = host.snapshot()?;
        let conflist = "etc/cni/net.d/10-galactic.conflist".to_owned();
        let go_chain = GO_BINARIES.iter().map(|name| format!("opt/cni/bin/{name}"));
        if let Some(path) = go_chain
            .chain([conflist])
            .find(|p| before.get(p) != after.get(p))
        {
            fail!("{path} changed: the Go chain no longer serves as it did");
        }
        println!(
            "       {}: failed after {:.1} s: {}",
            failure.label(),
            ran.seconds,
            last_line(&ran.stderr)
        );
        Ok(())
    }
}

impl Scene<'_> {
    /// (e): the Node the DaemonSet's `spec.nodeName` names has an InternalIP this node does not
    /// have (a node name that names another machine): the init container fails naming both,
    /// and the host root, the Go chain's files included, is exactly as before.
    fn wrong_node(&self) -> Result<()> {
        let host = HostRoot::new(self.run_dir.join("go-wrong-node"))?;
        host.seed_go_node(NODE)?;
        let container = self
            .daemonset(&[])?
            .container("install-cni", &self.kubelet(&host))?;
        // What the kubelet creates before the container starts is not the installer's change.
        prepare_host_dirs(&container)?;
        let before = host.snapshot()?;
        self.api.register_node(NODE, "198.51.100.77");
        let ran = self.run(&container, &[]);
        self.api.register_node(NODE, super::api::NODE_IP);
        let ran = ran?;
        if ran.success {
            fail!("the install succeeded for a Node whose InternalIP is not this node's");
        }
        for needed in [
            "node identity check failed",
            "198.51.100.77",
            "does not name this node",
        ] {
            if !ran.stderr.contains(needed) {
                fail!(
                    "the failed install does not say {needed:?}: {}",
                    ran.stderr.trim()
                );
            }
        }
        let changed = before.changes(&host.snapshot()?);
        if !changed.is_empty() {
            fail!(
                "the host root changed although the identity check failed: {}",
                changed.join(", ")
            );
        }
        println!(
            "       failed after {:.1} s: {}",
            ran.seconds,
            last_line(&ran.stderr)
        );
        Ok(())
    }
}

impl Scene<'_> {
    /// (f): two attachments allocated by the node's galactic-ipam, then `install.sh rollback`
    /// run from the image with the host's root at `/host` (what `kubectl debug node/...`
    /// mounts): every live allocation has its markers where the Go allocator reads them, and
    /// upstream's static conflist is back in the conf dir with the node's settings.
    fn rollback(&self, host: &HostRoot) -> Result<()> {
        for pod in ["rollback-pod-1", "rollback-pod-2"] {
            self.allocate(host, pod)?;
        }
        let image = &self
            .daemonset(&[])?
            .container("install-cni", &self.kubelet(host))?
            .image;
        let mount = format!("{}:/host", host.dir().display());
        let out = self.podman.podman(&[
            "run",
            "--rm",
            "--name",
            "deploy-rollback",
            "--cgroup-parent",
            self.podman.cgroup_parent(),
            // A node debug pod has the host's network (and no CNI network of Podman's).
            "--network=host",
            "-v",
            &mount,
            image,
            "rollback",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            fail!("install.sh rollback failed: {}", stderr.trim());
        }
        expect_rolled_back(host, &out.stdout)?;
        println!("       {}", last_line(&stderr));
        Ok(())
    }

    /// One ADD of the node's galactic-ipam (the release build the image holds) for `pod`, with
    /// the store where the node config puts it, inside the simulated host root.
    fn allocate(&self, host: &HostRoot, pod: &str) -> Result<()> {
        let config = host.path("rollback-node-config.json");
        let node = json!({
            "ipam_data_dir": host.path("var/lib/galactic/ipam"),
            "ipam_legacy_dir": host.path("var/lib/cni/galactic-ipam"),
            "log_file": host.path("var/log/galactic/galactic-cni.log"),
        });
        std::fs::write(&config, node.to_string()).context("write the allocation's node config")?;
        let stanza = json!({"cniVersion": "1.1.0", "name": "rollback", "type": "galactic-cni",
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd00:10:ff01::/64",
                     "ipv4_subnet": "10.1.0.0/24"}});
        let mut child = std::process::Command::new(self.plugins.join("galactic-ipam"))
            .envs([
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", pod),
                ("CNI_IFNAME", "eth0"),
                ("CNI_NETNS", "/var/run/netns/rollback"),
                ("CNI_PATH", "/opt/cni/bin"),
            ])
            .env("GALACTIC_CNI_NODE_CONFIG", &config)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("run galactic-ipam")?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin
                .write_all(stanza.to_string().as_bytes())
                .context("write the stanza")?;
        }
        let out = child.wait_with_output().context("wait for galactic-ipam")?;
        std::fs::remove_file(&config).context("remove the allocation's node config")?;
        if !out.status.success() {
            fail!(
                "galactic-ipam ADD for {pod}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Ok(())
    }
}

/// What `install.sh rollback` must leave (f): write-markers' JSON report first on `stdout`, the
/// Go allocator's markers of both live allocations, and the Go conflist back in the conf dir.
fn expect_rolled_back(host: &HostRoot, stdout: &[u8]) -> Result<()> {
    // write-markers' JSON report, then the paths install.sh changed.
    let report: Value = serde_json::Deserializer::from_slice(stdout)
        .into_iter()
        .next()
        .and_then(|r| r.ok())
        .ok_or_else(|| Error::failed("write-markers printed no JSON report".to_owned()))?;
    // A /96 slot of the /64 pool holds 256 of the Go allocator's candidates, an IPv4 address 1.
    expect("markers written", &report["written"], &json!(2 * 256 + 2))?;
    let markers = |pool: &str| {
        std::fs::read_dir(host.path(&format!("var/lib/cni/galactic-ipam/{pool}")))
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name() != "lock")
                    .count()
            })
            .unwrap_or(0)
    };
    expect(
        "IPv6 markers",
        &json!(markers("fd00:10:ff01::-64")),
        &json!(512),
    )?;
    expect("IPv4 markers", &json!(markers("10.1.0.0-24")), &json!(2))?;
    let read = |path: &str| std::fs::read(host.path(path)).ok();
    if read("etc/cni/net.d/10-galactic.conflist").is_none()
        || read("etc/cni/net.d/10-galactic.conflist")
            != read("etc/galactic/datapath/10-galactic.conflist")
    {
        fail!("the Go conflist is not back in the conf dir with the node's settings");
    }
    Ok(())
}

/// The installer's message for a failed export names what failed and what the operator can
/// do: fix the node's access to the API server, or place the export by hand.
fn expect_actionable(stderr: &str) -> Result<()> {
    for needed in [
        "could not export the BGPAdvertisement annotations of namespace galactic-system",
        "kubectl get bgpadvertisements -n galactic-system -o json > /var/lib/galactic/ipam/legacy-annotations.json",
    ] {
        if !stderr.contains(needed) {
            fail!(
                "the message does not say what to do (no `{needed}`): {}",
                stderr.trim()
            );
        }
    }
    Ok(())
}

/// The Go node's settings its conflist carried, as node.json must keep them: those the shipped
/// DaemonSet leaves empty. It sets `GALACTIC_CNI_LOG_LEVEL` (info), which wins over the Go
/// conflist's level (docs/operations.md, "Carry the settings").
fn carried_settings() -> Vec<(&'static str, Value)> {
    vec![
        ("egress_shard_sids", json!(GO_SHARD_SIDS)),
        ("ebpf_interfaces", json!(GO_UPLINKS)),
    ]
}

/// The kubelet's part of `hostPath` volumes: `DirectoryOrCreate` made, `Directory` required.
fn prepare_host_dirs(container: &Container) -> Result<()> {
    for dir in &container.create_dirs {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    if let Some(missing) = container.require_dirs.iter().find(|d| !d.is_dir()) {
        return Err(Error::failed(format!(
            "hostPath {} (type Directory) does not exist: the kubelet would not start {}",
            missing.display(),
            container.name
        )));
    }
    Ok(())
}

fn node_config(host: &HostRoot) -> Result<Value> {
    let path = host.path("/etc/galactic/node.json");
    let bytes = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::failed(format!("node.json is not JSON: {e}")))
}

fn expect_mode(tree: &Tree, path: &str, mode: u32) -> Result<()> {
    match tree.get(path).and_then(Entry::mode) {
        Some(m) if m == mode => Ok(()),
        Some(m) => Err(Error::failed(format!(
            "{path} has mode {m:o}, want {mode:o}"
        ))),
        None => Err(Error::failed(format!("{path} is missing"))),
    }
}

fn expect(what: &str, got: &Value, want: &Value) -> Result<()> {
    if got != want {
        return Err(Error::failed(format!("{what}: got {got}, want {want}")));
    }
    Ok(())
}

fn last_line(text: &str) -> &str {
    text.trim().lines().last().unwrap_or_default()
}
