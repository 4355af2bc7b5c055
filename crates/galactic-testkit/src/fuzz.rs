//! Bounded, corpus-seeded fuzzing of the parsers that take untrusted input.
//!
//! Every target has a seed corpus under `fuzz/corpus/<target>/` (one input per file, valid and
//! known-hostile inputs alike). [`run`] first feeds every seed to the property, then generated
//! inputs: structure-aware JSON mutations of the seeds (replace, remove or add any node, with
//! values chosen to hit edge cases), byte-level mutations (truncate, flip, splice) and inputs
//! built from scratch. The property fails on a panic or on an error that is not a proper CNI
//! error; proptest then shrinks the input before reporting it.
//!
//! Budget: `GALACTIC_FUZZ_SECONDS=N` keeps generating for N seconds per target (`cargo xtask
//! fuzz`); otherwise `GALACTIC_FUZZ_CASES` cases (default [`DEFAULT_CASES`], the CI pass).
//! `GALACTIC_FUZZ_SEED` replays a run (each run prints its seed).

pub use proptest;

use galactic_core::cni::{CniError, Code};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Generated cases per target in a plain `cargo test` run.
pub const DEFAULT_CASES: u32 = 256;
/// Seconds per target (bounded campaigns).
pub const SECONDS_ENV: &str = "GALACTIC_FUZZ_SECONDS";
/// Cases per target when no time budget is given.
pub const CASES_ENV: &str = "GALACTIC_FUZZ_CASES";
/// A 64-bit seed to replay.
pub const SEED_ENV: &str = "GALACTIC_FUZZ_SEED";

/// The seed corpus directory of `target`.
pub fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Every seed of `target`, in file-name order. A target without seeds is a test defect.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// Asserts that `err` is what a runtime can act on: a spec or well-known code and a message.
pub fn assert_cni_error(err: &CniError) -> Result<(), TestCaseError> {
    prop_assert!(
        is_known_code(err.code),
        "unexpected code {} ({})",
        err.code,
        err.msg
    );
    prop_assert!(
        !err.msg.trim().is_empty(),
        "error without a message: {err:?}"
    );
    prop_assert!(
        !err.msg.contains("panicked"),
        "a panic surfaced as an error: {err:?}"
    );
    Ok(())
}

/// Asserts a plugin process's stdout after a failed or successful run: one JSON value, and on
/// failure a CNI error object with a known code that is not the panic hook's.
pub fn assert_process_reply(success: bool, stdout: &str) -> Result<(), TestCaseError> {
    if success {
        if !stdout.trim().is_empty() {
            let parsed: Result<Value, _> = serde_json::from_str(stdout);
            prop_assert!(parsed.is_ok(), "stdout is not one JSON value: {stdout:?}");
        }
        return Ok(());
    }
    let parsed: Result<CniError, _> = serde_json::from_str(stdout);
    match parsed {
        Ok(err) => {
            prop_assert!(
                !err.msg.contains("a bug; please report it"),
                "the plugin panicked: {}",
                err.msg
            );
            assert_cni_error(&err)
        }
        Err(e) => Err(TestCaseError::fail(format!(
            "failure without a CNI error on stdout ({e}): {stdout:?}"
        ))),
    }
}

/// Runs `property` on every seed of `target`, then on generated inputs within the budget, and
/// prints `fuzz <target>: …` with the counts. Panics (failing the test) on the first failure.
pub fn run(
    target: &str,
    strategy: impl Strategy<Value = Vec<u8>>,
    property: impl Fn(&[u8]) -> Result<(), TestCaseError>,
) {
    run_bounded(target, DEFAULT_CASES, strategy, property);
}

/// [`run`] with `default_cases` generated cases when no budget is set (process-level targets
/// cost a process per case).
pub fn run_bounded(
    target: &str,
    default_cases: u32,
    strategy: impl Strategy<Value = Vec<u8>>,
    property: impl Fn(&[u8]) -> Result<(), TestCaseError>,
) {
    let seeds = corpus(target);
    for (i, seed) in seeds.iter().enumerate() {
        if let Err(e) = property(seed) {
            panic!(
                "fuzz {target}: seed #{i} fails: {e}\ninput: {}",
                String::from_utf8_lossy(seed)
            );
        }
    }
    let budget = Budget::from_env(default_cases);
    let seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(random_seed);
    let started = Instant::now();
    let mut generated: u64 = 0;
    let mut round: u64 = 0;
    loop {
        let cases = budget.round_cases();
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..16].copy_from_slice(&round.to_le_bytes());
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2048,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
        let result = runner.run(&strategy, |input| {
            property(&input).map_err(|e| match e {
                TestCaseError::Fail(why) => TestCaseError::fail(format!(
                    "{why}\ninput as text: {}",
                    String::from_utf8_lossy(&input)
                )),
                reject => reject,
            })
        });
        if let Err(e) = result {
            panic!("fuzz {target} (seed {seed:#x}, round {round}): {e}");
        }
        generated += u64::from(cases);
        round += 1;
        if budget.done(started, generated) {
            break;
        }
    }
    println!(
        "fuzz {target}: {} seeds + {generated} generated cases in {:.1} s, seed {seed:#x}, 0 failures",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
}

/// How long a target runs.
enum Budget {
    Time(Duration),
    Cases(u32),
}

impl Budget {
    fn from_env(default_cases: u32) -> Self {
        let number = |key: &str| std::env::var(key).ok().and_then(|v| v.parse::<u64>().ok());
        match (number(SECONDS_ENV), number(CASES_ENV)) {
            (Some(s), _) => Budget::Time(Duration::from_secs(s)),
            (None, Some(c)) => Budget::Cases(u32::try_from(c).unwrap_or(u32::MAX)),
            (None, None) => Budget::Cases(default_cases),
        }
    }

    fn round_cases(&self) -> u32 {
        match self {
            Budget::Time(_) => 256,
            Budget::Cases(c) => *c,
        }
    }

    fn done(&self, started: Instant, generated: u64) -> bool {
        match self {
            Budget::Time(limit) => started.elapsed() >= *limit,
            Budget::Cases(c) => generated >= u64::from(*c),
        }
    }
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS; no extra dependency needed for one number.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// Strings that tend to break parsers of this project's inputs.
const EDGE_STRINGS: &[&str] = &[
    "",
    " ",
    "0",
    "-1",
    "1",
    "A",
    "zzzzzzzzzzzzzz",
    "0x1f",
    "../../etc/passwd",
    "/",
    "a/b",
    "eth0",
    "sixteen-chars-xx",
    "..",
    "1.0.0",
    "1.1.0",
    "0.4.0",
    "galactic-ipam",
    "galactic-cni",
    "fd00::/64",
    "fd00::1/128",
    "fd00::/0",
    "fd00::/129",
    "10.0.0.0/8",
    "10.0.0.1/33",
    "10.0.0.0/32",
    "256.0.0.1",
    "::",
    "::1",
    "fe80::1%eth0",
    "0.0.0.0/0",
    "::/0",
    "1.2.3.4",
    "ipv4",
    "ipv6",
    "IgnoreUnknown=1",
    "K8S_POD_NAME=x;IgnoreUnknown=1",
    "=;=",
    "true",
    "null",
    "\u{0}",
    "é",
    "\u{202e}",
    "\n",
    "local",
    "kubernetes",
];

/// A JSON leaf biased towards edge cases.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(EDGE_STRINGS).prop_map(|s| json!(s)),
        prop::sample::select(&[0i64, 1, -1, 67, 68, 1500, 9000, 65535, 65536, 70000][..])
            .prop_map(|n| json!(n)),
        prop::sample::select(&[u64::MAX, 1 << 32, (1 << 32) - 1, 1 << 53][..])
            .prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        prop::num::f64::NORMAL.prop_map(|f| json!(f)),
        "[ -~]{0,24}".prop_map(Value::String),
        ".{0,12}".prop_map(Value::String),
        (1usize..600).prop_map(|n| json!("x".repeat(n))),
    ]
}

/// Any JSON value (bounded depth and size).
pub fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(KEYS).prop_map(str::to_owned),
        "[a-z_]{1,10}",
    ]
}

/// Keys this project's parsers read, so that additions hit real code paths.
const KEYS: &[&str] = &[
    "cniVersion",
    "name",
    "type",
    "vpc",
    "vpcattachment",
    "mtu",
    "ipam",
    "ipv6_subnet",
    "ipv4_subnet",
    "address_families",
    "static_ip",
    "data_dir",
    "legacy_dir",
    "lock_timeout_ms",
    "prevResult",
    "interfaces",
    "ips",
    "routes",
    "dns",
    "sandbox",
    "interface",
    "address",
    "gateway",
    "dst",
    "gw",
    "terminations",
    "network",
    "via",
    "cni.dev/valid-attachments",
    "cni.dev/attachments",
    "containerID",
    "ifname",
    "runtimeConfig",
    "args",
    "capabilities",
    "owner",
    "group",
    "multi_queue",
    "vnet_hdr",
    "publisher",
    "state_dir",
    "routing_domain",
    "kubeconfig",
    "log_level",
    "namespace",
    "node_name",
    "metadata",
    "annotations",
    "items",
];

/// One structural edit of a JSON document.
#[derive(Debug, Clone)]
enum Edit {
    Replace(Value),
    Remove,
    Insert(String, Value),
    Wrap,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => any_json().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        3 => (key(), any_json()).prop_map(|(k, v)| Edit::Insert(k, v)),
        1 => Just(Edit::Wrap),
    ]
}

/// Applies `edit` at the node chosen by `pick` among all nodes of `doc` (pre-order).
fn apply(doc: &mut Value, pick: usize, edit: Edit) {
    let mut pointers = Vec::new();
    collect_pointers(doc, String::new(), &mut pointers);
    let pointer = pointers[pick % pointers.len()].clone();
    match edit {
        Edit::Replace(v) => {
            if let Some(node) = doc.pointer_mut(&pointer) {
                *node = v;
            }
        }
        Edit::Remove => remove(doc, &pointer),
        Edit::Insert(k, v) => match doc.pointer_mut(&pointer) {
            Some(Value::Object(map)) => {
                map.insert(k, v);
            }
            Some(Value::Array(items)) => items.push(v),
            _ => {}
        },
        Edit::Wrap => {
            if let Some(node) = doc.pointer_mut(&pointer) {
                *node = json!([node.take()]);
            }
        }
    }
}

fn collect_pointers(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let escaped = k.replace('~', "~0").replace('/', "~1");
                collect_pointers(child, format!("{here}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect_pointers(child, format!("{here}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn remove(doc: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < items.len() {
                    items.remove(i);
                }
            }
        }
        _ => {}
    }
}

/// Bytes that unbalance or corrupt JSON.
const SYNTAX: &[&[u8]] = &[
    b"{", b"}", b"\"", b"[", b",", b"\\u0000", b"\\ud800", b"\xff",
];

/// One byte-level edit.
#[derive(Debug, Clone)]
enum ByteEdit {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Splice(usize, usize),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        any::<usize>().prop_map(ByteEdit::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Flip(i, b)),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..8),
                prop::sample::select(SYNTAX).prop_map(<[u8]>::to_vec),
            ]
        )
            .prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| ByteEdit::Splice(a, b)),
    ]
}

fn apply_bytes(mut data: Vec<u8>, edit: ByteEdit) -> Vec<u8> {
    let len = data.len().max(1);
    match edit {
        ByteEdit::Truncate(i) => data.truncate(i % len),
        ByteEdit::Flip(i, b) => {
            if let Some(byte) = data.get_mut(i % len) {
                *byte ^= b | 1;
            }
        }
        ByteEdit::Insert(i, bytes) => {
            let at = (i % len).min(data.len());
            data.splice(at..at, bytes);
        }
        ByteEdit::Splice(a, b) => {
            // Duplicates a slice: repeated keys and unbalanced nesting.
            let (a, b) = (a % len, b % len);
            let (lo, hi) = (a.min(b).min(data.len()), a.max(b).min(data.len()));
            let copy = data[lo..hi].to_vec();
            data.splice(hi..hi, copy);
        }
    }
    data
}

/// Inputs derived from `seeds`: structure-aware JSON edits (most), byte edits, and fresh
/// documents.
pub fn mutations(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let docs: Vec<Value> = seeds
        .iter()
        .filter_map(|s| serde_json::from_slice(s).ok())
        .collect();
    let structural = (
        prop::sample::select(if docs.is_empty() {
            vec![json!({})]
        } else {
            docs
        }),
        prop::collection::vec((any::<usize>(), edit()), 1..5),
    )
        .prop_map(|(mut doc, edits)| {
            for (pick, e) in edits {
                apply(&mut doc, pick, e);
            }
            doc.to_string().into_bytes()
        });
    let bytes = (
        prop::sample::select(seeds),
        prop::collection::vec(byte_edit(), 1..4),
    )
        .prop_map(|(seed, edits)| edits.into_iter().fold(seed, apply_bytes));
    let fresh = prop_oneof![
        any_json().prop_map(|v| v.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..64),
        (1usize..4000).prop_map(|n| "[".repeat(n).into_bytes()),
    ];
    prop_oneof![6 => structural, 3 => bytes, 1 => fresh]
}

/// Whether `code` is one a plugin may legitimately return: a spec code this project uses, the
/// masters' and galactic-route's CHECK failure (100, plugin-specific range), or internal (999).
pub fn is_known_code(code: Code) -> bool {
    [1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100, 999].contains(&code.0)
}

/// Fuzzes a plugin binary as a process: each generated stdin goes to `commands` (in order) run
/// inside a throwaway host namespace with a throwaway node (local publisher), for a pod whose
/// namespace does not exist. Properties: stdout is one JSON value, every failure is a CNI error
/// with a known code (never the panic hook's), nothing panics on stderr, and DEL only ever
/// fails with code 11. Needs root (see [`super::privileged::privileged`]).
pub fn plugin_campaign(binary: &str, target: &str, commands: &[&str], default_cases: u32) {
    let path = super::workspace_binary(binary);
    let host = super::privileged::TestNetns::new("fuzz");
    let node = super::TestNode::new(json!({}));
    let bin_dir = node.dir.path().join("bin");
    run_bounded(target, default_cases, mutations(corpus(target)), |input| {
        for command in commands {
            let out = super::Invocation::new(&path, command, &node)
                .attachment("fuzz0", "/var/run/netns/fuzz-absent", "eth0", &bin_dir)
                .in_netns(host.name())
                .stdin(input.to_vec())
                .run();
            prop_assert!(
                !out.stderr.contains("panicked"),
                "{command} panicked: {}",
                out.stderr
            );
            assert_process_reply(out.success, &out.stdout)?;
            if *command == "DEL" && !out.success {
                let err: CniError = serde_json::from_str(&out.stdout)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(err.code, Code::TRY_AGAIN_LATER, "DEL failed: {:?}", err);
            }
        }
        Ok(())
    });
}
