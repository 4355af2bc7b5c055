//! IP families and assigned addresses: one family type and one address+gateway type for every
//! plugin, so IPv4 and IPv6 go through the same code path.

use ipnetwork::IpNetwork;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family. IPv6 sorts first: results, pools and messages list it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv6.
    V6,
    /// IPv4.
    V4,
}

impl Family {
    /// Both families, IPv6 first.
    pub const ALL: [Family; 2] = [Family::V6, Family::V4];

    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// The family of a network.
    pub fn of_net(net: IpNetwork) -> Self {
        Self::of(net.ip())
    }

    /// Address width in bits.
    pub fn bits(self) -> u8 {
        match self {
            Self::V4 => 32,
            Self::V6 => 128,
        }
    }

    /// The lower-case name used in configs and paths (`ipv6`, `ipv4`).
    pub fn name(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }

    /// The name used in messages (`IPv6`, `IPv4`).
    pub fn label(self) -> &'static str {
        match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        }
    }

    /// The unspecified address (`::`, `0.0.0.0`).
    pub fn unspecified(self) -> IpAddr {
        match self {
            Self::V4 => Ipv4Addr::UNSPECIFIED.into(),
            Self::V6 => Ipv6Addr::UNSPECIFIED.into(),
        }
    }

    /// The default route's destination (`::/0`, `0.0.0.0/0`).
    pub fn default_route(self) -> IpNetwork {
        // A /0 is valid for either family, so the fallback (a host route) is never taken.
        IpNetwork::new(self.unspecified(), 0).unwrap_or_else(|_| self.unspecified().into())
    }

    /// The address with numeric value `value` (truncated to the family's width).
    pub fn addr(self, value: u128) -> IpAddr {
        match self {
            // Values of this family never exceed 32 bits; truncation is the documented contract.
            Self::V4 => IpAddr::V4(Ipv4Addr::from(value as u32)),
            Self::V6 => IpAddr::V6(Ipv6Addr::from(value)),
        }
    }
}

/// As people read it in messages: `IPv6`, `IPv4`.
impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One assigned address with its gateway: what IPAM hands out and what the masters configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Assignment {
    /// The address with its prefix length.
    pub address: IpNetwork,
    /// The gateway, if any.
    pub gateway: Option<IpAddr>,
}

impl Assignment {
    /// The address's family.
    pub fn family(&self) -> Family {
        Family::of_net(self.address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_share_one_vocabulary() {
        assert_eq!(Family::ALL, [Family::V6, Family::V4]);
        assert_eq!(Family::V6.default_route().to_string(), "::/0");
        assert_eq!(Family::V4.default_route().to_string(), "0.0.0.0/0");
        assert_eq!(Family::of("10.0.0.1".parse().unwrap()), Family::V4);
        assert_eq!(Family::V4.addr(0x0a00_0001).to_string(), "10.0.0.1");
        assert_eq!((Family::V6.bits(), Family::V4.bits()), (128, 32));
        assert_eq!((Family::V6.label(), Family::V4.name()), ("IPv6", "ipv4"));
        assert!(Family::V6 < Family::V4, "IPv6 sorts first");
    }
}
