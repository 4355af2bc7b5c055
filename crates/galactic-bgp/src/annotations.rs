//! Per-container annotations on a BGPAdvertisement, pruning of dead containers, and the prefix
//! set derived from them.
//!
//! An advertisement is shared by every container of one (VPC, attachment) on the cluster; each
//! container records its netns and addresses under keys suffixed with its container id cut to 41
//! characters (the name part of an annotation key is at most 63 bytes, and
//! `allocated-subnet-ipv6.` takes 22). `spec.prefixes` is recomputed from these records on every
//! write: canonical (host bits masked), deduplicated and sorted, so a replacement pod that reuses
//! its predecessor's subnet never produces a duplicate (which the API server rejects).
//!
//! The netns records are also what galactic-router's GC judges an advertisement by (decision
//! 0016): it reclaims one whose `netns.*` paths all fail `/var/run/netns/<basename>`, and keeps
//! one without any. A path elsewhere (`/proc/<pid>/ns/net`, a runtime's own bind mount) always
//! fails that test, however alive. So the records go under `netns.` only while every one of them
//! is under `/run/netns` or `/var/run/netns`; otherwise all of them go under `netns-path.`, which
//! the GC does not read, and the advertisement is kept while any container records it.

use crate::prev::Facts;
use ipnetwork::{IpNetwork, Ipv6Network};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::Path;

/// An object's annotations.
pub type Annotations = BTreeMap<String, String>;

/// netns record of a container, in the key the router's GC judges liveness by.
pub const NETNS: &str = "galactic.datum.net/netns.";
/// netns record of a container while the advertisement records a netns the router's GC cannot
/// judge (see the module documentation).
pub const NETNS_HELD: &str = "galactic.datum.net/netns-path.";
/// IPv6 address record (as assigned, with prefix length and host bits).
pub const SUBNET_V6: &str = "galactic.datum.net/allocated-subnet-ipv6.";
/// IPv4 address record (bare address).
pub const SUBNET_V4: &str = "galactic.datum.net/allocated-subnet-ipv4.";
/// Tenant identifier (label and annotation of the EndpointSlice).
pub const TENANT_ID: &str = "galactic.datum.net/tenant-id";
/// The uSID of the attachment's VRF (EndpointSlice annotation, when SRv6 is configured).
pub const SRV6_SID: &str = "galactic.datum.net/srv6-sid";

/// The container-id part of the annotation keys: its first 41 characters.
pub fn cid41(container_id: &str) -> &str {
    container_id.get(..41).unwrap_or(container_id)
}

/// Whether galactic-router's GC can tell if the netns at `path` exists: it looks for
/// `/var/run/netns/<basename>`, which is the same file only for a path in `/run/netns` or
/// `/var/run/netns`.
pub fn router_gc_judges(path: &str) -> bool {
    let path = Path::new(path);
    let named = path.file_name().is_some_and(|n| !n.is_empty());
    let parent = path.parent().and_then(Path::to_str);
    named && matches!(parent, Some("/run/netns" | "/var/run/netns"))
}

/// Every container's netns record (key suffix → path), whichever key it is under.
pub fn netns_records(annotations: &Annotations) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter_map(|(k, v)| {
            let suffix = k
                .strip_prefix(NETNS)
                .or_else(|| k.strip_prefix(NETNS_HELD))?;
            Some((suffix.to_owned(), v.clone()))
        })
        .collect()
}

/// Whether container `cid` is recorded.
pub fn records(annotations: &Annotations, cid: &str) -> bool {
    netns_records(annotations).contains_key(cid41(cid))
}

/// What one container's records say: its netns and addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRecord<'a> {
    /// The netns path, as the runtime passed it.
    pub netns: &'a str,
    /// The IPv6 address with its prefix length as assigned (host bits kept).
    pub v6: Option<Ipv6Network>,
    /// The IPv4 address.
    pub v4: Option<Ipv4Addr>,
}

impl<'a> ContainerRecord<'a> {
    /// The record of an attachment the master reported in `facts`, in `netns`.
    pub fn of(netns: &'a str, facts: &Facts) -> Self {
        Self {
            netns,
            v6: facts.v6,
            v4: facts.v4,
        }
    }

    /// The record of the container whose key suffix is `suffix`, as another chain wrote it; `None`
    /// without a netns record or with an address record that does not parse (moving it would
    /// drop that address from the advertisement).
    pub fn read(annotations: &'a Annotations, suffix: &str) -> Option<Self> {
        let netns = [NETNS, NETNS_HELD]
            .iter()
            .find_map(|p| annotations.get(&format!("{p}{suffix}")))?;
        let parse = |prefix: &str| annotations.get(&format!("{prefix}{suffix}"));
        Some(Self {
            netns,
            v6: parse(SUBNET_V6).map(|v| v.parse()).transpose().ok()?,
            v4: parse(SUBNET_V4).map(|v| v.parse()).transpose().ok()?,
        })
    }
}

/// Records this container (an absent family removes its old address record); then places every
/// netns record under the key the router's GC can act on ([`place_netns`]).
pub fn record(annotations: &mut Annotations, cid: &str, record: &ContainerRecord<'_>) {
    let key = cid41(cid);
    annotations.remove(&format!("{NETNS_HELD}{key}"));
    annotations.insert(format!("{NETNS}{key}"), record.netns.to_owned());
    let v6 = format!("{SUBNET_V6}{key}");
    match record.v6 {
        Some(v6addr) => annotations.insert(v6, v6addr.to_string()),
        None => annotations.remove(&v6),
    };
    let v4 = format!("{SUBNET_V4}{key}");
    match record.v4 {
        Some(v4addr) => annotations.insert(v4, v4addr.to_string()),
        None => annotations.remove(&v4),
    };
    place_netns(annotations);
}

/// Puts every netns record under [`NETNS`] when the router's GC can judge each of them, and
/// every one under [`NETNS_HELD`] otherwise: one unjudgeable live container must keep the
/// advertisement (and with it the VPC's VRF instance and VRF device) however its siblings fare.
pub fn place_netns(annotations: &mut Annotations) {
    let records = netns_records(annotations);
    let key = if records.values().all(|p| router_gc_judges(p)) {
        NETNS
    } else {
        NETNS_HELD
    };
    for (suffix, path) in records {
        annotations.remove(&format!("{NETNS}{suffix}"));
        annotations.remove(&format!("{NETNS_HELD}{suffix}"));
        annotations.insert(format!("{key}{suffix}"), path);
    }
}

/// Removes this container's records (under either netns key); returns whether there were any.
/// The rest stay where they are until [`place_netns`] (which [`prune_dead`] ends with).
pub fn forget(annotations: &mut Annotations, cid: &str) -> bool {
    let key = cid41(cid);
    let mut found = false;
    for prefix in [NETNS, NETNS_HELD, SUBNET_V6, SUBNET_V4] {
        found |= annotations.remove(&format!("{prefix}{key}")).is_some();
    }
    found
}

/// The container-id parts of every container the annotations record.
pub fn recorded(annotations: &Annotations) -> Vec<String> {
    netns_records(annotations).into_keys().collect()
}

/// How many containers the annotations record.
pub fn containers(annotations: &Annotations) -> usize {
    netns_records(annotations).len()
}

/// Removes the records of every container whose netns is not alive; returns their key suffixes.
pub fn prune_dead(annotations: &mut Annotations, alive: impl Fn(&str) -> bool) -> Vec<String> {
    let dead: Vec<String> = netns_records(annotations)
        .into_iter()
        .filter(|(_, path)| !alive(path))
        .map(|(suffix, _)| suffix)
        .collect();
    for suffix in &dead {
        for prefix in [NETNS, NETNS_HELD, SUBNET_V6, SUBNET_V4] {
            annotations.remove(&format!("{prefix}{suffix}"));
        }
    }
    place_netns(annotations);
    dead
}

/// The canonical network of an address record, if it parses.
fn canonical(value: &str, bare_v4: bool) -> Option<String> {
    let net: IpNetwork = if bare_v4 {
        IpNetwork::new(value.parse::<std::net::Ipv4Addr>().ok()?.into(), 32).ok()?
    } else {
        value.parse().ok()?
    };
    IpNetwork::new(net.network(), net.prefix())
        .ok()
        .map(|n| n.to_string())
}

/// This attachment's own prefixes, canonical.
pub fn own_prefixes(facts: &Facts) -> Vec<String> {
    let mut out = BTreeSet::new();
    if let Some(v6) = facts.v6 {
        out.extend(canonical(&v6.to_string(), false));
    }
    if let Some(v4) = facts.v4 {
        out.extend(canonical(&v4.to_string(), true));
    }
    out.into_iter().collect()
}

/// Every recorded prefix: canonical, deduplicated, sorted. Records that do not parse are skipped.
pub fn all_prefixes(annotations: &Annotations) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (key, value) in annotations {
        if key.starts_with(SUBNET_V6) {
            out.extend(canonical(value, false));
        } else if key.starts_with(SUBNET_V4) {
            out.extend(canonical(value, true));
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prev::InterfaceKind;

    fn facts(v6: Option<&str>, v4: Option<&str>) -> Facts {
        Facts {
            kind: InterfaceKind::Veth,
            host_ifname: "G000000001001H".into(),
            v6: v6.map(|s| s.parse().unwrap()),
            v4: v4.map(|s| s.parse().unwrap()),
            gateways: Vec::new(),
        }
    }

    fn put(ann: &mut Annotations, cid: &str, netns: &str, facts: &Facts) {
        record(ann, cid, &ContainerRecord::of(netns, facts));
    }

    #[test]
    fn another_chains_record_is_read_back_whole_or_not_at_all() {
        let mut ann = Annotations::new();
        let f = facts(Some("fd20:10:ff01::100:0/96"), Some("172.21.1.2"));
        put(&mut ann, "c1", "/proc/1/ns/net", &f);
        put(&mut ann, "c2", "/run/netns/c2", &facts(None, None));
        assert_eq!(
            ContainerRecord::read(&ann, "c1"),
            Some(ContainerRecord::of("/proc/1/ns/net", &f))
        );
        assert_eq!(
            ContainerRecord::read(&ann, "c2"),
            Some(ContainerRecord::of("/run/netns/c2", &facts(None, None)))
        );
        assert_eq!(ContainerRecord::read(&ann, "c3"), None);
        ann.insert(format!("{SUBNET_V4}c1"), "not-an-ip".into());
        assert_eq!(
            ContainerRecord::read(&ann, "c1"),
            None,
            "an address would be lost"
        );
    }

    #[test]
    fn records_use_41_characters_of_the_container_id() {
        let cid = "a".repeat(64);
        let mut ann = Annotations::new();
        put(
            &mut ann,
            &cid,
            "/run/netns/x",
            &facts(Some("fd20:10:ff01::100:0/96"), Some("172.21.1.2")),
        );
        let key = "a".repeat(41);
        assert_eq!(
            ann,
            Annotations::from([
                (format!("{NETNS}{key}"), "/run/netns/x".to_owned()),
                (
                    format!("{SUBNET_V6}{key}"),
                    "fd20:10:ff01::100:0/96".to_owned()
                ),
                (format!("{SUBNET_V4}{key}"), "172.21.1.2".to_owned()),
            ])
        );
        assert!(format!("allocated-subnet-ipv6.{key}").len() <= 63);
    }

    #[test]
    fn pruning_removes_dead_siblings_only() {
        let mut ann = Annotations::new();
        ann.insert("other/key".into(), "kept".into());
        put(
            &mut ann,
            "live",
            "/run/netns/live",
            &facts(Some("fd00::1/64"), None),
        );
        put(
            &mut ann,
            "dead",
            "/run/netns/dead",
            &facts(Some("fd00::1/64"), Some("10.0.0.1")),
        );
        let pruned = prune_dead(&mut ann, |p| p == "/run/netns/live");
        assert_eq!(pruned, ["dead"]);
        assert_eq!(ann.len(), 3, "{ann:?}");
        assert!(ann.contains_key("other/key") && ann.contains_key(&format!("{NETNS}live")));
    }

    #[test]
    fn prefixes_are_canonical_deduplicated_and_sorted() {
        let mut ann = Annotations::new();
        put(
            &mut ann,
            "c1",
            "/a",
            &facts(Some("fd20:10:ff01::100:0/96"), Some("172.21.1.2")),
        );
        put(
            &mut ann,
            "c2",
            "/b",
            &facts(Some("fd20:10:ff01::200:0/96"), Some("172.21.1.3")),
        );
        put(&mut ann, "c3", "/c", &facts(None, Some("172.21.1.2")));
        ann.insert(format!("{SUBNET_V4}junk"), "not-an-ip".into());
        assert_eq!(
            all_prefixes(&ann),
            ["172.21.1.2/32", "172.21.1.3/32", "fd20:10:ff01::/96"]
        );
        assert!(all_prefixes(&Annotations::new()).is_empty());
        assert_eq!(
            own_prefixes(&facts(Some("fd00::5/64"), None)),
            ["fd00::/64"]
        );
    }

    #[test]
    fn records_move_out_of_the_router_gc_key_while_any_netns_is_unjudgeable() {
        for (path, judged) in [
            ("/run/netns/cni-1234", true),
            ("/var/run/netns/cni-1234", true),
            ("/proc/4242/ns/net", false),
            ("/var/run/docker/netns/abc", false),
            ("/run/netns/", false),
            ("/run/netns/a/b", false),
            ("", false),
        ] {
            assert_eq!(router_gc_judges(path), judged, "{path}");
        }
        let keys = |ann: &Annotations| -> Vec<String> {
            ann.keys()
                .filter(|k| k.contains("netns"))
                .cloned()
                .collect()
        };
        let mut ann = Annotations::new();
        put(&mut ann, "a", "/run/netns/a", &facts(None, None));
        assert_eq!(keys(&ann), [format!("{NETNS}a")]);
        put(
            &mut ann,
            "b",
            "/proc/42/ns/net",
            &facts(Some("fd00::1/64"), None),
        );
        assert_eq!(
            keys(&ann),
            [format!("{NETNS_HELD}a"), format!("{NETNS_HELD}b")]
        );
        assert!(records(&ann, "a") && records(&ann, "b") && !records(&ann, "c"));
        assert_eq!(netns_records(&ann)["a"], "/run/netns/a");
        // Once the unjudgeable container is gone, the GC judges the rest again.
        assert_eq!(prune_dead(&mut ann, |p| p != "/proc/42/ns/net"), ["b"]);
        assert_eq!(keys(&ann), [format!("{NETNS}a")]);
    }
}
