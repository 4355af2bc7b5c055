//! The rows a registration shares with its VPC (`vrf_table`'s egress kind, upstream's newest
//! `vpc_attribution_table`), on real maps in a private bpffs: after every registration and
//! removal, in any order, of tap and veth attachments, they are what the VPC's live
//! attachments say (tap while any tap is registered; the lowest ifindex named), and a
//! registration in a large VPC decides them without reading the VPC's other records.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::bpf::abi::{EGRESS_KIND_TAP, EGRESS_KIND_VETH};
use galactic_core::bpf::maps::{self, pin_empty_maps, pin_maps, NEWEST_MAP_DEFS};
use galactic_core::bpf::registry::{
    attachment_identity, register_attachment, unregister_attachment, Registration,
};
use galactic_core::bpf::usid::Usid;
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_core::state;
use galactic_testns::bpffs::PrivateBpffs;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The VPC under test and its VRF's uSID.
const VPC: &str = "jU";

fn usid() -> Usid {
    Usid::compute("2001:db8:ff03::/48", 1, 7).unwrap()
}

/// The host interface of attachment number `n` of [`VPC`].
fn name(n: u32) -> String {
    let att = galactic_core::ident::base62_encode(u64::from(n));
    host_ifname(
        &VpcId::parse(VPC).unwrap(),
        &AttachmentId::parse(&att).unwrap(),
    )
}

/// A private bpffs with the newest datapath's maps pinned, and a node state directory.
fn node() -> (PrivateBpffs, PathBuf, tempfile::TempDir) {
    let bpffs = PrivateBpffs::mount();
    let pin = bpffs.pin_dir();
    pin_empty_maps(&pin).unwrap();
    pin_maps(&pin, &NEWEST_MAP_DEFS).unwrap();
    (bpffs, pin, tempfile::tempdir().unwrap())
}

/// Registers `host` (of whichever VPC its name says) on the VRF key of [`usid`].
fn register(pin: &Path, state: &Path, host: &str, ifindex: u32, kind: u32) {
    register_attachment(&Registration {
        pin_dir: pin,
        state_dir: state,
        usid: usid(),
        vrf_table_id: 1000,
        egress_kind: kind,
        host_ifname: host,
        host_ifindex: ifindex,
        prefixes: &[],
        egress: &[],
        gateways: None,
    })
    .unwrap();
}

/// The VRF's kind and attribution (as the host interface it names) now.
fn rows(pin: &Path) -> (Option<u32>, Option<String>) {
    let key = usid().vrf_key();
    let vrf: maps::VrfTable = maps::open_typed(pin, maps::VRF_TABLE).unwrap();
    let attribution: maps::VpcAttributionTable =
        maps::open_typed(pin, maps::VPC_ATTRIBUTION_TABLE).unwrap();
    let kind = vrf.get(&key, 0).ok().map(|v| v.egress_kind);
    let named = attribution.get(&key, 0).ok().map(|v| {
        let att = galactic_core::ident::base62_encode(u64::from(v.vpc_attachment));
        let vpc = galactic_core::ident::base62_encode(v.vpc);
        host_ifname(
            &VpcId::parse(&vpc).unwrap(),
            &AttachmentId::parse(&att).unwrap(),
        )
    });
    (kind, named)
}

/// A small deterministic generator (xorshift64): the same sequence every run.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn the_vrfs_rows_follow_its_live_attachments_in_any_order() {
    galactic_testns::privileged!();
    let (_bpffs, pin, state) = node();
    // Live attachments: name → (ifindex, kind).
    let mut live: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut steps = 0;
    for step in 0..400 {
        let n = u32::try_from(dice.below(12)).unwrap() + 1;
        let host = name(n);
        // A registration (new, or again with a new interface) twice as often as a removal.
        if dice.below(3) == 0 {
            unregister_attachment(state.path(), &host).unwrap();
            live.remove(&host);
        } else {
            let ifindex = u32::try_from(dice.below(60)).unwrap() + 10;
            let kind = if dice.below(4) == 0 {
                EGRESS_KIND_TAP
            } else {
                EGRESS_KIND_VETH
            };
            // Ifindexes are unique among live interfaces.
            if live.iter().any(|(h, (i, _))| *i == ifindex && *h != host) {
                continue;
            }
            register(&pin, state.path(), &host, ifindex, kind);
            live.insert(host.clone(), (ifindex, kind));
        }
        steps += 1;
        let (kind, named) = rows(&pin);
        if live.is_empty() {
            // The VRF's rows stay for the datapath's GC; the attribution goes with the last.
            assert_eq!(
                named, None,
                "step {step}: attribution with nothing registered"
            );
            continue;
        }
        let tap = live.values().any(|(_, k)| *k == EGRESS_KIND_TAP);
        let want_kind = if tap {
            EGRESS_KIND_TAP
        } else {
            EGRESS_KIND_VETH
        };
        let lowest = live
            .iter()
            .min_by_key(|(_, (i, _))| *i)
            .map(|(h, _)| h.clone());
        assert_eq!(kind, Some(want_kind), "step {step}: kind, live {live:?}");
        assert_eq!(named, lowest, "step {step}: attribution, live {live:?}");
        assert!(attachment_identity(named.as_deref().unwrap()).is_some());
    }
    assert!(steps > 300, "only {steps} steps ran");
}

/// Entries listed by one registration of a veth attachment into [`VPC`] holding `others`
/// veth attachments already.
fn listed_by_a_registration_among(others: u32) -> u64 {
    let (_bpffs, pin, state) = node();
    // Descending ifindexes: each new one is the VPC's lowest and takes the attribution.
    for n in 1..=others {
        register(&pin, state.path(), &name(n), 1000 - n, EGRESS_KIND_VETH);
    }
    let before = state::listed();
    register(&pin, state.path(), &name(others + 1), 10, EGRESS_KIND_VETH);
    let listed = state::listed() - before;
    assert_eq!(rows(&pin), (Some(EGRESS_KIND_VETH), Some(name(others + 1))));
    listed
}

#[test]
fn a_registration_in_a_large_vpc_lists_none_of_its_records() {
    galactic_testns::privileged!();
    let small = listed_by_a_registration_among(2);
    let large = listed_by_a_registration_among(40);
    assert_eq!(
        small, large,
        "entries listed by one registration beside 2 and 40 of its VPC's attachments"
    );
}

#[test]
fn a_row_naming_another_vpc_that_held_the_vrf_id_is_not_kept() {
    galactic_testns::privileged!();
    let (_bpffs, pin, state) = node();
    // VPC kV released the VRF id (its galactic-bgp DEL ran) and VPC jU claimed it before kV's
    // last registration was removed (its master's DEL runs after): both on one VRF key.
    let released = host_ifname(
        &VpcId::parse("kV").unwrap(),
        &AttachmentId::parse("1").unwrap(),
    );
    register(&pin, state.path(), &released, 5, EGRESS_KIND_VETH);
    register(&pin, state.path(), &name(1), 9, EGRESS_KIND_VETH);
    assert_eq!(
        rows(&pin).1,
        Some(name(1)),
        "the attribution names jU's own"
    );
    unregister_attachment(state.path(), &released).unwrap();
    assert_eq!(
        rows(&pin),
        (Some(EGRESS_KIND_VETH), Some(name(1))),
        "kV's removal leaves jU's rows"
    );
}

#[test]
fn the_last_removal_of_a_vpc_on_a_shared_vrf_key_names_the_vpc_still_there() {
    galactic_testns::privileged!();
    let (_bpffs, pin, state) = node();
    // jU holds the VRF key; kV registered on it after claiming the id jU's last DEL released
    // (galactic-bgp's DEL runs before the master's) while a jU attachment was still added.
    let claimer = host_ifname(
        &VpcId::parse("kV").unwrap(),
        &AttachmentId::parse("1").unwrap(),
    );
    register(&pin, state.path(), &name(1), 9, EGRESS_KIND_VETH);
    register(&pin, state.path(), &claimer, 5, EGRESS_KIND_VETH);
    assert_eq!(
        rows(&pin).1,
        Some(claimer.clone()),
        "the last writer's VPC is named"
    );
    unregister_attachment(state.path(), &claimer).unwrap();
    assert_eq!(
        rows(&pin).1,
        Some(name(1)),
        "kV's last removal names jU's attachment on the key, not none"
    );
    unregister_attachment(state.path(), &name(1)).unwrap();
    assert_eq!(rows(&pin).1, None, "the key's last removal takes the row");
}
