//! Value syntax of node keys (paths; the eBPF datapath's `ebpf_datapath`,
//! `ebpf_filter_priority`, the egress shard SIDs, `ebpf_interfaces`). Each parser returns `None`
//! for a value it refuses; the resolver turns that into an error naming key, value and source.

use std::net::Ipv6Addr;
use std::path::PathBuf;

/// An absolute path.
pub(super) fn absolute_path(raw: &str) -> Option<PathBuf> {
    let path = PathBuf::from(raw.trim());
    path.is_absolute().then_some(path)
}

/// `on` → true, `off` → false (any case).
pub(super) fn on_off(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

/// A tc priority. 0 is refused: the kernel would allocate a fresh priority on every attach,
/// so a repeated ADD would stack filters instead of replacing its own.
pub(super) fn filter_priority(raw: &str) -> Option<u16> {
    raw.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

/// A firewall-mark mask: hexadecimal (`0x…`) or decimal, one run of at least 2 set bits (a VPC's
/// mark is a number in those bits; 0 is no VPC, so one bit would hold a single VPC).
pub(super) fn mark_mask(raw: &str) -> Option<u32> {
    let raw = raw.trim();
    let mask = match raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => raw.parse::<u32>().ok()?,
    };
    let run = mask >> mask.trailing_zeros().min(31);
    let contiguous = mask != 0 && run & (run.wrapping_add(1)) == 0;
    (contiguous && mask.count_ones() >= 2).then_some(mask)
}

/// A SID: an IPv6 unicast address (the unspecified address and multicast cannot be routed to).
pub(super) fn shard_sid(raw: &str) -> Option<Ipv6Addr> {
    raw.parse::<Ipv6Addr>()
        .ok()
        .filter(|a| !a.is_unspecified() && !a.is_multicast())
}

/// A Linux interface name, as the kernel's `dev_valid_name` accepts it.
pub(super) fn interface_name(raw: &str) -> Option<String> {
    let valid = !raw.is_empty()
        && raw.len() < 16
        && raw != "."
        && raw != ".."
        && !raw
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    valid.then(|| raw.to_owned())
}

/// `items` without repeats, first occurrence kept.
pub(super) fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
