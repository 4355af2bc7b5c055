//! Fuzzing of the shared parsers every plugin runs on untrusted input, in process: the stdin
//! envelope (`NetConf`), `prevResult` of both spec versions and the GC attachment lists, the
//! `CNI_*` environment with `CNI_ARGS`, the node config file, and the master stanza (veth and
//! tap). Property: no panic, and every refusal is a CNI error with a known code and a message.
//! Seeds: `fuzz/corpus/<target>/`; budget and replay: `galactic_testkit::fuzz`.

use galactic_core::cni::ErrorCode;
use galactic_core::cni::{CniArgs, CniEnv, Command, NetConf, Request};
use galactic_core::config::NodeConfig;
use galactic_master::conf::MasterConf;
use galactic_master::MasterError;
use galactic_testkit::fuzz::proptest::prelude::*;
use galactic_testkit::fuzz::proptest::test_runner::TestCaseError;
use galactic_testkit::fuzz::{self, assert_cni_error, mutations};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Runs `target` with mutations of its own corpus.
fn campaign(target: &str, property: impl Fn(&[u8]) -> Result<(), TestCaseError>) {
    fuzz::run(target, mutations(fuzz::corpus(target)), property);
}

fn cni(result: Result<(), galactic_core::cni::CniError>) -> Result<(), TestCaseError> {
    match result {
        Ok(()) => Ok(()),
        Err(e) => assert_cni_error(&e),
    }
}

/// The envelope, then everything a handler may derive from it.
fn decode_all(input: &[u8]) -> Result<(), TestCaseError> {
    let conf = match NetConf::decode(input) {
        Ok(conf) => conf,
        Err(e) => return assert_cni_error(&e),
    };
    prop_assert!(!conf.name.is_empty(), "accepted an empty network name");
    prop_assert!(
        !conf.name.contains('/'),
        "accepted a name with a path separator"
    );
    cni(conf.prev_result().map(drop))?;
    cni(conf.valid_attachments().map(drop))
}

#[test]
fn netconf_envelope() {
    campaign("netconf", decode_all);
}

#[test]
fn prev_result_both_versions() {
    campaign("prev-result", |input| {
        decode_all(input)?;
        // An accepted prevResult re-serialises to something that parses to the same value
        // (a chained plugin passes it on unchanged).
        if let Ok(Some(prev)) = NetConf::decode(input).and_then(|c| c.prev_result()) {
            let text =
                serde_json::to_string(&prev).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let again: galactic_core::cni::CniResult =
                serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again, prev);
        }
        Ok(())
    });
}

#[test]
fn cni_args() {
    campaign("cni-args", |input| {
        let raw = String::from_utf8_lossy(input);
        match CniArgs::parse(&raw) {
            Ok(args) => {
                // Every accepted KEY=VALUE pair is retrievable by its key.
                for entry in raw.split(';').filter(|e| !e.is_empty()) {
                    if let Some((k, _)) = entry.split_once('=') {
                        prop_assert!(args.get(k).is_some(), "lost key {k:?}");
                    }
                }
                Ok(())
            }
            Err(e) => {
                prop_assert_eq!(e.code.0, 4);
                assert_cni_error(&e)
            }
        }
    });
}

/// The environment as a JSON object of variables (non-strings are ignored, as if unset).
fn env_of(input: &[u8]) -> BTreeMap<String, String> {
    serde_json::from_slice::<Value>(input)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_owned())))
        .collect()
}

#[test]
fn cni_environment() {
    campaign("cni-env", |input| {
        let env = env_of(input);
        let raw = env.get("CNI_COMMAND").cloned().unwrap_or_default();
        let command = match Command::parse(&raw) {
            Ok(c) => c,
            Err(e) => return assert_cni_error(&e),
        };
        match CniEnv::from_lookup(command, |k| env.get(k).cloned()) {
            Ok(parsed) => {
                if let Some(id) = &parsed.container_id {
                    prop_assert!(!id.as_str().contains('/'), "container id with '/': {id}");
                }
                if let Some(ifname) = &parsed.ifname {
                    prop_assert!(ifname.as_str().len() <= 15, "ifname over 15 bytes");
                }
                Ok(())
            }
            Err(e) => {
                prop_assert_eq!(e.code.0, 4, "environment errors are code 4: {:?}", e);
                assert_cni_error(&e)
            }
        }
    });
}

#[test]
fn node_config_file() {
    let node = TestNode::new(json!({}));
    let dir = &node.dir;
    campaign("node-config", |input| {
        let file = dir.path().join("node.json");
        std::fs::write(&file, input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let none = |_: &str| None::<String>;
        match NodeConfig::resolve_from(&json!({}), &none, &file, None) {
            Ok(node) => {
                prop_assert!(!node.state_dir.as_os_str().is_empty());
                prop_assert!(node.ipam_data_dir.is_absolute(), "relative ipam_data_dir");
                prop_assert!(
                    node.ipam_legacy_dir.is_absolute(),
                    "relative ipam_legacy_dir"
                );
                prop_assert!(node.ipam_lock_timeout > std::time::Duration::ZERO);
                Ok(())
            }
            // The dispatcher turns this into code 7 with the message.
            Err(e) => {
                prop_assert!(!e.to_string().trim().is_empty());
                Ok(())
            }
        }
    });
}

/// A request as the dispatcher builds it for ADD, around `input` as stdin.
fn add_request(input: &[u8]) -> Result<Request, galactic_core::cni::CniError> {
    let env = CniEnv::from_lookup(Command::Add, |k| {
        Some(
            match k {
                "CNI_CONTAINERID" => "c0ffee",
                "CNI_NETNS" => "/var/run/netns/none",
                "CNI_IFNAME" => "eth0",
                "CNI_PATH" => "/nonexistent",
                _ => return None,
            }
            .to_owned(),
        )
    })?;
    Ok(Request {
        env,
        stdin: input.to_vec(),
        conf: NetConf::decode(input)?,
        node: NodeConfig::defaults(),
        decode_error: None,
    })
}

#[test]
fn master_stanza() {
    campaign("master-stanza", |input| {
        let req = match add_request(input) {
            Ok(req) => req,
            Err(e) => return assert_cni_error(&e),
        };
        // The flow's own keys; the tap's are fuzzed in galactic-tap-cni.
        match MasterConf::<serde::de::IgnoredAny>::parse(&req.conf.raw) {
            Ok(conf) => {
                prop_assert!(conf.host_ifname().len() <= 15, "host ifname over 15 bytes");
                if let Some(mtu) = conf.mtu {
                    prop_assert!((68..=65535).contains(&mtu), "mtu {mtu} accepted");
                }
                if let Some(t) = &conf.ipam_type {
                    prop_assert!(!t.contains('/'), "ipam type is a path: {t}");
                }
                Ok(())
            }
            Err(e) => {
                let e = MasterError::from(e).to_cni();
                prop_assert_eq!(e.code.0, 7, "stanza errors are code 7: {:?}", e);
                assert_cni_error(&e)
            }
        }
    });
}
