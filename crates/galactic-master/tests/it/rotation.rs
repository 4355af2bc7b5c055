//! An ADD's convergence of a VPC larger than the window (`converge::rotation`, decision 0083):
//! each ADD converges the next window of the VPC's other attachments, so what was removed
//! behind one attachment's record comes back within ⌈N / window⌉ ADDs; a domain the ADD
//! repaired, or a VRF device that is not the one the VPC was last converged on, makes it
//! converge the whole VPC, and so does CNI GC. Table mode on any kernel; the VRF case needs VRF
//! and runs in the production-kernel tier (`cargo xtask test-kernel`), SKIPPED elsewhere.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_master::CONVERGENCE_WINDOW as WINDOW;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};

use crate::common::{domain, hname, runtime};

const VPC: &str = "R";

fn veth(att: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        "pods-r",
        vec![
            json!({"type": "galactic-cni", "vpc": VPC, "vpcattachment": att,
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7c:9::/64", "ipv4_subnet": "10.129.0.0/24"}}),
        ],
    )
}

/// The VPC's live pods, attachments `1`, `2`, ….
struct Pods<'a> {
    host: &'a Host,
    rt: Runtime<'a>,
    pods: Vec<(String, Pod)>,
    table: String,
}

impl<'a> Pods<'a> {
    fn up(host: &'a Host, n: usize) -> Self {
        let mut pods = Self {
            host,
            rt: runtime(host),
            pods: Vec::new(),
            table: String::new(),
        };
        for i in 1..=n {
            pods.add(&i.to_string());
        }
        pods.table = domain(host, VPC).unwrap()["table"].to_string();
        pods
    }

    fn add(&mut self, att: &str) {
        let pod = Pod::new(&format!("rot{att}"));
        self.rt.add(&veth(att), &pod.attachment()).unwrap();
        self.pods.push((att.to_owned(), pod));
    }

    /// Removes each pod's IPv6 route in the VPC table behind its record.
    fn remove_routes(&self) {
        for (att, _) in &self.pods {
            let dev = hname(VPC, att);
            let t = &self.table;
            let route = self
                .host
                .netns
                .ip(&["-6", "route", "show", "table", t, "dev", &dev]);
            let dst = route.split_whitespace().next().unwrap().to_owned();
            self.host
                .netns
                .ip(&["-6", "route", "del", &dst, "dev", &dev, "table", t]);
        }
    }

    /// The pods whose CHECK fails.
    fn broken(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(att, pod)| self.rt.check(&veth(att), &pod.attachment()).is_err())
            .map(|(att, _)| att.clone())
            .collect()
    }

    fn down(self) {
        for (att, pod) in &self.pods {
            self.rt.del(&veth(att), &pod.attachment()).unwrap();
        }
    }
}

/// The pod routes the "converge: restored" lines of the log name, in order, from line `from`.
fn restored_routes(host: &Host, from: usize) -> Vec<String> {
    host.node
        .log_lines()
        .into_iter()
        .skip(from)
        .filter(|l| {
            l["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("converge: restored"))
        })
        .flat_map(|l| l["restored"].as_array().cloned().unwrap_or_default())
        .filter_map(|r: Value| r.as_str().map(str::to_owned))
        .filter(|r| r.starts_with("route "))
        .collect()
}

#[test]
fn a_large_vpcs_adds_converge_it_window_by_window_and_whole_once_its_domain_was_repaired() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "rot",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let others = WINDOW + 3;
    let mut pods = Pods::up(&host, others);

    // Each pod's route removed behind its record: one ADD converges one window of them.
    pods.remove_routes();
    assert_eq!(pods.broken().len(), others);
    let from = host.node.log_lines().len();
    pods.add("a");
    let first = restored_routes(&host, from);
    assert_eq!(
        first.len(),
        WINDOW,
        "one ADD restores one window: {first:?}"
    );
    assert_eq!(pods.broken().len(), others - WINDOW);

    // The next ADD goes on from there: every pod is back within ⌈others / WINDOW⌉ ADDs.
    let from = host.node.log_lines().len();
    pods.add("b");
    let second = restored_routes(&host, from);
    assert_eq!(second.len(), others - WINDOW, "{second:?}");
    assert!(
        second.iter().all(|r| !first.contains(r)),
        "{first:?} then {second:?}"
    );
    assert_eq!(pods.broken(), Vec::<String>::new());

    // A domain object removed too (the VPC's IPv6 mark rule): the ADD that repairs the domain
    // converges every attachment of the VPC, not a window.
    pods.remove_routes();
    let mark = &domain(&host, VPC).unwrap()["mark"];
    let (value, mask) = (
        mark["value"].as_u64().unwrap(),
        mark["mask"].as_u64().unwrap(),
    );
    host.netns.ip(&[
        "-6",
        "rule",
        "del",
        "fwmark",
        &format!("{value:#x}/{mask:#x}"),
    ]);
    let from = host.node.log_lines().len();
    pods.add("c");
    let whole = restored_routes(&host, from);
    assert_eq!(whole.len(), others + 2, "the whole VPC: {whole:?}");
    assert_eq!(pods.broken(), Vec::<String>::new());

    // CNI GC converges the whole VPC too.
    pods.remove_routes();
    let atts: Vec<Attachment> = pods.pods.iter().map(|(_, p)| p.attachment()).collect();
    pods.rt
        .gc(&veth("1"), &atts.iter().collect::<Vec<_>>())
        .unwrap();
    assert_eq!(pods.broken(), Vec::<String>::new());
    pods.down();
    assert_eq!(
        galactic_testkit::inspect::state_entries(&host.path("state").join("converged")),
        Vec::<String>::new(),
        "the VPC's rotation goes with its domain"
    );
}

/// The host interfaces of the VPC's pods that are not enslaved to `vrf`.
fn not_enslaved(pods: &Pods<'_>, vrf: &str) -> Vec<String> {
    pods.pods
        .iter()
        .map(|(att, _)| hname(VPC, att))
        .filter(|dev| {
            let out = pods.host.netns.ip(&["-d", "link", "show", dev]);
            !out.contains(&format!("master {vrf} "))
        })
        .collect()
}

#[test]
fn a_vrf_recreated_under_its_name_behind_a_large_vpcs_records_makes_the_next_add_converge_it_whole()
{
    let Some(host) = crate::common::vrf_host(
        "a_vrf_recreated_under_its_name_behind_a_large_vpcs_records_makes_the_next_add_converge_it_whole",
        "rotv",
        &["galactic-ipam"],
    ) else {
        return;
    };
    let others = WINDOW + 3;
    let mut pods = Pods::up(&host, others);
    pods.add("a");
    let vrf = crate::common::vrf(VPC);
    assert_eq!(not_enslaved(&pods, &vrf), Vec::<String>::new());

    // Someone else's teardown and set-up of the VPC's VRF: same name, same table, a new device
    // with no member. The domain's record and objects agree with it (nothing to repair), but it
    // is not the device the VPC was last converged on.
    host.netns.ip(&["link", "del", &vrf]);
    host.netns
        .ip(&["link", "add", &vrf, "type", "vrf", "table", &pods.table]);
    host.netns.ip(&["link", "set", &vrf, "up"]);
    assert_eq!(not_enslaved(&pods, &vrf).len(), others + 1);
    let from = host.node.log_lines().len();
    pods.add("b");
    let repaired = host.node.log_lines()[from..].iter().any(|l| {
        l["msg"]
            .as_str()
            .is_some_and(|m| m.contains("routing domain repaired"))
    });
    assert!(!repaired, "the recreated VRF is not a repair of the domain");
    assert_eq!(
        not_enslaved(&pods, &vrf),
        Vec::<String>::new(),
        "every pod of the VPC is enslaved to the new device again"
    );
    assert_eq!(pods.broken(), Vec::<String>::new());
    pods.down();
}
