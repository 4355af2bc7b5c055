//! The campaign's own tests: a short campaign finds nothing over either publisher, and every
//! kind of leftover the invariant names is counted when one is planted.

use super::invariant::{self, Found, Ident, Kind, Leftovers, Population};
use super::*;
use crate::campaign::Publisher;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The CI pass: a short campaign with every kind of fault must find nothing.
#[test]
fn short_crash_campaign_finds_no_leftover() {
    galactic_testkit::privileged!();
    let lab = Lab::for_tests("crash").expect("lab");
    let report = campaign(&lab, 60, Some(60), Rng::time_seed()).expect("campaign runs");
    println!("{report}");
    assert!(report.kills > 0, "no process was killed: {report:?}");
    report.verdict().expect("invariants hold");
}

/// The same over the Kubernetes publisher and the loopback API server.
#[test]
fn short_crash_campaign_over_the_kubernetes_publisher_finds_no_leftover() {
    galactic_testkit::privileged!();
    let lab = Lab::for_tests_publishing("crashk", Publisher::Kubernetes).expect("lab");
    let report = campaign(&lab, 40, Some(60), Rng::time_seed()).expect("campaign runs");
    println!("{report}");
    assert_eq!(report.publisher, "kubernetes");
    assert!(report.kills > 0, "no process was killed: {report:?}");
    report.verdict().expect("invariants hold");
}

/// The checks can fail: an attachment the runtime forgot (no DEL, no GC yet) is a leftover of
/// every kind of state the chain keeps for it, with either publisher.
#[test]
fn a_forgotten_attachment_is_a_leftover_of_every_kind() {
    galactic_testkit::privileged!();
    for publisher in [Publisher::Local, Publisher::Kubernetes] {
        let lab = Lab::for_tests_publishing("leak", publisher).expect("lab");
        let mut c = Campaign::new(&lab, 7);
        let mut a = c.new_attachment().expect("attachment");
        match c.add(&a, &Fault::None) {
            Ok(Ending::Done(result)) => a.result = result,
            _ => panic!("{} ADD failed", publisher.name()),
        }
        c.check("forgotten", true).expect("check runs");
        let l = &c.report.leftovers;
        for kind in [
            Kind::MasterRecords,
            Kind::DomainRecords,
            Kind::RouteEntries,
            Kind::IpamAllocations,
            Kind::VrfInstances,
            Kind::Advertisements,
            Kind::EndpointSlices,
            Kind::HostInterfaces,
            Kind::KernelReferences,
        ] {
            assert!(
                l.count(kind) > 0,
                "{}: {kind:?} not counted",
                publisher.name()
            );
        }
        assert!(matches!(c.del(&a, &Fault::None), Ok(Ending::Done(_))));
        c.report.leftovers = Leftovers::default();
        c.check("after its DEL", false).expect("check runs");
        let report = &c.report;
        assert_eq!(
            report.leftovers.total(),
            0,
            "{} DEL left: {report}",
            publisher.name()
        );
    }
}

fn ident(n: u32, vpc: &str) -> Ident {
    Ident {
        cid: format!("crash{n:05}"),
        vpc: vpc.into(),
        att: format!("{n:x}"),
        ifname: format!("G00000000{vpc}00{n:x}H"),
    }
}

/// VPC 1 has a live attachment (crash00002), crash00003 of VPC 2 is gone.
fn population() -> Population {
    Population {
        live: vec![ident(2, "1")],
        gone: vec![ident(3, "2")],
    }
}

fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

fn kinds(found: &[Found]) -> Vec<Kind> {
    found.iter().map(|f| f.kind).collect()
}

#[test]
fn records_of_gone_containers_are_leftovers_and_live_ones_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    write(
        &state,
        "attachments/G000000001002H.json",
        r#"{"containerId":"crash00002"}"#,
    );
    write(
        &state,
        "attachments/G000000002003H.json",
        r#"{"containerId":"crash00003"}"#,
    );
    let routes = json!({"routes": [{"dst": "fd91:2::/64", "containerId": "crash00002"},
                                   {"dst": "fd91:3::/64", "containerId": "crash00003"}]});
    write(&state, "routes/vpc-2.json", &routes.to_string());
    write(&state, "routing/vpc-1.json", "{}");
    write(&state, "routing/vpc-2.json", "{}");
    let pop = population();
    let records = invariant::master_records(&state, &pop);
    assert_eq!(kinds(&records), [Kind::MasterRecords]);
    assert!(records[0].item.contains("crash00003"), "{records:?}");
    let entries = invariant::route_entries(&state, &pop);
    assert_eq!(kinds(&entries), [Kind::RouteEntries]);
    assert!(entries[0].item.contains("fd91:3::/64"), "{entries:?}");
    let domains = invariant::domain_records(&state, &pop);
    assert_eq!(kinds(&domains), [Kind::DomainRecords]);
    assert!(domains[0].item.contains("vpc-2.json"), "{domains:?}");
}

#[test]
fn documents_outliving_their_attachments_are_leftovers_per_vpc() {
    let doc = |key: &str, annotations: serde_json::Value| {
        (
            key.to_owned(),
            json!({"metadata": {"annotations": annotations}}),
            None,
        )
    };
    let pop = population();
    // A stray VRF instance: VPC 2 has no live attachment; VPC 1's is expected.
    let vrfs = [
        doc("galactic-system/1-node-a", json!({})),
        doc("galactic-system/2-node-a", json!({})),
    ];
    let found = invariant::vrf_instances(&vrfs, &pop);
    assert_eq!(kinds(&found), [Kind::VrfInstances]);
    assert!(found[0].item.contains("2-node-a"), "{found:?}");
    // The live attachment's advertisement still records a gone container; a gone one's whole
    // advertisement is left.
    let ads = [
        doc(
            "galactic-system/1-2-node-a",
            json!({"galactic.datum.net/netns.crash00002": "/p",
                                                 "galactic.datum.net/netns.crash00009": "/q"}),
        ),
        doc("galactic-system/2-3-node-a", json!({})),
    ];
    let found = invariant::advertisements(&ads, &pop);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found.iter().any(|f| f.item.contains("records crash00009")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|f| f.item.contains("2-3-node-a")),
        "{found:?}"
    );
    let slices = [
        doc("pods/crash00002", json!({})),
        doc("pods/crash00003", json!({})),
    ];
    let found = invariant::endpoint_slices(&slices, &pop);
    assert_eq!(kinds(&found), [Kind::EndpointSlices]);
    assert!(found[0].item.contains("pods/crash00003"), "{found:?}");
}

#[test]
fn temporaries_anywhere_under_the_node_are_leftovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, ra) = (dir.path().join("state"), dir.path().join("ra"));
    write(&state, "attachments/G000000001002H.tmp.4242", "{");
    write(&state, "some/new/dir/x.json.tmp.1", "{");
    write(&ra, ".galactic-tmp/G000000002003H", "");
    write(&state, "attachments/G000000001002H.json", "{}");
    let found = invariant::temporaries(&[state, ra]);
    assert_eq!(kinds(&found), [Kind::Temporaries; 3], "{found:?}");
}

#[test]
fn any_other_file_naming_a_gone_attachment_is_a_leftover_but_shared_files_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    // A per-attachment record in a directory no check knows, by content and by name.
    let by_content = write(
        &state,
        "bgp-attachments/x.json",
        r#"{"hostInterface":"G000000002003H"}"#,
    );
    write(&state, "elsewhere/crash00003", "");
    // The live attachment's own files, shared files and files already counted are not.
    write(
        &state,
        "bgp-attachments/y.json",
        r#"{"containerId":"crash00002"}"#,
    );
    write(&state, "bgp/revision", "crash00003");
    write(&state, "locks/G000000002003H", "");
    let counted = write(&state, "attachments/G000000002003H.json", "{}");
    let found = invariant::other_files(&[state], &population(), &[counted].into());
    assert_eq!(kinds(&found), [Kind::OtherFiles; 2], "{found:?}");
    assert!(
        found.iter().any(|f| f.file.as_ref() == Some(&by_content)),
        "{found:?}"
    );
}

#[test]
fn gone_interfaces_and_what_names_them_are_leftovers() {
    let pop = population();
    let links = ["G000000001002H", "G000000002003H", "eth0"]
        .map(String::from)
        .into();
    let found = invariant::host_interfaces(&links, &pop);
    assert_eq!(kinds(&found), [Kind::HostInterfaces]);
    // A rule naming the gone interface, whether or not it exists; a route naming one that is
    // gone from the kernel (a leaked interface's own routes are counted with it), an nft line.
    let rules = [r#"{"priority":100,"iif":"G000000002003H","table":"1001"}"#.to_owned()];
    let routes = [
        r#"{"dst":"fd90:1::2","dev":"G000000001002H"}"#.to_owned(),
        r#"{"dst":"fd90:2::3","dev":"G000000002003H"}"#.to_owned(),
        r#"{"dst":"fd90:2::4","dev":"G000000002004H"}"#.to_owned(),
    ];
    let nft = "table inet galactic {\n  elements = { \"G000000002003H\" }\n}";
    let found = invariant::kernel_references(&rules, &routes, nft, &links, &pop);
    assert_eq!(kinds(&found), [Kind::KernelReferences; 3], "{found:?}");
    assert!(found[2].item.contains("G000000002004H"), "{found:?}");
    let holdings = [
        "crash00002/eth0/reliability: a b",
        "crash00003/eth0/reliability: c d",
    ];
    let found = invariant::ipam_allocations(&holdings.map(String::from), &pop);
    assert_eq!(kinds(&found), [Kind::IpamAllocations]);
}

#[test]
fn a_leftover_seen_by_many_checks_counts_once_and_fails_the_verdict() {
    let mut report = Report {
        publisher: "local",
        ..Report::default()
    };
    assert!(report.verdict().is_ok());
    let stray = || vec![Found::new(Kind::Temporaries, "state/a.tmp.1".into(), None)];
    report.leftovers.observe("after ADD", stray());
    report.leftovers.observe("after a clean DEL", stray());
    assert_eq!(report.leftovers.count(Kind::Temporaries), 1);
    assert_eq!(report.leftovers.total(), 1);
    // Gone, then back: a second appearance.
    report.leftovers.observe("after GC", Vec::new());
    report
        .leftovers
        .observe("after a parallel teardown", stray());
    assert_eq!(report.leftovers.count(Kind::Temporaries), 2);
    let text = report.to_string();
    for kind in Kind::ALL {
        assert!(text.contains(kind.label()), "no line for {kind:?}:\n{text}");
    }
    assert!(
        text.contains("state/a.tmp.1 (after ADD; 2 times)"),
        "{text}"
    );
    assert!(report.verdict().is_err());
    assert_eq!(Leftovers::default().total(), 0);
}

#[test]
fn rng_is_deterministic_per_seed() {
    let (mut a, mut b) = (Rng::new(42), Rng::new(42));
    let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
    let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
    assert_eq!(xs, ys);
    assert!(xs.windows(2).all(|w| w[0] != w[1]));
}
