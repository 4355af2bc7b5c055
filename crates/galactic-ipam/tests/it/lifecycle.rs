//! ADD/CHECK/DEL/GC/STATUS of the built binary, one process per call, as a runtime runs it.

use crate::common::{addresses, assert_disjoint, Net};
use galactic_testkit::runtime::Attachment;
use serde_json::json;

fn dual() -> Net {
    Net::new(json!({"ipv6_subnet": "fd00:10:ff01::/64", "ipv4_subnet": "10.1.0.0/24"}))
}

#[test]
fn add_returns_the_abbreviated_dual_stack_result() {
    let net = dual();
    let result = net.add("c1");
    assert_eq!(
        result,
        json!({"cniVersion": "1.1.0",
            "ips": [{"address": "fd00:10:ff01::1:0:1/96", "gateway": "fd00:10:ff01::1"},
                    {"address": "10.1.0.2/32", "gateway": "10.1.0.1"}],
            "routes": [{"dst": "::/0"}, {"dst": "0.0.0.0/0"}]})
    );
    let lines = net.node.log_lines();
    assert!(lines
        .iter()
        .any(|l| l["msg"] == "ADD: allocation" && l["new"] == true));
    // One line per operation at info: the allocation rides on the closing line.
    let info: Vec<_> = net
        .node
        .raw_log_lines()
        .into_iter()
        .filter(|l| l["level"] == "INFO")
        .collect();
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0]["msg"], "ADD: done");
    assert_eq!(info[0]["events"][0]["msg"], "ADD: allocation");
}

#[test]
fn retried_add_returns_the_same_allocation_and_stores_nothing_new() {
    let net = dual();
    let first = net.add("c1");
    let second = net.add("c1");
    assert_eq!(first, second);
    let report = net.verify();
    assert_eq!((report.attachments, report.leases), (1, 2));
    // A different container gets something else.
    assert_disjoint(&[first, net.add("c2")]);
}

#[test]
fn two_hundred_attachments_get_two_hundred_disjoint_prefixes() {
    let net = dual();
    let results: Vec<_> = (0..200).map(|i| net.add(&format!("c{i}"))).collect();
    assert_disjoint(&results);
    assert_eq!(net.verify().leases, 400);
}

#[test]
fn two_interfaces_of_one_container_get_different_addresses() {
    let net = dual();
    let a = net.add_if("c1", "eth0");
    let b = net.add_if("c1", "net1");
    assert_disjoint(&[a, b]);
}

#[test]
fn released_space_is_reused_only_after_the_cursor_wraps_for_both_families() {
    // IPv4 /29: .2–.6 allocatable. IPv6 /94 cut into /96s: 3 allocatable (the twin).
    for (ipam, expect) in [
        (
            json!({"ipv4_subnet": "10.9.0.0/29"}),
            [
                "10.9.0.2/32",
                "10.9.0.3/32",
                "10.9.0.4/32",
                "10.9.0.5/32",
                "10.9.0.2/32",
            ],
        ),
        (
            json!({"ipv6_subnet": "fd00:9::/94"}),
            [
                "fd00:9::1:0:1/96",
                "fd00:9::2:0:1/96",
                "fd00:9::3:0:1/96",
                "",
                "fd00:9::1:0:1/96",
            ],
        ),
    ] {
        let net = Net::new(ipam.clone());
        let first = addresses(&net.add("a"))[0].clone();
        assert_eq!(first, expect[0]);
        assert_eq!(addresses(&net.add("b"))[0], expect[1]);
        net.del("a");
        // The freed slot is not handed out while fresh ones remain.
        assert_eq!(addresses(&net.add("c"))[0], expect[2], "{ipam}");
        if !expect[3].is_empty() {
            assert_eq!(addresses(&net.add("d"))[0], expect[3]);
            assert_eq!(addresses(&net.add("e"))[0], "10.9.0.6/32");
        }
        // The cursor has walked the pool: now the oldest release comes back.
        assert_eq!(addresses(&net.add("f"))[0], expect[4], "{ipam}");
        let msg = net.call("ADD", "g").expect_error(50);
        assert!(msg.contains("exhausted"), "{msg}");
    }
}

#[test]
fn del_is_idempotent_and_unknown_attachments_succeed() {
    let net = dual();
    net.add("c1");
    for _ in 0..3 {
        net.del("c1");
    }
    net.del("never-added");
    assert_eq!(net.verify().attachments, 0);
    // DEL on a node whose store was never created creates nothing.
    let fresh = dual();
    fresh.del("c1");
    assert!(!fresh.data_dir().exists());
}

#[test]
fn check_compares_with_prev_result_and_fails_after_del() {
    let net = dual();
    let result = net.add("c1");
    net.check("c1", Some(&result)).expect_quiet_success();
    net.check("c1", None).expect_quiet_success();
    let mut wrong = result.clone();
    wrong["ips"][1]["address"] = json!("10.1.0.77/32");
    let msg = net.check("c1", Some(&wrong)).expect_error(100);
    assert!(
        msg.contains("10.1.0.2/32") && msg.contains("10.1.0.77"),
        "{msg}"
    );
    net.del("c1");
    let msg = net.check("c1", Some(&result)).expect_error(100);
    assert!(
        msg.contains("no IPAM allocation") && msg.contains("c1"),
        "{msg}"
    );
}

#[test]
fn dual_stack_is_atomic_when_the_ipv4_pool_is_exhausted() {
    let net = Net::new(json!({"ipv6_subnet": "fd00:10:ff01::/64", "ipv4_subnet": "10.9.0.0/30"}));
    net.add("a");
    let msg = net.call("ADD", "b").expect_error(50);
    assert!(msg.contains("10.9.0.0/30"), "{msg}");
    let report = net.verify();
    assert_eq!(
        (report.attachments, report.leases),
        (1, 2),
        "no IPv6 left behind"
    );
    net.check("b", None).expect_error(100);
}

#[test]
fn env_flip_edited_config_and_undecodable_config_still_release() {
    // ADD through the env-enabled default pool, DEL without the variable (the config alone is
    // now invalid: no pool).
    let net = Net::new(json!({}));
    let out = net
        .runtime()
        .env("GALACTIC_IPAM_ENABLE_LOCAL_IPAM", "TRUE")
        .plugin(
            &net.list(json!({})),
            0,
            "ADD",
            &Attachment::new("c1", "/var/run/netns/test", "eth0"),
            None,
        );
    assert!(out.success, "{out:?}");
    assert_eq!(addresses(&out.json()), ["fd00:10:ff01::1:0:1/96"]);
    net.del("c1");
    assert_eq!(net.verify().attachments, 0);

    // Pools edited between ADD and DEL.
    let net = dual();
    net.add("c2");
    let edited = net.list(json!({"ipam": {"ipv4_subnet": "192.168.0.0/24"}}));
    net.plugin("DEL", "c2", "eth0", &edited, None)
        .expect_quiet_success();
    assert_eq!(net.verify().attachments, 0);

    // stdin that is not even JSON: released by container id and interface.
    net.add("c3");
    net.run("DEL", "c3", "eth0", "{not json".into())
        .expect_quiet_success();
    assert_eq!(net.verify().attachments, 0);
}

#[test]
fn gc_releases_what_is_not_valid_scoped_to_the_network() {
    let net = dual();
    for c in ["a", "b", "c"] {
        net.add(c);
    }
    net.add_if("a", "net9");
    let other = net.list(json!({"name": "net2"}));
    assert!(net.plugin("ADD", "d", "eth0", &other, None).success);

    net.raw_gc(json!({})).expect_quiet_success();
    assert_eq!(net.verify().attachments, 5, "no list: nothing released");

    net.gc(&[("a", "eth0")]);
    assert_eq!(net.verify().attachments, 2, "a/eth0 and net2's d remain");
    net.check("a", None).expect_quiet_success();
    net.check("b", None).expect_error(100);

    // The older key is accepted too; an empty list releases everything of this network.
    net.raw_gc(json!({"cni.dev/attachments": []}))
        .expect_quiet_success();
    assert_eq!(net.verify().attachments, 1, "only net2's d remains");
}

#[test]
fn status_reports_ready_then_exhausted() {
    let net = Net::new(json!({"ipv4_subnet": "10.9.0.0/30"}));
    net.status().unwrap();
    net.add("a");
    let msg = net.status().unwrap_err().expect_error(50);
    assert!(msg.contains("exhausted"), "{msg}");
    net.gc(&[]);
    net.status().unwrap();
    let bad = Net::new(json!({"ipv4_subnet": "10.9.0.0/33"}));
    bad.status().unwrap_err().expect_error(7);
}

#[test]
fn addresses_and_static_modes_store_nothing() {
    let net = Net::new(json!({"addresses": [
        {"address": "10.0.0.9/32", "gateway": "10.0.0.1"},
        {"address": "fd20:60:ff03:0:1::/96", "gateway": "fd20:60:ff03::1"}]}));
    let result = net.add("c1");
    assert_eq!(addresses(&result), ["fd20:60:ff03:0:1::/96", "10.0.0.9/32"]);
    assert_eq!(
        result["routes"],
        json!([{"dst": "::/0"}, {"dst": "0.0.0.0/0"}])
    );
    assert_eq!(net.add("c1"), result);
    net.check("c1", Some(&result)).expect_quiet_success();
    let mut wrong = result.clone();
    wrong["ips"][0]["address"] = json!("fd20:60:ff03:0:2::/96");
    net.check("c1", Some(&wrong)).expect_error(100);
    net.del("c1");
    assert!(!net.data_dir().exists(), "nothing stored");

    let st = Net::new(json!({"static_ip": "fd00::5"}));
    let result = st.add("c1");
    assert_eq!(
        result,
        json!({"cniVersion": "1.1.0", "ips": [{"address": "fd00::5/64"}]})
    );
}

#[test]
fn config_errors_are_code_7_with_the_message() {
    let net = Net::new(json!({"ipv6_subnet": "10.0.0.0/8"}));
    let msg = net.call("ADD", "c1").expect_error(7);
    assert_eq!(
        msg,
        "ipam.ipv6_subnet must be an IPv6 CIDR, got IPv4: \"10.0.0.0/8\""
    );
    let msg = net
        .plugin("ADD", "c1", "eth0", &net.list(json!({"ipam": null})), None)
        .expect_error(7);
    assert_eq!(msg, "ipam block is required");
}

#[test]
fn ids_never_become_paths() {
    let net = dual();
    for (cid, ifname) in [
        ("../../etc/x", "eth0"),
        ("/etc/passwd", "eth0"),
        ("c1", "../x"),
        ("c1", ".."),
    ] {
        let out = net.run("ADD", cid, ifname, net.conf(json!({})));
        out.expect_error(4);
    }
    let bad_name = net.conf(json!({"name": "../../etc"}));
    net.run("ADD", "c1", "eth0", bad_name).expect_error(7);
    // Legal ids with dots and dashes are stored as data, never as file names.
    net.add("a..b-c.d");
    net.add_if("x", "..eth0");
    let mut files: Vec<String> = walk(net.node.dir.path());
    files.sort();
    let allowed = [
        "galactic.log",
        "node.json",
        "ipam/ipam.db",
        "ipam/ipam.db-shm",
        "ipam/ipam.db-wal",
    ];
    for f in &files {
        assert!(allowed.contains(&f.as_str()), "unexpected file {f}");
    }
    assert!(!std::path::Path::new("/etc/x").exists());
}

fn walk(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .expect("under root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    out
}
