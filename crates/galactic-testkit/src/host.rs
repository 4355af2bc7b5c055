//! A throwaway node for process-level plugin tests: a "host" network namespace the plugins run
//! in, a node config and state directory, a CNI bin dir with the workspace's plugins, and pods
//! (more namespaces).

use super::privileged::TestNetns;
use super::{workspace_binary, Invocation, Outcome, TestNode};
use serde_json::Value;
use std::path::{Path, PathBuf};

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
        let netns = TestNetns::node_host(tag);
        let node = TestNode::new(node_extra);
        let bin_dir = node.dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).expect("create the bin dir");
        for name in plugins {
            std::os::unix::fs::symlink(workspace_binary(name), bin_dir.join(name))
                .expect("link a plugin");
        }
        Self {
            netns,
            node,
            bin_dir,
        }
    }

    /// Runs `binary` for `pod` inside the host namespace, as a runtime would.
    pub fn call(&self, binary: &Path, command: &str, pod: &Pod, conf: &Value) -> Outcome {
        self.invocation(binary, command, pod)
            .stdin(conf.to_string())
            .run()
    }

    /// The invocation, for tests that need to adjust it (extra variables, netns gone, …).
    pub fn invocation<'a>(&self, binary: &'a Path, command: &str, pod: &Pod) -> Invocation<'a> {
        Invocation::new(binary, command, &self.node)
            .attachment(&pod.id, &pod.netns_path(), &pod.ifname, &self.bin_dir)
            .in_netns(self.netns.name())
    }

    /// ADD, which must succeed; the result.
    pub fn add(&self, binary: &Path, pod: &Pod, conf: &Value) -> Value {
        let out = self.call(binary, "ADD", pod, conf);
        assert!(out.success, "ADD failed: {out:?}");
        out.json()
    }

    /// A data directory under the node's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.node.dir.path().join(name)
    }
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

    /// One ping (1 s deadline) from the pod.
    pub fn ping(&self, target: &str) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        self.ns
            .exec(&["ping", family, "-c", "1", "-W", "1", target])
            .status
            .success()
    }
}

/// `conf` with `prevResult` set, as a runtime sends it to CHECK and DEL.
pub fn with_prev(conf: &Value, result: &Value) -> Value {
    let mut conf = conf.clone();
    conf["prevResult"] = result.clone();
    conf
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
