//! Many processes at once, and processes killed with SIGKILL at random moments.

use crate::common::{assert_disjoint, Net, BIN};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn dual() -> Net {
    Net::new(json!({"ipv6_subnet": "fd00:10:ff01::/64", "ipv4_subnet": "10.1.0.0/20"}))
}

/// Starts one plugin process without waiting for it.
fn spawn(net: &Net, command: &str, cid: &str) -> Child {
    let mut child = Command::new(BIN)
        .env_clear()
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", cid)
        .env("CNI_NETNS", "/var/run/netns/x")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", "/opt/cni/bin")
        .env("GALACTIC_CNI_NODE_CONFIG", &net.node.node_config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(net.conf(json!({})).as_bytes());
    }
    child
}

fn finish(child: Child) -> (bool, String) {
    let out = child.wait_with_output().expect("wait");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn sixty_four_parallel_adds_get_sixty_four_distinct_prefixes() {
    let net = dual();
    let children: Vec<Child> = (0..64)
        .map(|i| spawn(&net, "ADD", &format!("p{i}")))
        .collect();
    let results: Vec<Value> = children
        .into_iter()
        .map(|c| {
            let (ok, out) = finish(c);
            assert!(ok, "{out}");
            serde_json::from_str(&out).expect("a result")
        })
        .collect();
    assert_eq!(results.len(), 64);
    assert_disjoint(&results);
    let report = net.verify();
    assert_eq!((report.attachments, report.leases), (64, 128));
}

#[test]
fn add_del_storms_keep_the_store_consistent() {
    let net = dual();
    std::thread::scope(|s| {
        for t in 0..4 {
            let net = &net;
            s.spawn(move || {
                for i in 0..15 {
                    let keep = format!("t{t}-keep{i}");
                    let gone = format!("t{t}-gone{i}");
                    for (cmd, cid) in [
                        ("ADD", &keep),
                        ("ADD", &gone),
                        ("DEL", &gone),
                        ("DEL", &gone),
                    ] {
                        let (ok, out) = finish(spawn(net, cmd, cid));
                        assert!(ok, "{cmd} {cid}: {out}");
                    }
                }
            });
        }
    });
    let report = net.verify();
    assert_eq!((report.attachments, report.leases), (60, 120));
    for t in 0..4 {
        net.check(&format!("t{t}-keep7"), None)
            .expect_quiet_success();
        net.check(&format!("t{t}-gone7"), None).expect_error(100);
    }
}

/// xorshift64: reproducible randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn sigkill_at_random_moments_never_tears_the_store() {
    let net = dual();
    // Create the store first so that kills land in ADD/DEL, not only in the one-time build.
    net.add("warmup");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = Rng(seed);
    let mut killed = 0;
    for _ in 0..150 {
        let cid = format!("k{}", rng.next() % 24);
        let command = if rng.next().is_multiple_of(3) {
            "DEL"
        } else {
            "ADD"
        };
        let mut child = spawn(&net, command, &cid);
        std::thread::sleep(Duration::from_micros(rng.next() % 6000));
        if child.try_wait().expect("poll").is_none() {
            killed += 1;
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }
    assert!(
        killed > 20,
        "too few kills landed mid-run ({killed}); seed {seed}"
    );
    // Invariants: the store opens, every record parses, spans are disjoint.
    net.verify();
    // Every attachment still works: retried ADDs return disjoint results, one per key.
    let results: Vec<Value> = (0..24).map(|i| net.add(&format!("k{i}"))).collect();
    assert_disjoint(&results);
    assert_eq!(net.verify().attachments, 25, "seed {seed}");
    // GC converges to the valid set.
    net.gc(&[("k3", "eth0")]);
    let report = net.verify();
    assert_eq!((report.attachments, report.leases), (1, 2), "seed {seed}");
}

#[test]
fn a_held_lock_makes_add_and_del_answer_try_again_later_in_bounded_time() {
    let net = Net::new(json!({"ipv4_subnet": "10.1.0.0/24"}));
    net.node.merge_config(json!({"ipam_lock_timeout_ms": 300}));
    net.add("c1");
    let conn = rusqlite::Connection::open(net.data_dir().join("ipam.db")).expect("open");
    conn.execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let started = Instant::now();
    let msg = net.call("ADD", "c2").expect_error(11);
    assert!(msg.contains("busy") && msg.contains("300 ms"), "{msg}");
    assert!(started.elapsed() < Duration::from_secs(5), "bounded wait");
    net.call("DEL", "c1").expect_error(11);
    net.status().unwrap_err().expect_error(11);
    conn.execute_batch("ROLLBACK").expect("release");
    net.add("c2");
    net.del("c1");
}
