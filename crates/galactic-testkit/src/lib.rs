//! Test fixtures shared by the plugin crates: running a plugin binary exactly as a runtime does,
//! and the black-box protocol suite every binary must pass.
//!
//! Each run gets a throwaway node config whose log file and state directory live in a temporary
//! directory, so tests never read or write the machine's `/etc/galactic` or `/var/log`.

pub mod apiserver;
/// Throwaway namespaces and the privileged-test marker (galactic-testns, re-exported).
pub use galactic_testns::{privileged, test_name};
pub mod bpffs;
pub mod disk;
pub mod fuzz;
pub mod harness;
pub mod host;
pub mod inspect;
pub mod process;
pub mod repair;
pub mod route_node;
pub mod runtime;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A throwaway node: node config, log file and state directory in a temporary directory.
pub struct TestNode {
    /// The temporary directory (removed on drop).
    pub dir: tempfile::TempDir,
    /// Path of the node config file.
    pub node_config: PathBuf,
}

impl TestNode {
    /// A node config with `extra` keys merged over the test defaults.
    pub fn new(extra: Value) -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        // The IPAM store, the upstream marker root, the Kata DAN files and the tap RA records
        // live in the node's directory too: tests never touch the machine's /var/lib/cni or
        // /run/kata-containers.
        let mut config = json!({
            "log_file": dir.path().join("galactic.log"),
            "log_level": "debug",
            "state_dir": dir.path().join("state"),
            "ipam_data_dir": dir.path().join("ipam"),
            "ipam_legacy_dir": dir.path().join("legacy"),
            "dan_dir": dir.path().join("dans"),
            "radv_state_dir": dir.path().join("ra"),
            "publisher": "local",
        });
        if let (Some(map), Value::Object(extra)) = (config.as_object_mut(), extra) {
            map.extend(extra);
        }
        if let (Some(map), Some(forced)) = (config.as_object_mut(), forced_routing_domain()) {
            // A test that names a backend tests that backend; every other node takes the
            // tier's, so a VRF kernel run cannot quietly fall back to `table`.
            let unspecified = map
                .get("routing_domain")
                .is_none_or(|v| v.as_str() == Some("auto"));
            if unspecified {
                map.insert("routing_domain".into(), Value::String(forced));
            }
        }
        let node_config = dir.path().join("node.json");
        std::fs::write(&node_config, config.to_string()).expect("write the node config");
        Self { dir, node_config }
    }

    /// Merges `extra` keys into the node config file, for values known only once the node
    /// exists (a kubeconfig in its directory, …).
    pub fn merge_config(&self, extra: Value) {
        let text = std::fs::read_to_string(&self.node_config).expect("read the node config");
        let mut config: Value = serde_json::from_str(&text).expect("the node config is JSON");
        if let (Some(map), Value::Object(extra)) = (config.as_object_mut(), extra) {
            map.extend(extra);
        }
        std::fs::write(&self.node_config, config.to_string()).expect("write the node config");
    }

    /// Records, as a master's ADD would, that container `cid` (network `network`, interface
    /// `ifname`, `netns`) holds VPC `vpc`'s attachment `att` on this node: for tests that run a
    /// chained plugin with a prevResult of their own instead of running the master.
    pub fn record_master(
        &self,
        network: &str,
        cid: &str,
        ifname: &str,
        netns: &str,
        ids: (&str, &str),
    ) {
        use galactic_core::attachment::{Kind, Record, Records};
        let (vpc, att) = ids;
        let parsed = galactic_core::ident::ChainIds::of(&json!({"vpc": vpc, "vpcattachment": att}))
            .expect("valid ids");
        let record = Record {
            network: network.to_owned(),
            container_id: cid.to_owned(),
            ifname: ifname.to_owned(),
            netns: Some(netns.to_owned()),
            kind: Kind::Veth,
            vpc: vpc.to_owned(),
            attachment: att.to_owned(),
            host_ifname: parsed.host_ifname(),
            ipam_type: None,
            stage: Default::default(),
            configured: None,
        };
        Records::new(&self.dir.path().join("state"))
            .put(&record)
            .expect("write the attachment record");
    }

    /// Removes what [`TestNode::record_master`] recorded for (network, container, interface), as
    /// the master's DEL would.
    pub fn forget_master(&self, network: &str, cid: &str, ifname: &str) {
        let records = galactic_core::attachment::Records::new(&self.dir.path().join("state"));
        if let Some(record) = records
            .find(network, cid, ifname)
            .expect("read the records")
        {
            records
                .remove(&record.host_ifname)
                .expect("remove the attachment record");
        }
    }

    /// The IPAM store directory (the node config's `ipam_data_dir`).
    pub fn ipam_dir(&self) -> PathBuf {
        self.dir.path().join("ipam")
    }

    /// Every allocation in the node's IPAM store (`galactic-ipam list`), as
    /// `"<containerId>/<ifname>/<network>: <address> <address>"` lines; empty when there is no
    /// store yet. Judges the store itself, not a CHECK that could fail for another reason.
    pub fn ipam_holdings(&self) -> Vec<String> {
        if !self.ipam_dir().join("ipam.db").exists() {
            return Vec::new();
        }
        let out = Command::new(workspace_binary("galactic-ipam"))
            .args(["list", "--data-dir"])
            .arg(self.ipam_dir())
            .output()
            .expect("run galactic-ipam list");
        assert!(
            out.status.success(),
            "galactic-ipam list: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("a JSON list");
        list.iter()
            .map(|h| {
                let addresses: Vec<&str> = h["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                format!(
                    "{}/{}/{}: {}",
                    h["containerId"].as_str().unwrap_or_default(),
                    h["ifname"].as_str().unwrap_or_default(),
                    h["network"].as_str().unwrap_or_default(),
                    addresses.join(" ")
                )
            })
            .collect()
    }

    /// The upstream IPAM marker root the node imports from (`ipam_legacy_dir`).
    pub fn legacy_dir(&self) -> PathBuf {
        self.dir.path().join("legacy")
    }

    /// The log file's lines, parsed, as written (one per operation at info).
    pub fn raw_log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("galactic.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("every log line is JSON"))
            .collect()
    }

    /// Every record logged: each line, and after it each of the info `events` its operation
    /// folded into it, as a record of its own with the line's context (plugin, command, …).
    pub fn log_lines(&self) -> Vec<Value> {
        let mut records = Vec::new();
        for line in self.raw_log_lines() {
            let events = line["events"].as_array().cloned().unwrap_or_default();
            records.push(line.clone());
            for event in events {
                let mut record = line.clone();
                if let (Some(record), Some(event)) = (record.as_object_mut(), event.as_object()) {
                    record.remove("events");
                    record.remove("durationMs");
                    record.insert("level".into(), "INFO".into());
                    record.extend(event.clone());
                }
                records.push(record);
            }
        }
        records
    }
}

/// Environment variable that makes every throwaway node whose test does not name a routing
/// domain backend (`routing_domain` absent or `auto`) use this one (`vrf` or `table`): the
/// production-kernel tier (`cargo xtask test-kernel`) sets `vrf`.
pub const ROUTING_DOMAIN_ENV: &str = "GALACTIC_TEST_ROUTING_DOMAIN";

/// Environment variable saying that every workspace binary is already built next to the test
/// binaries, so [`workspace_binary`] must not run `cargo build` (the production-kernel tier's
/// guest has neither a writable `target/` nor the time to compile).
pub const PREBUILT_ENV: &str = "GALACTIC_TEST_PREBUILT";

fn forced_routing_domain() -> Option<String> {
    let value = std::env::var(ROUTING_DOMAIN_ENV).ok()?;
    assert!(
        matches!(value.as_str(), "vrf" | "table" | "auto"),
        "{ROUTING_DOMAIN_ENV}={value:?}: expected vrf, table or auto"
    );
    Some(value)
}

/// What a plugin process did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status was 0.
    pub success: bool,
    /// Raw stdout.
    pub stdout: String,
    /// Raw stderr.
    pub stderr: String,
}

impl Outcome {
    /// stdout parsed as exactly one JSON value (panics otherwise: stdout must never carry more).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {:?}", self.stdout))
    }

    /// Asserts a CNI error with `code` and a non-zero exit; returns the message.
    pub fn expect_error(&self, code: u64) -> String {
        assert!(
            !self.success,
            "expected failure with code {code}, got success: {self:?}"
        );
        let out = self.json();
        assert_eq!(out["code"].as_u64(), Some(code), "wrong code: {out}");
        let msg = out["msg"].as_str().unwrap_or_default().to_owned();
        assert!(!msg.is_empty(), "error without a message: {out}");
        msg
    }

    /// Asserts success; returns the result on stdout (ADD).
    pub fn expect_result(&self) -> Value {
        assert!(self.success, "expected success: {self:?}");
        self.json()
    }

    /// Asserts success with nothing on stdout (DEL/CHECK/STATUS/GC).
    pub fn expect_quiet_success(&self) {
        assert!(self.success, "expected success: {self:?}");
        assert!(
            self.stdout.trim().is_empty(),
            "stdout must be empty: {:?}",
            self.stdout
        );
    }
}

/// One invocation of a plugin binary, built like a runtime builds it.
pub struct Invocation<'a> {
    binary: &'a Path,
    env: Vec<(String, String)>,
    stdin: Vec<u8>,
    netns: Option<String>,
}

impl<'a> Invocation<'a> {
    /// `binary` with `CNI_COMMAND=command` and the node config of `node`; nothing else inherited
    /// but `PATH`.
    pub fn new(binary: &'a Path, command: &str, node: &TestNode) -> Self {
        let mut env = vec![
            ("CNI_COMMAND".to_owned(), command.to_owned()),
            (
                "GALACTIC_CNI_NODE_CONFIG".to_owned(),
                node.node_config.display().to_string(),
            ),
        ];
        if let Ok(path) = std::env::var("PATH") {
            env.push(("PATH".to_owned(), path));
        }
        Self {
            binary,
            env,
            stdin: Vec::new(),
            netns: None,
        }
    }

    /// Runs the plugin inside the named network namespace (`ip netns exec`): the plugin's
    /// "host" in privileged tests.
    pub fn in_netns(mut self, name: &str) -> Self {
        self.netns = Some(name.to_owned());
        self
    }

    /// Adds the per-attachment variables (container id, netns, ifname, CNI_PATH).
    pub fn attachment(
        self,
        container_id: &str,
        netns: &str,
        ifname: &str,
        cni_path: &Path,
    ) -> Self {
        self.var("CNI_CONTAINERID", container_id)
            .var("CNI_NETNS", netns)
            .var("CNI_IFNAME", ifname)
            .var("CNI_PATH", &cni_path.display().to_string())
    }

    /// Sets (or replaces) one variable.
    pub fn var(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Removes one variable.
    pub fn unset(mut self, key: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self
    }

    /// Sets stdin.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = bytes.into();
        self
    }

    /// Runs the process to completion.
    pub fn run(self) -> Outcome {
        use std::io::Write;
        let mut child = self
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.binary.display()));
        if let Some(mut input) = child.stdin.take() {
            // A plugin may exit before reading everything (e.g. VERSION); that is fine.
            let _ = input.write_all(&self.stdin);
        }
        let output = child.wait_with_output().expect("wait for the plugin");
        Outcome {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Invocation<'_> {
    /// The process to start: the binary (inside the host namespace when one is set) with
    /// exactly this invocation's environment.
    pub(crate) fn command(&self) -> Command {
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(self.binary);
                c
            }
            None => Command::new(self.binary),
        };
        command.env_clear().envs(self.env.iter().cloned());
        command
    }
}

/// How a binary is expected to answer STATUS on a valid 1.1.0 stanza.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectStatus {
    /// Ready: exit 0, empty stdout.
    Ready,
    /// Not ready: code 50 with a message.
    NotAvailable,
}

/// The CNI protocol behaviour every plugin binary shares, checked as a black box: `stanza` is a
/// valid plugin entry (without `cniVersion`, which the suite sets).
pub fn protocol_suite(binary: &Path, stanza: Value, status: ExpectStatus) {
    let suite = ProtocolSuite::new(binary, stanza);
    suite.versions();
    suite.status_and_gc(status);
    suite.refused_input();
    suite.del_of_refused_input();
    suite.logs();
}

/// One binary's run of [`protocol_suite`]: its node and the stanza each phase sends.
struct ProtocolSuite<'a> {
    binary: &'a Path,
    stanza: Value,
    node: TestNode,
    cni_path: PathBuf,
}

impl<'a> ProtocolSuite<'a> {
    fn new(binary: &'a Path, stanza: Value) -> Self {
        let node = TestNode::new(json!({}));
        let cni_path = node.dir.path().join("bin");
        Self {
            binary,
            stanza,
            node,
            cni_path,
        }
    }

    /// The stanza at `version`.
    fn conf(&self, version: &str) -> String {
        let mut conf = self.stanza.clone();
        conf["cniVersion"] = json!(version);
        conf.to_string()
    }

    /// `command` with a complete, valid attachment environment.
    fn call(&self, command: &str) -> Invocation<'_> {
        Invocation::new(self.binary, command, &self.node).attachment(
            "c0ffee",
            "/var/run/netns/t",
            "eth0",
            &self.cni_path,
        )
    }

    /// VERSION answers at both versions, and with no input at all.
    fn versions(&self) {
        for version in ["1.0.0", "1.1.0"] {
            let out = self
                .call("VERSION")
                .stdin(format!(r#"{{"cniVersion":"{version}"}}"#))
                .run();
            assert!(out.success, "{out:?}");
            assert_eq!(out.json()["supportedVersions"], json!(["1.0.0", "1.1.0"]));
            assert_eq!(out.json()["cniVersion"], json!(version));
        }
        let out = Invocation::new(self.binary, "VERSION", &self.node).run();
        assert!(
            out.success,
            "VERSION with empty stdin and no other variable: {out:?}"
        );
    }

    /// STATUS as expected at 1.1.0 and refused before it; GC with nothing to collect.
    fn status_and_gc(&self, status: ExpectStatus) {
        let out = self.call("STATUS").stdin(self.conf("1.1.0")).run();
        match status {
            ExpectStatus::Ready => out.expect_quiet_success(),
            ExpectStatus::NotAvailable => drop(out.expect_error(50)),
        }
        self.call("STATUS")
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(1);
        self.call("GC")
            .stdin(self.conf("1.1.0"))
            .run()
            .expect_quiet_success();
    }

    /// Unknown commands, broken JSON, old versions and bad variables: each its code and a
    /// message naming what is wrong.
    fn refused_input(&self) {
        let msg = self
            .call("FROB")
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
        assert!(msg.contains("FROB"), "{msg}");
        self.call("ADD").stdin("{not json").run().expect_error(6);
        self.call("ADD").stdin("").run().expect_error(6);
        self.call("CHECK").stdin("[]").run().expect_error(6);
        let msg = self
            .call("ADD")
            .stdin(self.conf("0.4.0"))
            .run()
            .expect_error(1);
        assert!(
            msg.contains("1.0.0, 1.1.0"),
            "names the supported versions: {msg}"
        );
        let msg = self
            .call("ADD")
            .unset("CNI_IFNAME")
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
        assert!(msg.contains("CNI_IFNAME"), "{msg}");
        let msg = self
            .call("ADD")
            .var("CNI_CONTAINERID", "../../etc/x")
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
        assert!(msg.contains("CNI_CONTAINERID"), "{msg}");
        self.call("ADD")
            .var("CNI_IFNAME", "sixteen-chars-xx")
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
        Invocation::new(self.binary, "ADD", &self.node)
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
    }

    /// DEL never fails on an input ADD refuses (nothing was ever created for it), so a runtime
    /// can always finish tearing a pod down.
    fn del_of_refused_input(&self) {
        let long_id = "a".repeat(300);
        for del in [
            self.call("DEL").var("CNI_CONTAINERID", &long_id),
            self.call("DEL").var("CNI_ARGS", "IgnoreUnknown=1;novalue"),
            self.call("DEL").unset("CNI_IFNAME"),
            self.call("DEL").var("CNI_IFNAME", "sixteen-chars-xx"),
        ] {
            del.stdin(self.conf("1.0.0")).run().expect_quiet_success();
        }
        self.call("ADD")
            .var("CNI_CONTAINERID", &long_id)
            .stdin(self.conf("1.0.0"))
            .run()
            .expect_error(4);
    }

    /// Every log line the calls wrote names its plugin and level.
    fn logs(&self) {
        for line in self.node.log_lines() {
            assert!(
                line["plugin"].is_string() && line["level"].is_string(),
                "{line}"
            );
        }
    }
}

/// [`workspace_binary`] as a path that lives as long as the test process: tests outside the
/// crate that owns a binary (the masters' shared flow, say) name it where `CARGO_BIN_EXE_*` is
/// not set.
pub fn plugin_binary(name: &str) -> &'static Path {
    static BUILT: std::sync::Mutex<Vec<(String, &'static Path)>> =
        std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(n, _)| n == name) {
        return path;
    }
    let path: &'static Path = Box::leak(workspace_binary(name).into_boxed_path());
    built.push((name.to_owned(), path));
    path
}

/// Path of a workspace binary next to the running test's own binaries, built on first use when
/// this test run did not build it (e.g. `cargo test -p galactic-master` needs `galactic-cni` and
/// `galactic-ipam`). Every plugin binary is the package of its name.
pub fn workspace_binary(name: &str) -> PathBuf {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile directory")
        .to_path_buf();
    let path = dir.join(name);
    if std::env::var_os(PREBUILT_ENV).is_some() {
        assert!(
            path.is_file(),
            "{} is missing: {PREBUILT_ENV} says every workspace binary was built beforehand",
            path.display()
        );
        return path;
    }
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--bin", name, "--package", name])
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build {name} failed");
    assert!(path.is_file(), "{} was not built", path.display());
    path
}
