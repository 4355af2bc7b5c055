//! The uSID codec, uFMT 48+16 (128 bits, network order):
//!
//! ```text
//! bytes 0-5   Block      48 bits, from the router's srv6Locator (a /48)
//! bytes 6-7   Node-ID    16 bits, 0x0001..=0xDFFF
//! byte  8     Function   high nibble: 0xE End.DT46 (0xF End.DT2, reserved)
//! byte  8-9   Argument   low nibble of byte 8 + byte 9: 12 bits, 0x001..=0xFFF (the VRF id)
//! bytes 10-15 zero
//! ```
//! Example: locator `2001:db8:ff03::/48`, node 1, VRF id 1 → `2001:db8:ff03:1:e001::`.

use std::net::Ipv6Addr;

/// Highest Node-ID (0xE000.. is reserved by uFMT), shared with the BGPRouter CRD's bound.
pub use crate::ident::NODE_ID_MAX;
/// Highest Argument (12 bits); 0 is reserved and never registered.
pub const ARGUMENT_MAX: u16 = 0xFFF;
/// Function nibble of End.DT46.
pub const FUNCTION_END_DT46: u8 = 0xE;
/// Function nibble of End.DT2 (reserved).
pub const FUNCTION_END_DT2: u8 = 0xF;

/// Why a uSID (or one of its parts) is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsidError {
    /// The locator is not an IPv6 /48.
    #[error("SRv6 locator {0:?} must be an IPv6 /48 prefix")]
    Locator(String),
    /// The node id is outside 1..0xDFFF.
    #[error("nodeID {0} out of range [0x1,0xdfff]")]
    NodeId(i64),
    /// The argument is outside 1..0xFFF.
    #[error("VRF id {0} out of range [0x1,0xfff] for a uSID argument")]
    Argument(i64),
    /// The function nibble is not one this datapath knows.
    #[error("uSID function {0:#x} is not End.DT46 (0xe) or End.DT2 (0xf)")]
    Function(u8),
    /// The bytes after the argument are not zero.
    #[error("{0} is not a uSID: bytes 10-15 must be zero")]
    Tail(Ipv6Addr),
}

/// A 48-bit uSID Block, held in the low 48 bits of a `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(u64);

impl Block {
    /// The Block of an address: its first 6 bytes (the first 8 read big-endian, shifted by 16).
    pub fn of(addr: Ipv6Addr) -> Self {
        let o = addr.octets();
        let mut top = [0u8; 8];
        top.copy_from_slice(&o[..8]);
        Self(u64::from_be_bytes(top) >> 16)
    }

    /// The Block of an SRv6 locator `addr/48`, taken from the address as written (unmasked, as
    /// upstream does). Anything but an IPv6 /48 is refused.
    pub fn from_locator(locator: &str) -> Result<Self, UsidError> {
        let bad = || UsidError::Locator(locator.to_owned());
        let (addr, len) = locator.split_once('/').ok_or_else(bad)?;
        let addr: Ipv6Addr = addr.parse().map_err(|_| bad())?;
        if len != "48" {
            return Err(bad());
        }
        Ok(Self::of(addr))
    }

    /// The raw 48-bit value (the map keys' and `ifindex_vrf_table`'s `block`).
    pub fn value(self) -> u64 {
        self.0
    }

    /// A Block from its 48-bit value (higher bits are cut).
    pub fn from_value(value: u64) -> Self {
        Self(value & 0xFFFF_FFFF_FFFF)
    }
}

/// A Node-ID in 1..=0xDFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(u16);

impl NodeId {
    /// Validates `id` (the CRD's int32 `nodeID`; no wrapping: 0x10001 is refused).
    pub fn new(id: i64) -> Result<Self, UsidError> {
        u16::try_from(id)
            .ok()
            .filter(|n| (1..=NODE_ID_MAX).contains(n))
            .map(Self)
            .ok_or(UsidError::NodeId(id))
    }

    /// The value.
    pub fn get(self) -> u16 {
        self.0
    }
}

/// An Argument (VRF id) in 1..=0xFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Argument(u16);

impl Argument {
    /// Validates `arg`.
    pub fn new(arg: i64) -> Result<Self, UsidError> {
        u16::try_from(arg)
            .ok()
            .filter(|n| (1..=ARGUMENT_MAX).contains(n))
            .map(Self)
            .ok_or(UsidError::Argument(arg))
    }

    /// The value.
    pub fn get(self) -> u16 {
        self.0
    }
}

/// A decoded uSID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Usid {
    /// Block.
    pub block: Block,
    /// Node-ID.
    pub node: NodeId,
    /// Function nibble ([`FUNCTION_END_DT46`] or [`FUNCTION_END_DT2`]).
    pub function: u8,
    /// Argument.
    pub argument: Argument,
}

impl Usid {
    /// The End.DT46 uSID of VRF `argument` on node `node` of `block`.
    pub fn end_dt46(block: Block, node: NodeId, argument: Argument) -> Self {
        Self {
            block,
            node,
            function: FUNCTION_END_DT46,
            argument,
        }
    }

    /// The End.DT46 uSID from the router's settings, validating every range.
    pub fn compute(locator: &str, node_id: i64, vrf_id: i64) -> Result<Self, UsidError> {
        Ok(Self::end_dt46(
            Block::from_locator(locator)?,
            NodeId::new(node_id)?,
            Argument::new(vrf_id)?,
        ))
    }

    /// The 128-bit address.
    pub fn to_addr(self) -> Ipv6Addr {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&self.block.0.to_be_bytes()[2..]);
        b[6..8].copy_from_slice(&self.node.0.to_be_bytes());
        let [arg_hi, arg_lo] = self.argument.0.to_be_bytes();
        b[8] = (self.function << 4) | (arg_hi & 0x0F);
        b[9] = arg_lo;
        Ipv6Addr::from(b)
    }

    /// The node's SID base (`node_src_addr_table[0]`): this uSID with Argument 0. Upstream's
    /// newest datapath completes it with each packet's Argument and stamps it as the outer
    /// source, so a shard's reply comes back to a SID the node decapsulates.
    pub fn node_sid_base(self) -> Ipv6Addr {
        let mut b = self.to_addr().octets();
        b[8] &= 0xF0;
        b[9] = 0;
        Ipv6Addr::from(b)
    }

    /// Decodes an address, validating the ranges, the function and the zero tail.
    pub fn parse(addr: Ipv6Addr) -> Result<Self, UsidError> {
        let b = addr.octets();
        if b[10..].iter().any(|x| *x != 0) {
            return Err(UsidError::Tail(addr));
        }
        let function = b[8] >> 4;
        if function != FUNCTION_END_DT46 && function != FUNCTION_END_DT2 {
            return Err(UsidError::Function(function));
        }
        Ok(Self {
            block: Block::of(addr),
            node: NodeId::new(i64::from(u16::from_be_bytes([b[6], b[7]])))?,
            function,
            argument: Argument::new(i64::from(u16::from_be_bytes([b[8] & 0x0F, b[9]])))?,
        })
    }

    /// `locator_table` key: `Block << 16 | NodeID`.
    pub fn locator_key(self) -> u64 {
        (self.block.0 << 16) | u64::from(self.node.0)
    }

    /// `function_table` key: `Block << 4 | Function`.
    pub fn function_key(self) -> u64 {
        (self.block.0 << 4) | u64::from(self.function)
    }

    /// `vrf_table` key: `Block << 12 | Argument`.
    pub fn vrf_key(self) -> u64 {
        vrf_key(self.block.0, self.argument.0)
    }
}

/// `sid` with its Argument (the low nibble of byte 8 and byte 9) replaced by `argument`: an
/// egress shard SID addressed to one tenant VRF of this node. Block, Node-ID and Function stay as
/// the operator configured them (a shard's function is its own), and whatever Argument was
/// configured is overwritten: one configured value is shared by every VRF, so it names no
/// tenant. Refused when bytes 10-15 are not zero: such an address is not a uSID, and writing an
/// Argument into it would address nothing.
pub fn with_argument(sid: Ipv6Addr, argument: Argument) -> Result<Ipv6Addr, UsidError> {
    let mut b = sid.octets();
    if b[10..].iter().any(|x| *x != 0) {
        return Err(UsidError::Tail(sid));
    }
    let [arg_hi, arg_lo] = argument.0.to_be_bytes();
    b[8] = (b[8] & 0xF0) | (arg_hi & 0x0F);
    b[9] = arg_lo;
    Ok(Ipv6Addr::from(b))
}

/// `vrf_table` key of a recorded (Block, Argument): `Block << 12 | Argument`.
pub fn vrf_key(block: u64, argument: u16) -> u64 {
    (block << 12) | u64::from(argument)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_egress_sid_gets_the_tenant_argument_and_keeps_the_rest() {
        let arg = |a| Argument::new(a).unwrap();
        let sid = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(
            with_argument(sid("2001:db8:ff01:9:e000::"), arg(0x2a)),
            Ok(sid("2001:db8:ff01:9:e02a::"))
        );
        // A configured Argument is overwritten; a function other than End.DT46 is kept.
        assert_eq!(
            with_argument(sid("2001:db8:ff01:9:7fff::"), arg(0xabc)),
            Ok(sid("2001:db8:ff01:9:7abc::"))
        );
        assert_eq!(
            with_argument(sid("2001:db8:5::1"), arg(1)),
            Err(UsidError::Tail(sid("2001:db8:5::1")))
        );
    }

    #[test]
    fn compute_table() {
        let cases: &[(&str, i64, i64, &str)] = &[
            ("2001:db8:ff03::/48", 1, 1, "2001:db8:ff03:1:e001::"),
            (
                "2001:db8:ff03::/48",
                0xDFFF,
                0xFFF,
                "2001:db8:ff03:dfff:efff::",
            ),
            (
                "2001:db8:ff03::/48",
                0x1234,
                0x567,
                "2001:db8:ff03:1234:e567::",
            ),
            // The Block comes from the address as written, not masked.
            (
                "2001:db8:ff03:9999::/48",
                2,
                0x100,
                "2001:db8:ff03:2:e100::",
            ),
            ("fc00::/48", 1, 0xABC, "fc00:0:0:1:eabc::"),
        ];
        for (locator, node, vrf, want) in cases {
            let sid = Usid::compute(locator, *node, *vrf).unwrap();
            assert_eq!(sid.to_addr().to_string(), *want, "{locator} {node} {vrf}");
            assert_eq!(
                Usid::parse(sid.to_addr()).unwrap(),
                sid,
                "round trip {want}"
            );
        }
    }

    #[test]
    fn ranges_are_refused_without_wrapping() {
        let cases: &[(&str, i64, i64, UsidError)] = &[
            (
                "2001:db8::/64",
                1,
                1,
                UsidError::Locator("2001:db8::/64".into()),
            ),
            (
                "10.0.0.0/48",
                1,
                1,
                UsidError::Locator("10.0.0.0/48".into()),
            ),
            ("2001:db8::", 1, 1, UsidError::Locator("2001:db8::".into())),
            ("2001:db8:ff03::/48", 0, 1, UsidError::NodeId(0)),
            ("2001:db8:ff03::/48", 0xE000, 1, UsidError::NodeId(0xE000)),
            ("2001:db8:ff03::/48", 0x10001, 1, UsidError::NodeId(0x10001)),
            ("2001:db8:ff03::/48", -1, 1, UsidError::NodeId(-1)),
            ("2001:db8:ff03::/48", 1, 0, UsidError::Argument(0)),
            ("2001:db8:ff03::/48", 1, 0x1000, UsidError::Argument(0x1000)),
            (
                "2001:db8:ff03::/48",
                1,
                0x10001,
                UsidError::Argument(0x10001),
            ),
        ];
        for (locator, node, vrf, want) in cases {
            assert_eq!(Usid::compute(locator, *node, *vrf).unwrap_err(), *want);
        }
    }

    #[test]
    fn parse_refuses_non_usids() {
        let cases: &[(&str, UsidError)] = &[
            (
                "2001:db8:ff03:1:e001::1",
                UsidError::Tail("2001:db8:ff03:1:e001::1".parse().unwrap()),
            ),
            ("2001:db8:ff03:1:a001::", UsidError::Function(0xA)),
            ("2001:db8:ff03:0:e001::", UsidError::NodeId(0)),
            ("2001:db8:ff03:1:e000::", UsidError::Argument(0)),
        ];
        for (addr, want) in cases {
            assert_eq!(
                Usid::parse(addr.parse().unwrap()).unwrap_err(),
                *want,
                "{addr}"
            );
        }
    }

    #[test]
    fn keys_compose_block_with_each_part_independently() {
        let sid = Usid::compute("2001:db8:ff03::/48", 1, 1).unwrap();
        assert_eq!(sid.block.value(), 0x2001_0db8_ff03);
        assert_eq!(sid.locator_key(), 0x2001_0db8_ff03_0001);
        // The locator key is the SID's top 64 bits read big-endian.
        let top: [u8; 8] = sid.to_addr().octets()[..8].try_into().unwrap();
        assert_eq!(sid.locator_key(), u64::from_be_bytes(top));
        assert_eq!(sid.function_key(), (0x2001_0db8_ff03 << 4) | 0xE);
        assert_eq!(sid.vrf_key(), (0x2001_0db8_ff03 << 12) | 0x001);
        let other = Usid::compute("2001:db8:ff03::/48", 2, 0xFFF).unwrap();
        assert_ne!(other.locator_key(), sid.locator_key());
        assert_eq!(other.function_key(), sid.function_key());
        assert_eq!(other.vrf_key(), (0x2001_0db8_ff03 << 12) | 0xFFF);
    }
}
