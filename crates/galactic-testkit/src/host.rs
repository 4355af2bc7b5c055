//! A throwaway node for process-level plugin tests: a "host" network namespace the plugins run
//! in, a node config and state directory, a CNI bin dir with the workspace's plugins, a runtime
//! ([`Host::runtime`]) and pods (more namespaces).

use super::apiserver::ApiServer;
use super::privileged::TestNetns;
use super::runtime::{Attachment, Runtime};
use super::{workspace_binary, Invocation, TestNode};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Every plugin binary the workspace builds.
pub use galactic_core::plugins::BINARIES as PLUGINS;

/// The plugins' host.
pub struct Host {
    /// The host namespace.
    pub netns: TestNetns,
    /// Node config and state.
    pub node: TestNode,
    /// The CNI bin dir (`CNI_PATH`).
    pub bin_dir: PathBuf,
}

impl Host {
    /// A host whose node config has `node_extra` merged in and whose bin dir holds `plugins`.
    pub fn new(tag: &str, node_extra: Value, plugins: &[&str]) -> Self {
        let node = TestNode::new(node_extra);
        let bin_dir = bin_dir(&node, plugins);
        Self {
            netns: TestNetns::node_host(tag),
            node,
            bin_dir,
        }
    }

    /// A runtime on this host: its node, its bin dir, plugins run in its namespace.
    pub fn runtime(&self) -> Runtime<'_> {
        Runtime::new(&self.node, &self.bin_dir, Some(self.netns.name()))
    }

    /// One plugin process for `pod` in the host namespace, for tests that call a plugin in a
    /// way no runtime would (hostile variables, no list, …); everything else goes through
    /// [`Host::runtime`].
    pub fn invocation<'a>(&self, binary: &'a Path, command: &str, pod: &Pod) -> Invocation<'a> {
        Invocation::new(binary, command, &self.node)
            .attachment(&pod.id, &pod.netns_path(), &pod.ifname, &self.bin_dir)
            .in_netns(self.netns.name())
    }

    /// Everything a call could have changed on this node: links, rules and routes of every
    /// table, the nftables ruleset, and every file under the node's directory (state, IPAM
    /// store, legacy markers, and whatever a configuration could have named there) except the
    /// log, which is allowed to grow, and lock files.
    pub fn snapshot(&self) -> Vec<String> {
        let mut out = Vec::new();
        for args in [
            vec!["-o", "link", "show"],
            vec!["-4", "rule", "show"],
            vec!["-6", "rule", "show"],
            vec!["-4", "route", "show", "table", "all"],
            vec!["-6", "route", "show", "table", "all"],
        ] {
            out.push(without_link_local(&self.netns.ip(&args)));
        }
        let nft = self.netns.exec(&["nft", "list", "ruleset"]);
        out.push(String::from_utf8_lossy(&nft.stdout).into_owned());
        // Lock files are a fixed set, created once and never state (`state/locks/`, `*.lock`).
        out.extend(files(self.node.dir.path()).into_iter().filter(|f| {
            !(f.ends_with("galactic.log")
                || f.ends_with("galactic.log.1")
                || f.ends_with(".lock")
                || f.contains("/locks/"))
        }));
        out
    }

    /// `None` while [`Host::snapshot`] still equals `before`; otherwise the entries that are new
    /// (a whole dump for a changed route or rule listing, a path for a file).
    pub fn changed_since(&self, before: &[String]) -> Option<Vec<String>> {
        let after = self.snapshot();
        (after != before).then(|| after.into_iter().filter(|a| !before.contains(a)).collect())
    }

    /// A data directory under the node's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.node.dir.path().join(name)
    }

    /// A loopback Kubernetes API server listening in the host namespace (where the plugins run,
    /// so `127.0.0.1` is its loopback), with the node config's kubeconfig pointing at it.
    pub fn start_apiserver(&self) -> ApiServer {
        use galactic_core::net::netns::{run_in, Netns};
        let ns = Netns::open(&self.netns.path()).expect("open the host namespace");
        let server = run_in(&ns, ApiServer::start)
            .expect("enter the host namespace")
            .expect("start the API server");
        use_apiserver(&self.node, &server);
        server
    }
}

/// Points `node`'s kubeconfig at `server` (the kubeconfig file lives in the node's directory).
pub fn use_apiserver(node: &TestNode, server: &ApiServer) {
    let kubeconfig = node.dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("write the kubeconfig");
    node.merge_config(json!({ "kubeconfig": kubeconfig }));
}

/// A CNI bin dir under `node`'s directory holding the workspace's `plugins`.
pub fn bin_dir(node: &TestNode, plugins: &[&str]) -> PathBuf {
    let dir = node.dir.path().join("bin");
    std::fs::create_dir_all(&dir).expect("create the bin dir");
    for name in plugins {
        std::os::unix::fs::symlink(built(name), dir.join(name)).expect("link a plugin");
    }
    dir
}

/// [`workspace_binary`], built once per test process.
fn built(name: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .get_or_insert_with(HashMap::new)
        .entry(name.to_owned())
        .or_insert_with(|| workspace_binary(name))
        .clone()
}

/// A pod: a namespace, a container id and an interface name.
pub struct Pod {
    /// Its namespace.
    pub ns: TestNetns,
    /// `CNI_CONTAINERID`.
    pub id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

impl Pod {
    /// A pod with `eth0`.
    pub fn new(tag: &str) -> Self {
        Self {
            ns: TestNetns::new(tag),
            id: format!("cid-{tag}-{}", std::process::id()),
            ifname: "eth0".into(),
        }
    }

    /// `CNI_NETNS`.
    pub fn netns_path(&self) -> String {
        self.ns.path().display().to_string()
    }

    /// What a runtime knows of this pod's attachment: container id, netns, ifname.
    pub fn attachment(&self) -> Attachment {
        Attachment::new(&self.id, &self.netns_path(), &self.ifname)
    }

    /// One ping (1 s deadline) from the pod.
    pub fn ping(&self, target: &str) -> bool {
        self.ping_with(target, &["-c", "1", "-W", "1"])
    }

    /// Whether `target` answers any of three echo requests (for paths that may need a moment,
    /// such as neighbour resolution through a router).
    pub fn reaches(&self, target: &str) -> bool {
        self.ping_with(target, &["-c", "3", "-i", "0.2", "-W", "2", "-n", "-q"])
    }

    fn ping_with(&self, target: &str, options: &[&str]) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        let mut argv = vec!["ping", family];
        argv.extend_from_slice(options);
        argv.push(target);
        self.ns.exec(&argv).status.success()
    }
}

/// The bare address (no prefix) of `result.ips[i]`.
pub fn ip_of(result: &Value, i: usize) -> String {
    result["ips"][i]["address"]
        .as_str()
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Every file under `dir` (not directories: creating an empty state directory is not state),
/// sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else {
                out.push(path.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Whether a line of `ip route show` is one of the kernel's IPv6 link-local or multicast
/// entries: the kernel adds them some time after a link comes up (after duplicate address
/// detection), so a snapshot taken right after an ADD may or may not hold them. No plugin writes
/// them; links themselves are compared.
pub fn is_kernel_link_local(route: &str) -> bool {
    route.contains("fe80:") || route.starts_with("multicast ff00::/8")
}

/// A route dump without [`is_kernel_link_local`] lines.
fn without_link_local(dump: &str) -> String {
    dump.lines()
        .filter(|l| !is_kernel_link_local(l))
        .map(|l| format!("{l}\n"))
        .collect()
}
