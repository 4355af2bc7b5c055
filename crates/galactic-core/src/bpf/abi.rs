//! The pinned-map ABI shared with the eBPF datapath: one `#[repr(C)]` type per key and value,
//! laid out byte for byte as the datapath's C structs (`docs/ebpf.md` has the tables).
//!
//! Rules (the datapath reads these bytes; a silent layout change corrupts forwarding):
//! - integers are **host byte order** (the kernel and the program run on this machine);
//!   fields holding wire-format data are byte arrays whose names end in `_be` (network order);
//! - padding is an explicit, zeroed field; no `bool`, enum or `Option` (invalid bit patterns);
//! - every type has a `const` size assertion matching the reference layout.

use aya::maps::lpm_trie::Key;

/// `locator_table` key: `Block << 16 | NodeID` (the top 64 bits of a SID read big-endian),
/// stored as a host-order `u64`.
pub type LocatorKey = u64;

/// `locator_table` value (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocatorValue {
    /// CLOCK_MONOTONIC nanoseconds at registration.
    pub generation_ns: u64,
}

/// `function_table` key: `Block << 4 | Function`, host-order `u64`.
pub type FunctionKey = u64;

/// `function_table` value (4 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FunctionValue {
    /// [`BEHAVIOR_END_DT46`] or [`BEHAVIOR_END_DT2`].
    pub behavior: u32,
}

/// `function_table` behaviour code of End.DT46.
pub const BEHAVIOR_END_DT46: u32 = 1;
/// `function_table` behaviour code of End.DT2 (reserved; never written by the CNI).
pub const BEHAVIOR_END_DT2: u32 = 2;

/// `vrf_table` key: `Block << 12 | Argument`, host-order `u64`.
pub type VrfKey = u64;

/// `vrf_table` value (48 bytes). The counters belong to the datapath; registration keeps them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VrfValue {
    /// Linux routing table of the VPC on this node (offset 0).
    pub vrf_table_id: u32,
    /// [`EGRESS_KIND_VETH`] or [`EGRESS_KIND_TAP`] (offset 4).
    pub egress_kind: u32,
    /// Packets decapsulated into this VRF (offset 8).
    pub packets: u64,
    /// Bytes decapsulated into this VRF (offset 16).
    pub bytes: u64,
    /// CLOCK_MONOTONIC ns of the last packet (offset 24).
    pub last_seen_ns: u64,
    /// CLOCK_MONOTONIC ns of the last registration (offset 32); the GC cutoff compares it.
    pub generation_ns: u64,
    /// Packets dropped in this VRF (offset 40).
    pub dropped_packets: u64,
}

/// `vrf_table` egress kind of a veth attachment (`bpf_redirect_peer`).
pub const EGRESS_KIND_VETH: u32 = 0;
/// `vrf_table` egress kind of a tap attachment (`bpf_redirect`).
pub const EGRESS_KIND_TAP: u32 = 1;

/// `ifindex_vrf_table` key: the host interface's ifindex (host-order `u32`).
pub type IfindexKey = u32;

/// `ifindex_vrf_table` value (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfindexVrfValue {
    /// The uSID Block (48 bits in a host-order `u64`; offset 0).
    pub block: u64,
    /// The uSID Argument (the VRF id, 12 bits; offset 8).
    pub argument: u16,
    /// Zero (offset 10); the C struct's tail padding, spelled out.
    pub _pad: [u8; 6],
}

/// The data part of an `egress_route_table` key (21 bytes, packed); the LPM prefix length in
/// front of it makes the 25-byte key ([`EgressRouteKey`]).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EgressRouteKeyData {
    /// Linux VRF table (host order; offset 4 of the full key).
    pub table_id: u32,
    /// [`FAMILY_IPV6`] or [`FAMILY_IPV4`] (offset 8).
    pub family: u8,
    /// Destination, network order; IPv4 in the first 4 bytes, the rest zero (offset 9).
    pub addr_be: [u8; 16],
}

/// The full `egress_route_table` key: `u32 prefixlen` (= [`EGRESS_KEY_PREFIX_BITS`] + prefix
/// bits) followed by [`EgressRouteKeyData`]; 25 bytes, packed.
pub type EgressRouteKey = Key<EgressRouteKeyData>;

/// Bits of the key before the address that every lookup matches exactly: table id and family.
pub const EGRESS_KEY_PREFIX_BITS: u32 = 40;
/// `egress_route_table` family code of IPv6.
pub const FAMILY_IPV6: u8 = 0;
/// `egress_route_table` family code of IPv4.
pub const FAMILY_IPV4: u8 = 1;

/// `egress_route_table` value (32 bytes). All zero is the local pass-through (ifindex 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EgressRouteValue {
    /// The SID to encapsulate towards, network order (offset 0).
    pub sid_be: [u8; 16],
    /// Output interface (host order; offset 16); 0 = local pass-through.
    pub link_ifindex: u32,
    /// Next hop MAC (offset 20).
    pub dmac: [u8; 6],
    /// Source MAC (offset 26).
    pub smac: [u8; 6],
}

impl EgressRouteValue {
    /// The local pass-through: same-VRF destinations are not encapsulated.
    pub const PASS_THROUGH: Self = Self {
        sid_be: [0; 16],
        link_ifindex: 0,
        dmac: [0; 6],
        smac: [0; 6],
    };
}

/// `node_src_addr_table` / `public_uplink_table` key: always index 0.
pub type NodeIndex = u32;

/// `node_src_addr_table` value (16 bytes): this node's SRv6 source address.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSrcAddrValue {
    /// IPv6 address, network order.
    pub addr_be: [u8; 16],
}

/// `public_uplink_table` value (16 bytes); ifindex 0 = not configured.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublicUplinkValue {
    /// Uplink interface (host order; offset 0).
    pub link_ifindex: u32,
    /// Next hop MAC (offset 4).
    pub dmac: [u8; 6],
    /// Source MAC (offset 10).
    pub smac: [u8; 6],
}

/// `ifindex_egress_kind_table` (newest datapath) value: [`EGRESS_KIND_VETH`] or
/// [`EGRESS_KIND_TAP`] of the host interface the key names (host-order `u32`).
pub type EgressKindValue = u32;

/// `vpc_attribution_table` (newest datapath) key: `Block << 12 | Argument`, as [`VrfKey`].
pub type VpcAttributionKey = u64;

/// `vpc_attribution_table` value (24 bytes): which attachment a VRF's counters are billed to.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VpcAttributionValue {
    /// The VPC identifier, decoded from base62 (48 bits; offset 0).
    pub vpc: u64,
    /// The VPC attachment identifier, decoded from base62 (16 bits; offset 8).
    pub vpc_attachment: u32,
    /// Zero (offset 12); the C struct's alignment padding, spelled out.
    pub _pad: [u8; 4],
    /// CLOCK_MONOTONIC ns of the last registration (offset 16).
    pub generation_ns: u64,
}

/// `tenant_gw_table` (newest datapath) value (20 bytes): the attachment's IPAM gateways, the
/// source of the ICMP errors the datapath sends for packets too big for the fabric. A family
/// without a gateway is all zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantGwValue {
    /// IPv6 gateway, network order (offset 0).
    pub gw6_be: [u8; 16],
    /// IPv4 gateway, network order (offset 16).
    pub gw4_be: [u8; 4],
}

// Layouts of the reference (upstream §6.7), checked at compile time.
const _: () = assert!(size_of::<LocatorValue>() == 8);
const _: () = assert!(size_of::<FunctionValue>() == 4);
const _: () = assert!(size_of::<VrfValue>() == 48);
const _: () = assert!(std::mem::offset_of!(VrfValue, generation_ns) == 32);
const _: () = assert!(std::mem::offset_of!(VrfValue, dropped_packets) == 40);
const _: () = assert!(size_of::<IfindexVrfValue>() == 16);
const _: () = assert!(std::mem::offset_of!(IfindexVrfValue, argument) == 8);
const _: () = assert!(size_of::<EgressRouteKeyData>() == 21);
const _: () = assert!(size_of::<EgressRouteKey>() == 25);
const _: () = assert!(size_of::<EgressRouteValue>() == 32);
const _: () = assert!(std::mem::offset_of!(EgressRouteValue, smac) == 26);
const _: () = assert!(size_of::<NodeSrcAddrValue>() == 16);
const _: () = assert!(size_of::<PublicUplinkValue>() == 16);
const _: () = assert!(size_of::<VpcAttributionValue>() == 24);
const _: () = assert!(std::mem::offset_of!(VpcAttributionValue, generation_ns) == 16);
const _: () = assert!(size_of::<TenantGwValue>() == 20);

// SAFETY: one `u64` field, no padding; every bit pattern is a valid value.
unsafe impl aya::Pod for LocatorValue {}
// SAFETY: one `u32` field, no padding; every bit pattern is a valid value.
unsafe impl aya::Pod for FunctionValue {}
// SAFETY: two `u32` then five `u64` (offsets 0, 4, 8..40), size 48 = sum of fields: no implicit
// padding; every bit pattern is valid.
unsafe impl aya::Pod for VrfValue {}
// SAFETY: `u64`, `u16`, `[u8; 6]` = 16 bytes at alignment 8: the tail padding is the explicit
// `_pad` field, so there are no uninitialised bytes; every bit pattern is valid.
unsafe impl aya::Pod for IfindexVrfValue {}
// SAFETY: `repr(packed)`: no padding at all; integers and byte arrays accept every bit pattern.
unsafe impl aya::Pod for EgressRouteKeyData {}
// SAFETY: `[u8; 16]`, `u32`, `[u8; 6]`, `[u8; 6]` at offsets 0, 16, 20, 26, size 32 = sum of
// fields at alignment 4: no implicit padding; every bit pattern is valid.
unsafe impl aya::Pod for EgressRouteValue {}
// SAFETY: a byte array; no padding, every bit pattern is valid.
unsafe impl aya::Pod for NodeSrcAddrValue {}
// SAFETY: `u32`, `[u8; 6]`, `[u8; 6]` at offsets 0, 4, 10, size 16 = sum of fields: no implicit
// padding; every bit pattern is valid.
unsafe impl aya::Pod for PublicUplinkValue {}
// SAFETY: `u64`, `u32`, `[u8; 4]`, `u64` at offsets 0, 8, 12, 16, size 24 = sum of fields:
// the padding is the explicit `_pad` field; every bit pattern is valid.
unsafe impl aya::Pod for VpcAttributionValue {}
// SAFETY: two byte arrays, alignment 1, size 20 = sum of fields: no padding; every bit pattern
// is valid.
unsafe impl aya::Pod for TenantGwValue {}

/// The raw bytes of a `Pod` value, as the kernel stores them (for tests and diagnostics).
pub fn bytes_of<T: aya::Pod>(value: &T) -> &[u8] {
    // SAFETY: `T: Pod` has no padding or invalid bytes, so all `size_of::<T>()` bytes are
    // initialised; the slice borrows `value` and cannot outlive it.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vrf_value_bytes_are_the_reference_layout() {
        let v = VrfValue {
            vrf_table_id: 0x0102_0304,
            egress_kind: EGRESS_KIND_TAP,
            packets: 5,
            bytes: 6,
            last_seen_ns: 7,
            generation_ns: 8,
            dropped_packets: 9,
        };
        let mut want = Vec::new();
        want.extend_from_slice(&0x0102_0304u32.to_ne_bytes());
        want.extend_from_slice(&1u32.to_ne_bytes());
        for n in [5u64, 6, 7, 8, 9] {
            want.extend_from_slice(&n.to_ne_bytes());
        }
        assert_eq!(bytes_of(&v), want.as_slice());
    }

    #[test]
    fn egress_key_is_prefixlen_table_family_address() {
        let key = EgressRouteKey::new(
            EGRESS_KEY_PREFIX_BITS + 96,
            EgressRouteKeyData {
                table_id: 100,
                family: FAMILY_IPV6,
                addr_be: [0xfd, 0x20, 0, 0x10, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            },
        );
        let bytes = bytes_of(&key);
        assert_eq!(&bytes[..4], &136u32.to_ne_bytes());
        assert_eq!(&bytes[4..8], &100u32.to_ne_bytes());
        assert_eq!(bytes[8], 0);
        assert_eq!(&bytes[9..13], &[0xfd, 0x20, 0, 0x10]);
    }

    #[test]
    fn ifindex_value_and_uplink_bytes() {
        let v = IfindexVrfValue {
            block: 0x2001_0db8_ff03,
            argument: 0x0abc,
            _pad: [0; 6],
        };
        let bytes = bytes_of(&v);
        assert_eq!(&bytes[..8], &0x2001_0db8_ff03u64.to_ne_bytes());
        assert_eq!(&bytes[8..10], &0x0abcu16.to_ne_bytes());
        assert_eq!(&bytes[10..], &[0; 6]);
        let u = PublicUplinkValue {
            link_ifindex: 7,
            dmac: [1, 2, 3, 4, 5, 6],
            smac: [7, 8, 9, 10, 11, 12],
        };
        let bytes = bytes_of(&u);
        assert_eq!(&bytes[..4], &7u32.to_ne_bytes());
        assert_eq!(&bytes[4..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(bytes_of(&EgressRouteValue::PASS_THROUGH), &[0u8; 32]);
    }
}
