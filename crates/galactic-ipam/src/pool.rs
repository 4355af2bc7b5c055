//! Pool arithmetic, one code path for both families.
//!
//! A pool is a CIDR cut into aligned, non-overlapping *slots* of `slot_len` bits (IPv6: the
//! configured `subnet_len`, default /96; IPv4: always /32). Slot `i` covers
//! `[network + i·2^(bits−slot_len), network + (i+1)·2^(bits−slot_len) − 1]`. Addresses are handled
//! as `u128` values tagged with their family, so IPv4 is the same arithmetic with `bits = 32`.
//!
//! Reserved slots, never handed out:
//! - the slot holding the gateway (for IPv6 pools the gateway's whole /subnet_len, so no endpoint
//!   prefix ever contains the gateway);
//! - when a slot is a single address and the pool holds more than two addresses, the pool's first
//!   and last address: for IPv4 the network and broadcast addresses, for IPv6 the subnet-router
//!   anycast address (RFC 4291 §2.6.1) and the top of the reserved anycast range (RFC 2526).
//!   Two-address pools (/31, /127) are point-to-point links without either (RFC 3021, RFC 6164).
//!
//! The endpoint's address is a host address inside its slot: the slot's first address plus one
//! when the slot holds more than one address (the all-zeros address of a prefix is its
//! subnet-router anycast address), the slot itself otherwise.

use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

#[cfg(test)]
mod tests;

/// The numeric value of `ip`.
pub fn value_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// An inclusive address range of one family (a slot, a lease, a legacy address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// The family.
    pub family: Family,
    /// First address value.
    pub first: u128,
    /// Last address value (inclusive).
    pub last: u128,
}

impl Span {
    /// The single address `ip`.
    pub fn single(ip: IpAddr) -> Self {
        let value = value_of(ip);
        Self {
            family: Family::of(ip),
            first: value,
            last: value,
        }
    }

    /// Whether `self` and `other` share an address.
    pub fn overlaps(&self, other: &Span) -> bool {
        self.family == other.family && self.first <= other.last && other.first <= self.last
    }
}

/// `10.0.0.4` for a single address, `10.0.0.4-10.0.0.7` for a range.
impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let first = self.family.addr(self.first);
        match self.first == self.last {
            true => write!(f, "{first}"),
            false => write!(f, "{first}-{}", self.family.addr(self.last)),
        }
    }
}

/// Why a pool cannot be built. The config layer adds the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The slot length is shorter than the pool prefix or longer than the family allows.
    #[error("endpoint prefix length /{slot_len} must be at least the pool's prefix length /{prefix} and at most /{max}")]
    SlotLength {
        /// Pool prefix length.
        prefix: u8,
        /// Requested slot length.
        slot_len: u8,
        /// The family's width.
        max: u8,
    },
    /// More slots than the store can index (a /0 cut into single addresses).
    #[error("holds 2^{0} endpoint prefixes; at most 2^127 are supported")]
    TooLarge(u8),
    /// The gateway is of the other family.
    #[error("gateway {0} is not of the pool's address family")]
    GatewayFamily(IpAddr),
    /// The gateway lies outside the pool.
    #[error("gateway {0} is not inside the pool")]
    GatewayOutside(IpAddr),
    /// The gateway is the pool's network or broadcast-equivalent address.
    #[error("gateway {0} is the pool's first or last address, which are reserved")]
    GatewayReserved(IpAddr),
    /// Nothing is left once reserved slots are taken out.
    #[error("leaves no allocatable /{0} once the gateway's prefix and the reserved addresses are taken out")]
    NoCapacity(u8),
}

/// Why a requested address cannot be an endpoint of a pool (the caller names the address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The address is not inside the pool.
    #[error("is outside the pool {pool}")]
    Outside {
        /// The pool CIDR.
        pool: IpNetwork,
    },
    /// The address is the pool's gateway.
    #[error("is the gateway of the pool {pool}")]
    Gateway {
        /// The pool CIDR.
        pool: IpNetwork,
    },
    /// The address lies in the endpoint prefix that holds the gateway (never handed out).
    #[error("lies in {slot}, the prefix of the pool {pool} that holds its gateway {gateway}")]
    GatewayPrefix {
        /// The pool CIDR.
        pool: IpNetwork,
        /// The reserved prefix.
        slot: IpNetwork,
        /// The gateway.
        gateway: IpAddr,
    },
    /// The pool's first or last address (network/broadcast, IPv6 anycast).
    #[error("is the first or last address of the pool {pool}, which are reserved")]
    Edge {
        /// The pool CIDR.
        pool: IpNetwork,
    },
    /// The all-zeros address of a multi-address endpoint prefix (its subnet-router anycast).
    #[error(
        "is the subnet-router anycast address of its prefix {slot}; use a host address inside it"
    )]
    SlotAnycast {
        /// The prefix.
        slot: IpNetwork,
    },
}

/// A validated pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    network: IpNetwork,
    slot_len: u8,
    gateway: IpAddr,
}

impl Pool {
    /// Builds a pool from a CIDR (host bits are masked off), the endpoint prefix length and an
    /// optional gateway (default: the pool's first address plus one).
    pub fn new(cidr: IpNetwork, slot_len: u8, gateway: Option<IpAddr>) -> Result<Self, PoolError> {
        let family = Family::of(cidr.ip());
        let prefix = cidr.prefix();
        if slot_len < prefix || slot_len > family.bits() {
            return Err(PoolError::SlotLength {
                prefix,
                slot_len,
                max: family.bits(),
            });
        }
        if slot_len - prefix >= 128 {
            return Err(PoolError::TooLarge(slot_len - prefix));
        }
        if slot_len == prefix {
            // One slot, and it holds the gateway (wherever the gateway is configured inside it).
            return Err(PoolError::NoCapacity(slot_len));
        }
        let network = IpNetwork::new(cidr.network(), prefix).unwrap_or(cidr);
        let first = value_of(network.ip());
        let gateway = gateway.unwrap_or_else(|| family.addr(first.wrapping_add(1)));
        let pool = Self {
            network,
            slot_len,
            gateway,
        };
        pool.validate_gateway()?;
        if pool.capacity() == 0 {
            return Err(PoolError::NoCapacity(slot_len));
        }
        Ok(pool)
    }

    fn validate_gateway(&self) -> Result<(), PoolError> {
        let gw = self.gateway;
        if Family::of(gw) != self.family() {
            return Err(PoolError::GatewayFamily(gw));
        }
        let value = value_of(gw);
        let span = self.span();
        if value < span.first || value > span.last {
            return Err(PoolError::GatewayOutside(gw));
        }
        if self.has_edge_reservations() && (value == span.first || value == span.last) {
            return Err(PoolError::GatewayReserved(gw));
        }
        Ok(())
    }

    /// The pool's family.
    pub fn family(&self) -> Family {
        Family::of(self.network.ip())
    }

    /// The pool CIDR (masked).
    pub fn network(&self) -> IpNetwork {
        self.network
    }

    /// The endpoint prefix length.
    pub fn slot_len(&self) -> u8 {
        self.slot_len
    }

    /// The gateway handed out with every endpoint of this pool.
    pub fn gateway(&self) -> IpAddr {
        self.gateway
    }

    /// The store's identity for this pool's cursor and release queue: CIDR and slot length.
    /// Two networks configuring the same pool share it (and so never hand out one address twice).
    pub fn key(&self) -> String {
        format!("{}@{}", self.network, self.slot_len)
    }

    /// The CIDR of a pool [`key`](Self::key) (what a lease records of its pool).
    pub fn network_of_key(key: &str) -> Option<IpNetwork> {
        key.split_once('@')?.0.parse().ok()
    }

    /// All addresses of the pool.
    pub fn span(&self) -> Span {
        let first = value_of(self.network.ip());
        let host_bits = u32::from(self.family().bits() - self.network.prefix());
        Span {
            family: self.family(),
            first,
            last: first + low_mask(host_bits),
        }
    }

    fn slot_host_bits(&self) -> u32 {
        u32::from(self.family().bits() - self.slot_len)
    }

    /// Number of slots (reserved ones included).
    pub fn slot_count(&self) -> u128 {
        1u128 << (self.slot_len - self.network.prefix())
    }

    /// The addresses of slot `index` (which must be `< slot_count()`).
    pub fn slot(&self, index: u128) -> Span {
        let bits = self.slot_host_bits();
        let first = self.span().first + (index << bits);
        Span {
            family: self.family(),
            first,
            last: first + low_mask(bits),
        }
    }

    /// The slot holding `ip`, if it is inside the pool.
    pub fn index_of(&self, ip: IpAddr) -> Option<u128> {
        let span = self.span();
        let value = value_of(ip);
        (Family::of(ip) == self.family() && value >= span.first && value <= span.last)
            .then(|| (value - span.first) >> self.slot_host_bits())
    }

    fn has_edge_reservations(&self) -> bool {
        self.slot_host_bits() == 0 && self.network.prefix() + 1 < self.family().bits()
    }

    /// Whether slot `index` is never handed out (see the module docs).
    pub fn is_reserved(&self, index: u128) -> bool {
        if Some(index) == self.index_of(self.gateway) {
            return true;
        }
        self.has_edge_reservations() && (index == 0 || index == self.slot_count() - 1)
    }

    /// How many slots can be handed out.
    pub fn capacity(&self) -> u128 {
        let count = self.slot_count();
        let mut reserved = vec![self.index_of(self.gateway)];
        if self.has_edge_reservations() {
            reserved.extend([Some(0), Some(count - 1)]);
        }
        let mut reserved: Vec<u128> = reserved.into_iter().flatten().collect();
        reserved.sort_unstable();
        reserved.dedup();
        count - reserved.len() as u128
    }

    /// The slot a runtime-requested endpoint address `ip` occupies, or why it cannot be handed
    /// out. Any host address of an allocatable slot can be requested; it keeps the slot's prefix
    /// length ([`Pool::requested_endpoint`]).
    pub fn requested_slot(&self, ip: IpAddr) -> Result<u128, Refusal> {
        let pool = self.network;
        let index = self.index_of(ip).ok_or(Refusal::Outside { pool })?;
        if ip == self.gateway {
            return Err(Refusal::Gateway { pool });
        }
        if self.is_reserved(index) {
            return Err(match self.index_of(self.gateway) {
                Some(g) if g == index => Refusal::GatewayPrefix {
                    pool,
                    slot: self.slot_network(index),
                    gateway: self.gateway,
                },
                _ => Refusal::Edge { pool },
            });
        }
        let slot = self.slot(index);
        if slot.first != slot.last && value_of(ip) == slot.first {
            return Err(Refusal::SlotAnycast {
                slot: self.slot_network(index),
            });
        }
        Ok(index)
    }

    /// The endpoint handed out for a requested address: the address with its slot's prefix.
    pub fn requested_endpoint(&self, ip: IpAddr) -> IpNetwork {
        IpNetwork::new(ip, self.slot_len).unwrap_or(self.network)
    }

    /// Slot `index` as a prefix.
    fn slot_network(&self, index: u128) -> IpNetwork {
        let first = self.family().addr(self.slot(index).first);
        IpNetwork::new(first, self.slot_len).unwrap_or(self.network)
    }

    /// The endpoint address inside slot `index`, with the slot's prefix length.
    pub fn endpoint(&self, index: u128) -> IpNetwork {
        let slot = self.slot(index);
        let host = if slot.first == slot.last {
            slot.first
        } else {
            slot.first + 1
        };
        let ip = self.family().addr(host);
        // slot_len is at most the family's width (checked in `new`).
        IpNetwork::new(ip, self.slot_len).unwrap_or(self.network)
    }
}

/// A value with the low `bits` bits set.
fn low_mask(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}
