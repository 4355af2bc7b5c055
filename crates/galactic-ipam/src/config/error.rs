//! Why an `ipam` block is refused: one variant per rule, each naming the key and the value.

use crate::pool::PoolError;
use galactic_core::ip::Family;

/// A config that cannot be used; every variant is CNI code 7.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No `ipam` block.
    #[error("ipam block is required")]
    MissingBlock,
    /// `ipam` is not an object.
    #[error("ipam must be a JSON object")]
    NotAnObject,
    /// A field has the wrong JSON type.
    #[error("ipam.{field} must be {expected}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `addresses` with an allocating field.
    #[error("ipam.addresses cannot be combined with ipam.{0}: addresses assigns pre-decided addresses, the other fields allocate")]
    AddressesCombined(&'static str),
    /// A CIDR that does not parse (or lacks its prefix length).
    #[error("invalid CIDR value for field 'ipam.{field}': {value:?}{hint}")]
    InvalidCidr {
        /// The field.
        field: &'static str,
        /// The raw value.
        value: String,
        /// Extra guidance.
        hint: &'static str,
    },
    /// An IP that does not parse.
    #[error("invalid IP for field 'ipam.{field}': {value:?}")]
    InvalidIp {
        /// The field.
        field: &'static str,
        /// The raw value.
        value: String,
    },
    /// A value of the wrong family.
    #[error("ipam.{field} must be an {want} {what}, got {got}: {value:?}")]
    WrongFamily {
        /// The field.
        field: &'static str,
        /// Wanted family.
        want: Family,
        /// Actual family.
        got: Family,
        /// "CIDR" or "address".
        what: &'static str,
        /// The raw value.
        value: String,
    },
    /// A pool that cannot be used.
    #[error("ipam.{field} {value:?} {source}")]
    Pool {
        /// The pool field.
        field: &'static str,
        /// The raw value.
        value: String,
        /// Why.
        #[source]
        source: PoolError,
    },
    /// `subnet_len` out of range.
    #[error("ipam.subnet_len {0} must be between 1 and 128")]
    SubnetLen(u64),
    /// An `address_families` entry other than ipv6/ipv4.
    #[error("invalid ipam.address_families entry {0:?}: must be \"ipv6\" or \"ipv4\"")]
    FamilyName(String),
    /// `address_families` removed every configured pool.
    #[error("ipam.address_families [{0}] excludes every pool this config configures (ipam.ipv6_subnet/ipam.ipv4_subnet)")]
    FamiliesExcludeAll(String),
    /// Pool mode without any pool.
    #[error("ipam.ipv6_subnet or ipam.ipv4_subnet is required (or enable GALACTIC_IPAM_ENABLE_LOCAL_IPAM)")]
    NoPool,
    /// Two `addresses` entries of one family.
    #[error("ipam.addresses carries more than one {0} address")]
    DuplicateFamily(Family),
    /// An IPv4 `addresses` entry that is not a /32.
    #[error("ipam.addresses IPv4 entry {0:?} must be a /32: the data plane models an IPv4 endpoint as a host route")]
    Ipv4NotHost(String),
    /// `addresses` gateway of the other family.
    #[error("ipam.addresses gateway {gateway:?} is not the same address family as {address:?}")]
    GatewayFamily {
        /// The gateway.
        gateway: String,
        /// The address.
        address: String,
    },
    /// `addresses: []` or entries with nothing usable.
    #[error("ipam.addresses is present but empty")]
    EmptyAddresses,
}
