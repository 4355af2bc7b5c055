//! What the master's ADD and GC read of the node: the kernel objects each receives over netlink
//! (`netlinkReceived` on its closing log line, counted in galactic-core's netlink layer),
//! deterministic where times are not. An ADD's convergence reads only its own VPC's objects, so
//! other VPCs' attachments do not change what it receives; a GC's convergences read the node
//! once, not once per VPC, so spreading the same attachments over more VPCs adds only those
//! VPCs' few rules and routes. Its listings of state files (`filesListed`) do not grow with the
//! VPCs either: the attachment records' directory is listed once per GC, not once per VPC.

use crate::*;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Runtime;
use serde_json::json;

/// The network of attachment `att` of `vpc` (every VPC a network and pools of its own: table
/// mode needs node-unique gateways).
fn list(vpc: u32, att: u32) -> Conflist {
    let ipam = pools(
        &format!("fd6b:{vpc:x}::/64"),
        &format!("10.{}.0.0/24", 110 + vpc),
    );
    Conflist::from_conf(
        &json!({"cniVersion": "1.1.0", "name": format!("tenant-a{vpc}"),
        "type": "galactic-cni", "vpc": format!("a{vpc}"), "vpcattachment": format!("{att:x}"),
        "ipam": ipam}),
    )
    .unwrap()
}

/// `netlinkReceived` of galactic-cni's last "`<verb>`: done" line.
fn received(host: &Host, verb: &str) -> u64 {
    counted(host, verb, "netlinkReceived")
}

/// `field` of galactic-cni's last "`<verb>`: done" line.
fn counted(host: &Host, verb: &str, field: &str) -> u64 {
    let done = format!("{verb}: done");
    host.node
        .log_lines()
        .iter()
        .rev()
        .find(|l| l["plugin"] == "galactic-cni" && l["msg"] == done.as_str())
        .and_then(|l| l[field].as_u64())
        .unwrap_or_else(|| panic!("no {done} line with {field}"))
}

/// What the ADD of attachment `att` of VPC 0 receives; the attachment is removed again.
fn probe(host: &Host, rt: &Runtime<'_>, att: u32) -> u64 {
    let pod = Pod::new("vcostp");
    rt.add(&list(0, att), &pod.attachment()).unwrap();
    let n = received(host, "ADD");
    rt.del(&list(0, att), &pod.attachment()).unwrap();
    n
}

/// [`probe`] once its count is the same twice in a row ([`settled_count`]).
fn settled(host: &Host, rt: &Runtime<'_>) -> u64 {
    settled_count("ADD", || probe(host, rt, 0xa))
}

/// `count()` once it gives the same twice in a row: the VPC's interfaces get their IPv6
/// link-local address a moment after they come up, and one not there yet is one object less.
fn settled_count(verb: &str, mut count: impl FnMut() -> u64) -> u64 {
    let mut last = count();
    for _ in 0..10 {
        let now = count();
        if now == last {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        last = now;
    }
    panic!("the {verb}'s count does not settle: {last}");
}

/// Attaches `per_vpc` pods to each of `vpcs`; returns them with their networks.
fn fill(rt: &Runtime<'_>, vpcs: std::ops::Range<u32>, per_vpc: u32) -> Vec<(Conflist, Pod)> {
    let mut live = Vec::new();
    for vpc in vpcs {
        for att in 1..=per_vpc {
            let pod = Pod::new("vcostf");
            rt.add(&list(vpc, att), &pod.attachment()).unwrap();
            live.push((list(vpc, att), pod));
        }
    }
    live
}

/// What a GC that keeps every attachment of `live` receives over netlink, and the directory
/// entries its listings of state files meet (`filesListed`).
fn gc(host: &Host, rt: &Runtime<'_>, live: &[(Conflist, Pod)]) -> (u64, u64) {
    let atts: Vec<_> = live.iter().map(|(_, p)| p.attachment()).collect();
    let valid: Vec<_> = atts.iter().collect();
    rt.gc(&live[0].0, &valid).unwrap();
    (received(host, "GC"), counted(host, "GC", "filesListed"))
}

#[test]
fn an_add_reads_its_own_vpc_and_a_gc_the_node_once() {
    galactic_testkit::privileged!();
    let host = host("vcost");
    let rt = runtime(&host);
    let mut live = fill(&rt, 0..1, 2);
    let alone = settled(&host, &rt);
    assert!(alone > 0, "the counter counts");
    live.extend(fill(&rt, 1..7, 2));
    // Nothing of another VPC is read, not even its policy rules: an ADD lists the node's rules
    // only when it repaired its domain (the previous release's to retire, decision 0083). An
    // attachment of the VPC costs its interface, three addresses, two neighbours and (table)
    // its map element; in a VRF's table the kernel adds the routes of each member's addresses
    // (local and link-local, both families), which the convergence reads with the table.
    let per_attachment_limit = match domain(&host, "a0").unwrap()["backend"].as_str() {
        Some("table") => 8,
        _ => 14,
    };
    assert_eq!(
        settled(&host, &rt),
        alone,
        "an ADD of VPC a0 with 12 attachments of 6 other VPCs on the node receives what it \
         received without them"
    );
    let third = Pod::new("vcostf");
    rt.add(&list(0, 3), &third.attachment()).unwrap();
    live.push((list(0, 3), third));
    let per_attachment = settled(&host, &rt) - alone;
    eprintln!(
        "ADD: {alone} objects received, {per_attachment} more per live attachment of its VPC"
    );
    assert!(
        per_attachment <= per_attachment_limit,
        "one more attachment of the VPC costs its interface, map element, addresses and \
         neighbours (and, VRF, its routes in the table): {per_attachment}"
    );

    // The same 15 attachments in one VPC, on a node of its own.
    let (spread, spread_listed) = gc(&host, &rt, &live);
    let one = crate::host("vcost1");
    let rt1 = runtime(&one);
    let together = fill(&rt1, 0..1, 15);
    let (single, single_listed) = gc(&one, &rt1, &together);
    eprintln!("GC of 15 attachments: {single} objects received in one VPC, {spread} over 7");
    assert!(
        spread < 2 * single,
        "GC over 7 VPCs reads the node once, plus each VPC's rules and routes: {spread} against \
         {single} in one VPC"
    );
    // The records' directory holds the node's 15 records whatever their VPCs: GC lists it
    // once for all its VPCs (each VPC's records read again by their files), so the 6 more VPCs
    // add only their domains' records to its listings, never a listing of the 15 records each.
    eprintln!(
        "GC of 15 attachments: {single_listed} state file names listed in one VPC, \
         {spread_listed} over 7"
    );
    assert!(
        spread_listed < single_listed + 6 * 15,
        "GC over 7 VPCs lists the attachment records as often as GC in one VPC: \
         {spread_listed} names listed against {single_listed} in one VPC"
    );
}

/// What the CHECK of attachment `att` of VPC 0 receives.
fn check_received(host: &Host, rt: &Runtime<'_>, pod: &Pod, att: u32) -> u64 {
    rt.check(&list(0, att), &pod.attachment()).unwrap();
    received(host, "CHECK")
}

/// [`check_received`] once it is the same twice in a row ([`settled_count`]).
fn check_settled(host: &Host, rt: &Runtime<'_>, pod: &Pod, att: u32) -> u64 {
    settled_count("CHECK", || check_received(host, rt, pod, att))
}

#[test]
fn a_check_reads_its_own_attachment_whatever_its_vpc_holds() {
    galactic_testkit::privileged!();
    let host = host("vcostc");
    let rt = runtime(&host);
    let probe = Pod::new("vcostcp");
    rt.add(&list(0, 0xa), &probe.attachment()).unwrap();
    let alone = check_settled(&host, &rt, &probe, 0xa);
    assert!(alone > 0, "the counter counts");
    // Eight more attachments of the same VPC: eight more host interfaces' pod routes (both
    // families) and gateway routes in the VPC table the CHECK looks its own up in.
    let live = fill(&rt, 0..1, 8);
    let beside = check_settled(&host, &rt, &probe, 0xa);
    eprintln!("CHECK: {alone} objects received alone in its VPC, {beside} beside 8 more");
    match domain(&host, "a0").unwrap()["backend"].as_str() {
        Some("table") => assert_eq!(
            beside, alone,
            "a CHECK beside 8 more attachments of its VPC receives what it received alone"
        ),
        // In a VRF's table the kernel adds a local route per address of each member (gateways
        // and link-local, both families), which the domain check reads by type: those, and
        // nothing else of the other attachments (their pod routes were 2 more each, and every
        // local route twice, while the pod routes were found in the table's whole dumps).
        _ => assert!(
            beside - alone <= 8 * 7,
            "a CHECK beside 8 more attachments of its VPC receives their local routes only: \
             {beside} against {alone} alone"
        ),
    }
    for (list, pod) in live.iter().rev() {
        rt.del(list, &pod.attachment()).unwrap();
    }
    rt.del(&list(0, 0xa), &probe.attachment()).unwrap();
}
