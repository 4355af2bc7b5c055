use super::*;
use crate::cni::IpConfig;
use std::cell::RefCell;
use std::collections::HashMap;

/// A plugin that records what it was asked and fails on demand.
#[derive(Default)]
struct Probe {
    seen: RefCell<Vec<(Command, bool)>>,
    fail_with: Option<CniError>,
}

impl Probe {
    fn outcome<T>(&self, req: &Request, ok: T) -> Result<T, CniError> {
        self.seen
            .borrow_mut()
            .push((req.env.command, req.decode_error.is_some()));
        match &self.fail_with {
            Some(e) => Err(e.clone()),
            None => Ok(ok),
        }
    }
}

impl Plugin for Probe {
    type Error = CniError;
    fn name(&self) -> &'static str {
        "probe"
    }
    fn add(&self, req: &Request) -> Result<CniResult, CniError> {
        let ip = IpConfig {
            address: "10.0.0.2/32".parse().unwrap(),
            gateway: None,
            interface: None,
            extra: Default::default(),
        };
        self.outcome(
            req,
            CniResult {
                ips: vec![ip],
                ..Default::default()
            },
        )
    }
    fn del(&self, req: &Request) -> Result<(), CniError> {
        self.outcome(req, ())
    }
    fn check(&self, req: &Request) -> Result<(), CniError> {
        self.outcome(req, ())
    }
    fn status(&self, req: &Request) -> Result<(), CniError> {
        self.outcome(req, ())
    }
    fn gc(&self, req: &Request) -> Result<(), CniError> {
        self.outcome(req, ())
    }
}

fn env(command: &str, node_config: &str) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/var/run/netns/c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/nonexistent"),
        ("GALACTIC_CNI_NODE_CONFIG", node_config),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    move |k| map.get(k).cloned()
}

const CONF_1_0: &[u8] = br#"{"cniVersion":"1.0.0","name":"net","type":"probe"}"#;
const CONF_1_1: &[u8] = br#"{"cniVersion":"1.1.0","name":"net","type":"probe"}"#;

fn node_config() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.json");
    let log = dir.path().join("log.jsonl");
    std::fs::write(&path, serde_json::json!({"log_file": log}).to_string()).unwrap();
    let text = path.to_string_lossy().into_owned();
    (dir, text)
}

#[test]
fn add_prints_the_result_in_the_config_version() {
    let (_dir, node) = node_config();
    for conf in [CONF_1_0, CONF_1_1] {
        let reply = execute(&Probe::default(), env("ADD", &node), conf.to_vec());
        assert!(reply.success);
        let out = reply.stdout.unwrap();
        let version: Value = serde_json::from_slice(conf).unwrap();
        assert_eq!(out["cniVersion"], version["cniVersion"]);
        assert_eq!(out["ips"][0]["address"], "10.0.0.2/32");
    }
}

#[test]
fn version_needs_nothing_and_tolerates_empty_stdin() {
    let only_command = |k: &str| (k == "CNI_COMMAND").then(|| "VERSION".to_owned());
    let reply = execute(&Probe::default(), only_command, Vec::new());
    assert!(reply.success);
    assert_eq!(
        reply.stdout.unwrap()["supportedVersions"],
        serde_json::json!(["1.0.0", "1.1.0"])
    );
}

#[test]
fn status_and_gc_need_a_1_1_config() {
    let (_dir, node) = node_config();
    for command in ["STATUS", "GC"] {
        let reply = execute(&Probe::default(), env(command, &node), CONF_1_0.to_vec());
        assert!(!reply.success);
        assert_eq!(reply.stdout.unwrap()["code"], 1);
        let reply = execute(&Probe::default(), env(command, &node), CONF_1_1.to_vec());
        assert!(reply.success && reply.stdout.is_none(), "{command}");
    }
}

#[test]
fn errors_are_printed_with_their_code_and_a_failing_exit() {
    let (_dir, node) = node_config();
    let probe = Probe {
        fail_with: Some(CniError::invalid_config("bad stanza")),
        ..Default::default()
    };
    let reply = execute(&probe, env("CHECK", &node), CONF_1_0.to_vec());
    assert!(!reply.success);
    let out = reply.stdout.unwrap();
    assert_eq!(
        (out["code"].as_u64(), out["cniVersion"].as_str()),
        (Some(7), Some("1.0.0"))
    );
}

#[test]
fn del_never_fails_the_runtime_except_to_ask_for_a_retry() {
    let (_dir, node) = node_config();
    let broken = Probe {
        fail_with: Some(CniError::io("disk on fire")),
        ..Default::default()
    };
    let reply = execute(&broken, env("DEL", &node), CONF_1_0.to_vec());
    assert!(reply.success && reply.stdout.is_none());

    let busy = Probe {
        fail_with: Some(CniError::try_again_later("lock timeout")),
        ..Default::default()
    };
    let reply = execute(&busy, env("DEL", &node), CONF_1_0.to_vec());
    assert!(!reply.success);
    assert_eq!(reply.stdout.unwrap()["code"], 11);
}

#[test]
fn del_runs_even_on_an_undecodable_config() {
    let (_dir, node) = node_config();
    let probe = Probe::default();
    for stdin in [
        &b"{garbage"[..],
        b"",
        br#"{"cniVersion":"0.3.1","name":"n","type":"t"}"#,
    ] {
        let reply = execute(&probe, env("DEL", &node), stdin.to_vec());
        assert!(reply.success);
    }
    assert_eq!(probe.seen.borrow().len(), 3, "the handler ran every time");
    assert!(probe
        .seen
        .borrow()
        .iter()
        .all(|(c, undecoded)| *c == Command::Del && *undecoded));
}

#[test]
fn a_malformed_node_config_fails_add_but_not_del() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.json");
    std::fs::write(&path, "{oops").unwrap();
    let node = path.to_string_lossy().into_owned();
    let reply = execute(&Probe::default(), env("ADD", &node), CONF_1_0.to_vec());
    assert_eq!(reply.stdout.unwrap()["code"], 7);
    let reply = execute(&Probe::default(), env("DEL", &node), CONF_1_0.to_vec());
    assert!(reply.success);
}

#[test]
fn missing_or_unknown_command_is_code_4() {
    let reply = execute(&Probe::default(), |_: &str| None, CONF_1_0.to_vec());
    assert_eq!(reply.stdout.unwrap()["code"], 4);
    let unknown = |k: &str| (k == "CNI_COMMAND").then(|| "FROB".to_owned());
    let reply = execute(&Probe::default(), unknown, CONF_1_0.to_vec());
    assert_eq!(reply.stdout.unwrap()["code"], 4);
}
