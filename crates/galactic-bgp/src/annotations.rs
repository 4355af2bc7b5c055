//! Per-container annotations on a BGPAdvertisement, pruning of dead containers, and the prefix
//! set derived from them.
//!
//! An advertisement is shared by every container of one (VPC, attachment) on the cluster; each
//! container records its netns and addresses under keys suffixed with its container id cut to 41
//! characters (the name part of an annotation key is at most 63 bytes, and
//! `allocated-subnet-ipv6.` takes 22). `spec.prefixes` is recomputed from these records on every
//! write: canonical (host bits masked), deduplicated and sorted, so a replacement pod that reuses
//! its predecessor's subnet never produces a duplicate (which the API server rejects).

use crate::prev::Facts;
use ipnetwork::IpNetwork;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// netns record of a container.
pub const NETNS: &str = "galactic.datum.net/netns.";
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

/// Records this container: netns and addresses (an absent family removes its old record).
pub fn record(annotations: &mut Map<String, Value>, cid: &str, netns: &str, facts: &Facts) {
    let key = cid41(cid);
    annotations.insert(format!("{NETNS}{key}"), netns.into());
    let v6 = format!("{SUBNET_V6}{key}");
    match facts.v6 {
        Some(v6addr) => annotations.insert(v6, v6addr.to_string().into()),
        None => annotations.remove(&v6),
    };
    let v4 = format!("{SUBNET_V4}{key}");
    match facts.v4 {
        Some(v4addr) => annotations.insert(v4, v4addr.to_string().into()),
        None => annotations.remove(&v4),
    };
}

/// Removes this container's records; returns whether there were any.
pub fn forget(annotations: &mut Map<String, Value>, cid: &str) -> bool {
    let key = cid41(cid);
    let mut found = false;
    for prefix in [NETNS, SUBNET_V6, SUBNET_V4] {
        found |= annotations.remove(&format!("{prefix}{key}")).is_some();
    }
    found
}

/// The container-id parts of every container an advertisement records.
pub fn recorded(advertisement: &Value) -> Vec<String> {
    advertisement
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|a| a.keys())
        .filter_map(|k| k.strip_prefix(NETNS).map(str::to_owned))
        .collect()
}

/// How many containers the annotations record.
pub fn containers(annotations: &Map<String, Value>) -> usize {
    annotations.keys().filter(|k| k.starts_with(NETNS)).count()
}

/// Removes the records of every container whose netns is not alive; returns their key suffixes.
pub fn prune_dead(
    annotations: &mut Map<String, Value>,
    alive: impl Fn(&str) -> bool,
) -> Vec<String> {
    let dead: Vec<String> = annotations
        .iter()
        .filter_map(|(k, v)| {
            let suffix = k.strip_prefix(NETNS)?;
            (!alive(v.as_str().unwrap_or_default())).then(|| suffix.to_owned())
        })
        .collect();
    for suffix in &dead {
        for prefix in [NETNS, SUBNET_V6, SUBNET_V4] {
            annotations.remove(&format!("{prefix}{suffix}"));
        }
    }
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
pub fn all_prefixes(annotations: &Map<String, Value>) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (key, value) in annotations {
        let Some(value) = value.as_str() else {
            continue;
        };
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
    use serde_json::json;

    fn facts(v6: Option<&str>, v4: Option<&str>) -> Facts {
        Facts {
            kind: InterfaceKind::Veth,
            host_ifname: "G000000001001H".into(),
            v6: v6.map(|s| s.parse().unwrap()),
            v4: v4.map(|s| s.parse().unwrap()),
        }
    }

    #[test]
    fn records_use_41_characters_of_the_container_id() {
        let cid = "a".repeat(64);
        let mut ann = Map::new();
        record(
            &mut ann,
            &cid,
            "/run/netns/x",
            &facts(Some("fd20:10:ff01::100:0/96"), Some("172.21.1.2")),
        );
        let key = "a".repeat(41);
        assert_eq!(
            Value::Object(ann),
            json!({
                format!("{NETNS}{key}"): "/run/netns/x",
                format!("{SUBNET_V6}{key}"): "fd20:10:ff01::100:0/96",
                format!("{SUBNET_V4}{key}"): "172.21.1.2",
            })
        );
        assert!(format!("allocated-subnet-ipv6.{key}").len() <= 63);
    }

    #[test]
    fn pruning_removes_dead_siblings_only() {
        let mut ann = Map::new();
        ann.insert("other/key".into(), "kept".into());
        record(&mut ann, "live", "/live", &facts(Some("fd00::1/64"), None));
        record(
            &mut ann,
            "dead",
            "/dead",
            &facts(Some("fd00::1/64"), Some("10.0.0.1")),
        );
        let pruned = prune_dead(&mut ann, |p| p == "/live");
        assert_eq!(pruned, ["dead"]);
        assert_eq!(ann.len(), 3, "{ann:?}");
        assert!(ann.contains_key("other/key") && ann.contains_key(&format!("{NETNS}live")));
    }

    #[test]
    fn prefixes_are_canonical_deduplicated_and_sorted() {
        let mut ann = Map::new();
        record(
            &mut ann,
            "c1",
            "/a",
            &facts(Some("fd20:10:ff01::100:0/96"), Some("172.21.1.2")),
        );
        record(
            &mut ann,
            "c2",
            "/b",
            &facts(Some("fd20:10:ff01::200:0/96"), Some("172.21.1.3")),
        );
        record(&mut ann, "c3", "/c", &facts(None, Some("172.21.1.2")));
        ann.insert(format!("{SUBNET_V4}junk"), "not-an-ip".into());
        assert_eq!(
            all_prefixes(&ann),
            ["172.21.1.2/32", "172.21.1.3/32", "fd20:10:ff01::/96"]
        );
        assert!(all_prefixes(&Map::new()).is_empty());
        assert_eq!(
            own_prefixes(&facts(Some("fd00::5/64"), None)),
            ["fd00::/64"]
        );
    }
}
