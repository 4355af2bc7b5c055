//! VPC and attachment identifiers and every name derived from them, and the range of a router's
//! uSID Node-ID ([`NODE_ID_MAX`]).
//!
//! Compatible with the upstream Go implementation, so that names on a node and in the cluster stay
//! the same after a switch: base62 digits `0-9a-zA-Z` (most significant first), interface names
//! `G{vpc:9}{att:3}H|G` and `G{vpc:9}V` (left-padded with `0`), CRD names from the lowercase hex
//! value. Route targets keep the Go chain's `ASN:VPC` wherever the Galactic API accepts it and
//! have an IPv4-specific form elsewhere ([`route_target`], decision 0015).
//!
//! Unlike upstream, ids are range-checked when parsed (VPC ≤ 48 bits, attachment ≤ 16 bits), so an
//! over-long id is a config error (code 7) instead of a netlink failure half-way through an ADD.
//! Names are built from the canonical digits (no leading zeros), which equals upstream's padding
//! of the raw string whenever upstream could build the name at all.

use sha2::{Digest, Sha256};
use std::fmt;
use std::marker::PhantomData;

const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Why an identifier was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    /// The field is absent or empty.
    #[error("{field} is required and must be a non-empty base62 string")]
    Empty {
        /// The config field.
        field: &'static str,
    },
    /// A character outside `0-9a-zA-Z`.
    #[error("invalid base62 value for field '{field}': {value:?}")]
    NotBase62 {
        /// The config field.
        field: &'static str,
        /// The value, made printable.
        value: String,
    },
    /// The value does not fit the identifier's width.
    #[error("{field} {value:?} is out of range: a {field} is a {bits}-bit value (at most {max} in base62)")]
    TooLarge {
        /// The config field.
        field: &'static str,
        /// The value.
        value: String,
        /// The identifier's width.
        bits: u32,
        /// The largest value, in base62.
        max: String,
    },
}

/// The value of one base62 digit.
fn digit(c: u8) -> Option<u64> {
    match c {
        b'0'..=b'9' => Some(u64::from(c - b'0')),
        b'a'..=b'z' => Some(u64::from(c - b'a') + 10),
        b'A'..=b'Z' => Some(u64::from(c - b'A') + 36),
        _ => None,
    }
}

/// Encodes `value` in base62 without leading zeros (`0` is `"0"`).
pub fn base62_encode(mut value: u64) -> String {
    let mut out = Vec::new();
    loop {
        // `value % 62` is below 62, so the index is in range.
        out.push(ALPHABET[(value % 62) as usize]);
        value /= 62;
        if value == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes base62 of any length to lowercase hex without leading zeros (upstream's
/// `Base62ToHex`, arbitrary precision). `None` for an empty or non-base62 input.
pub fn base62_to_hex(raw: &str) -> Option<String> {
    if raw.is_empty() {
        return None;
    }
    // Little-endian base-256 accumulator: value = value * 62 + digit.
    let mut bytes: Vec<u8> = Vec::new();
    for c in raw.bytes() {
        let mut carry = digit(c)?;
        for b in bytes.iter_mut() {
            let v = u64::from(*b) * 62 + carry;
            *b = (v & 0xff) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            bytes.push((carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    let hex: String = bytes.iter().rev().map(|b| format!("{b:02x}")).collect();
    let trimmed = hex.trim_start_matches('0');
    Some(if trimmed.is_empty() {
        "0".into()
    } else {
        trimmed.into()
    })
}

/// Converts hex (any case) to base62 (upstream's `HexToBase62`), for values up to 64 bits.
pub fn hex_to_base62(hex: &str) -> Option<String> {
    u64::from_str_radix(&hex.to_ascii_lowercase(), 16)
        .ok()
        .map(base62_encode)
}

/// What distinguishes one identifier kind from another.
pub trait IdKind {
    /// The config field name used in messages.
    const FIELD: &'static str;
    /// Width of the value.
    const BITS: u32;
    /// Digits in interface names.
    const WIDTH: usize;
}

/// Marker for VPC ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vpc;
impl IdKind for Vpc {
    const FIELD: &'static str = "vpc";
    const BITS: u32 = 48;
    const WIDTH: usize = 9;
}

/// Marker for VPC attachment ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Att;
impl IdKind for Att {
    const FIELD: &'static str = "vpcattachment";
    const BITS: u32 = 16;
    const WIDTH: usize = 3;
}

/// A validated base62 identifier: the raw text as configured and its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id<K> {
    raw: String,
    value: u64,
    kind: PhantomData<K>,
}

/// A VPC id (48 bits).
pub type VpcId = Id<Vpc>;
/// A VPC attachment id (16 bits).
pub type AttachmentId = Id<Att>;

impl<K: IdKind> Id<K> {
    /// Parses and range-checks `raw`.
    pub fn parse(raw: &str) -> Result<Self, IdentError> {
        if raw.is_empty() {
            return Err(IdentError::Empty { field: K::FIELD });
        }
        let max = (1u64 << K::BITS) - 1;
        let mut value: u64 = 0;
        for c in raw.bytes() {
            let d = digit(c).ok_or_else(|| IdentError::NotBase62 {
                field: K::FIELD,
                value: printable(raw),
            })?;
            value = value
                .checked_mul(62)
                .and_then(|v| v.checked_add(d))
                .filter(|v| *v <= max)
                .ok_or_else(|| IdentError::TooLarge {
                    field: K::FIELD,
                    value: raw.to_owned(),
                    bits: K::BITS,
                    max: base62_encode(max),
                })?;
        }
        Ok(Self {
            raw: raw.to_owned(),
            value,
            kind: PhantomData,
        })
    }

    /// The text as configured (used verbatim in tenant identifiers).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The numeric value.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// Lowercase hex without leading zeros.
    pub fn hex(&self) -> String {
        format!("{:x}", self.value)
    }

    /// Canonical base62, left-padded with `0` to the name width.
    pub fn padded(&self) -> String {
        format!("{:0>width$}", base62_encode(self.value), width = K::WIDTH)
    }
}

impl<K: IdKind> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// Replaces a value containing anything outside printable ASCII, as upstream does in messages.
fn printable(raw: &str) -> String {
    if raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        raw.to_owned()
    } else {
        "<binary>".to_owned()
    }
}

/// The `vpc` and `vpcattachment` of a stanza, read the same way by every plugin of the chain: a
/// missing, empty or non-string id is "required", anything else is range-checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(try_from = "WrittenIds")]
pub struct ChainIds {
    /// The VPC.
    pub vpc: VpcId,
    /// The VPC attachment.
    pub att: AttachmentId,
}

/// The ids as written; a value that is not a string counts as absent.
#[derive(Default, serde::Deserialize)]
struct WrittenIds {
    #[serde(default, deserialize_with = "text_or_empty")]
    vpc: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    vpcattachment: String,
}

fn text_or_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::Deserialize;
    let value = serde_json::Value::deserialize(d)?;
    Ok(value.as_str().unwrap_or_default().to_owned())
}

impl TryFrom<WrittenIds> for ChainIds {
    type Error = IdentError;
    fn try_from(written: WrittenIds) -> Result<Self, IdentError> {
        Ok(Self {
            vpc: VpcId::parse(&written.vpc)?,
            att: AttachmentId::parse(&written.vpcattachment)?,
        })
    }
}

impl ChainIds {
    /// The ids of a stanza (the whole stdin object).
    pub fn of(stanza: &serde_json::Value) -> Result<Self, IdentError> {
        use serde::Deserialize;
        Self::try_from(WrittenIds::deserialize(stanza).unwrap_or_default())
    }

    /// Whether `other` names the same VPC and attachment (by value: `00A` and `A` are one id).
    pub fn same_as(&self, other: &ChainIds) -> bool {
        self.vpc.value() == other.vpc.value() && self.att.value() == other.att.value()
    }

    /// The host interface `G{vpc:9}{att:3}H`.
    pub fn host_ifname(&self) -> String {
        host_ifname(&self.vpc, &self.att)
    }
}

/// The VPC's VRF device: `G{vpc:9}V`.
pub fn vrf_name(vpc: &VpcId) -> String {
    format!("G{}V", vpc.padded())
}

/// The attachment's host-side interface (veth host end or tap): `G{vpc:9}{att:3}H`.
pub fn host_ifname(vpc: &VpcId, att: &AttachmentId) -> String {
    format!("G{}{}H", vpc.padded(), att.padded())
}

/// The attachment's guest veth end before it is named `CNI_IFNAME`: `G{vpc:9}{att:3}G`.
pub fn guest_ifname(vpc: &VpcId, att: &AttachmentId) -> String {
    format!("G{}{}G", vpc.padded(), att.padded())
}

/// A CRD name segment for an id: its lowercase hex, or `x` + 12 hex chars of SHA-256 when the
/// id is not base62 (keeps names RFC 1123 valid; `A` and `a` are different values).
pub fn name_segment(raw: &str) -> String {
    base62_to_hex(raw).unwrap_or_else(|| {
        let digest = Sha256::digest(raw.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("x{}", &hex[..12])
    })
}

/// The longest Kubernetes object name (an RFC 1123 subdomain).
pub const OBJECT_NAME_MAX: usize = 253;

/// Hex characters of the node name's SHA-256 in a capped node segment.
const NODE_HASH_LEN: usize = 12;

/// Why a node name cannot be part of an object name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node name '{name}' cannot be part of a Kubernetes object name: {reason}; set node_name in the node config (or NODE_NAME) to this node's Kubernetes Node name")]
pub struct NodeNameInvalid {
    /// The name, made printable.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Checks that `node` is an RFC 1123 subdomain, as every Kubernetes Node name is: the node
/// segment of the CRD names is the name itself, so anything else would be refused by the API
/// server (or, locally, name a document the cluster could never hold). Nothing is rewritten:
/// a silently altered name would no longer match the names the Go chain builds.
pub fn check_node_name(node: &str) -> Result<(), NodeNameInvalid> {
    let refuse = |reason| {
        Err(NodeNameInvalid {
            name: node.escape_default().to_string(),
            reason,
        })
    };
    if node.is_empty() || node.len() > OBJECT_NAME_MAX {
        return refuse("it must have 1 to 253 characters");
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if !node.chars().all(allowed) {
        return refuse("only lowercase letters, digits, '-' and '.' are allowed");
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let labels_ok = node
        .split('.')
        .all(|l| alnum(l.chars().next()) && alnum(l.chars().last()));
    if !labels_ok {
        return refuse("each dot-separated part must start and end with a letter or digit");
    }
    Ok(())
}

/// `{prefix}-{node}`, or when that exceeds [`OBJECT_NAME_MAX`], `{prefix}-{head}-{hash}`: `head`
/// the longest start of the node name that fits (without trailing `-`/`.`), `hash` the first 12
/// hex characters of the node name's SHA-256, so two long names sharing a start stay apart and
/// every writer derives the same name. Names that fit are exactly upstream's.
fn node_scoped(prefix: &str, node: &str) -> String {
    let whole = format!("{prefix}-{node}");
    if whole.len() <= OBJECT_NAME_MAX {
        return whole;
    }
    let digest = Sha256::digest(node.as_bytes());
    let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let room = OBJECT_NAME_MAX.saturating_sub(prefix.len() + NODE_HASH_LEN + 2);
    let head: String = node.chars().take(room).collect();
    let head = head.trim_end_matches(['-', '.']);
    format!("{prefix}-{head}-{}", &hash[..NODE_HASH_LEN])
}

/// `BGPVRFInstance` name, one per (VPC, node): `{hexvpc}-{node}` (capped: [`node_scoped`]).
pub fn bgp_vrf_instance_name(vpc_raw: &str, node: &str) -> String {
    node_scoped(&name_segment(vpc_raw), node)
}

/// `BGPAdvertisement` name, one per (VPC, attachment, node): `{hexvpc}-{hexatt}-{node}` (capped:
/// [`node_scoped`]). Per node because an attachment spans nodes: one shared object is rewritten
/// by every node in turn, and only the last writer's router and prefixes are advertised.
pub fn bgp_advertisement_name(vpc_raw: &str, att_raw: &str, node: &str) -> String {
    per_node_advertisement_name(&legacy_advertisement_name(vpc_raw, att_raw), node)
}

/// The per-node name of the advertisement an older chain named `legacy` (`{hexvpc}-{hexatt}`).
pub fn per_node_advertisement_name(legacy: &str, node: &str) -> String {
    node_scoped(legacy, node)
}

/// Whether `name` has the two-segment form of [`legacy_advertisement_name`]: the hex segments
/// hold no `-`, so per-node names (three or more segments) never have it.
pub fn is_legacy_advertisement_name(name: &str) -> bool {
    name.split('-').count() == 2
}

/// The name older chains (the Go chain before per-node names, and ours before decision 0018)
/// gave an attachment's one shared `BGPAdvertisement`: `{hexvpc}-{hexatt}`.
pub fn legacy_advertisement_name(vpc_raw: &str, att_raw: &str) -> String {
    format!("{}-{}", name_segment(vpc_raw), name_segment(att_raw))
}

/// The tenant identifier label value: the raw ids joined by `-`.
pub fn tenant_identifier(vpc: &VpcId, att: &AttachmentId) -> String {
    format!("{}-{}", vpc.raw(), att.raw())
}

/// The highest uSID Node-ID, the bound of a BGPRouter's `nodeID` (1..=0xDFFF = 57343): uFMT
/// reserves 0x0000 and 0xE000..=0xFFFF (Function space). One constant for the CRD schema
/// (`galactic_kube`'s BGPRouter) and the uSID codec (`bpf::usid`, which re-exports it), so the
/// API server and the datapath agree on which routers have a uSID.
pub const NODE_ID_MAX: u16 = 0xDFFF;

mod route_target;

pub use route_target::{route_target, speaking_asn};

#[cfg(test)]
mod tests;
