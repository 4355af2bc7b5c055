//! Fuzzing of galactic-ipam's untrusted inputs, in process: the `ipam` block, the upstream
//! marker-file layout (directory and file names, file contents) and the BGPAdvertisement
//! annotation JSON. Properties: no panic; a refused block is code 7 with a message; an accepted
//! block is coherent (pool families match their keys, gateways inside their pools, absolute
//! store paths); whatever the legacy readers accept imports into a store that `verify` finds
//! consistent. Seeds: `fuzz/corpus/<target>/`.

use galactic_core::cni::ErrorCode;
use galactic_core::ip::Family;
use galactic_ipam::config::{self, Context, Mode};
use galactic_ipam::error::IpamError;
use galactic_ipam::legacy;
use galactic_ipam::store::{LegacyRecord, Store};
use galactic_testkit::fuzz::proptest::prelude::*;
use galactic_testkit::fuzz::proptest::test_runner::TestCaseError;
use galactic_testkit::fuzz::{self, assert_cni_error, mutations};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// `cases`: the CI pass size (targets that open a store per case are slower).
fn campaign(target: &str, cases: u32, property: impl Fn(&[u8]) -> Result<(), TestCaseError>) {
    fuzz::run_bounded(target, cases, mutations(fuzz::corpus(target)), property);
}

#[test]
fn ipam_block() {
    campaign("ipam-block", 256, |input| {
        let Ok(conf) = serde_json::from_slice::<Value>(input) else {
            return Ok(()); // stdin decoding is the envelope target's concern
        };
        for enable_local_ipam in [false, true] {
            let ctx = Context { enable_local_ipam };
            match config::parse(&conf, ctx) {
                Ok(parsed) => coherent(&conf, &parsed)?,
                Err(e) => {
                    let err = IpamError::from(e).to_cni();
                    prop_assert_eq!(err.code.0, 7, "config errors are code 7: {:?}", err);
                    assert_cni_error(&err)?;
                }
            }
        }
        Ok(())
    });
}

/// What an accepted block must satisfy.
fn coherent(conf: &Value, parsed: &config::IpamConfig) -> Result<(), TestCaseError> {
    // The store's paths and lock bound are node settings now (the node-config target checks
    // them); the block only decides the mode.
    if let Mode::Pools(pools) = &parsed.mode {
        prop_assert!(!pools.is_empty(), "pool mode without a pool");
        for pool in pools {
            prop_assert!(
                pool.network().contains(pool.gateway()),
                "gateway outside its pool"
            );
            prop_assert!(pool.capacity() > 0, "a pool with no usable slot");
            let key = match pool.family() {
                Family::V6 => "ipv6_subnet",
                Family::V4 => "ipv4_subnet",
            };
            // A pool of a family comes from that family's key (an IPv4 CIDR in ipv6_subnet is
            // refused), or, for IPv6 only, from the default local pool when the key is unset or
            // empty and the environment switch is on.
            let raw = conf
                .pointer(&format!("/ipam/{key}"))
                .and_then(Value::as_str);
            match raw.map(str::trim).filter(|r| !r.is_empty()) {
                Some(raw) => {
                    let configured: ipnetwork::IpNetwork = raw.parse().map_err(fail)?;
                    prop_assert!(
                        pool.network().contains(configured.ip()),
                        "{raw} → {}",
                        pool.network()
                    );
                }
                None => prop_assert!(
                    pool.family() == Family::V6
                        && pool.network().to_string() == config::DEFAULT_LOCAL_POOL,
                    "pool {} without its key",
                    pool.network()
                ),
            }
        }
    }
    Ok(())
}

/// Imports `records` into a fresh store and checks it.
fn import_and_verify(records: &[LegacyRecord]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(fail)?;
    let mut store = Store::open_or_create(dir.path(), Duration::from_secs(5)).map_err(fail)?;
    store.import(records).map_err(fail)?;
    // A second import changes nothing (upgrades may be repeated).
    let again = store.import(records).map_err(fail)?;
    prop_assert_eq!(again.imported, 0, "a repeated import added records");
    let report = store.verify().map_err(fail)?;
    prop_assert!(report.problems.is_empty(), "{:?}", report.problems);
    Ok(())
}

#[test]
fn annotation_json() {
    campaign("annotations", 64, |input| {
        let Ok(json) = serde_json::from_slice::<Value>(input) else {
            return Ok(());
        };
        let parsed = legacy::read_annotations(&json);
        for record in &parsed.records {
            prop_assert!(!record.container_id.is_empty());
        }
        import_and_verify(&parsed.records)
    });
}

/// Whether `name` can be one path component.
fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && name.len() < 200
}

/// Writes the layout `{pool dir: {file: content}}` under `root`.
fn write_layout(root: &Path, layout: &Value) -> Result<(), TestCaseError> {
    let Some(dirs) = layout.as_object() else {
        return Ok(());
    };
    for (dir, files) in dirs.iter().filter(|(d, _)| usable_name(d)) {
        let path = root.join(dir);
        std::fs::create_dir_all(&path).map_err(fail)?;
        let Some(files) = files.as_object() else {
            continue;
        };
        for (file, content) in files.iter().filter(|(f, _)| usable_name(f)) {
            let text = content
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| content.to_string());
            std::fs::write(path.join(file), text).map_err(fail)?;
        }
    }
    Ok(())
}

#[test]
fn legacy_marker_names() {
    campaign("legacy-markers", 64, |input| {
        let Ok(layout) = serde_json::from_slice::<Value>(input) else {
            return Ok(());
        };
        let root = tempfile::tempdir().map_err(fail)?;
        write_layout(root.path(), &layout)?;
        let parsed = legacy::read_markers(root.path()).map_err(fail)?;
        import_and_verify(&parsed.records)
    });
}
