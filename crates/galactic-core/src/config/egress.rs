//! The node's internet egress settings: which egress shards a VPC that opts in encapsulates
//! toward, and the fabric's NAT64 prefixes. Node keys only: a tenant chooses whether its
//! network has egress (galactic-bgp's stanza), never where it goes.
//!
//! `nat66_shard_sids` is the Go chain's name of `egress_shard_sids` (until its c4c2d06). It is
//! read for one upgrade window (it goes in the release after 0.2, see docs/operations.md); both
//! set to different lists is an error naming both, so a half-migrated node never picks one
//! silently.

use super::{values, ConfigError, Layers, Source};
use ipnetwork::Ipv6Network;
use std::net::Ipv6Addr;

/// The node key of the egress shard SIDs.
pub const SHARD_SIDS_KEY: &str = "egress_shard_sids";
/// Its old name, read during the upgrade window.
pub const SHARD_SIDS_ALIAS: &str = "nat66_shard_sids";
/// The node key of the NAT64 prefixes.
pub const NAT64_KEY: &str = "nat64_prefix";

/// What a VPC that opts in to internet egress gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressConfig {
    /// Egress shard SIDs in order of preference (`egress_shard_sids`, comma-separated uSIDs;
    /// their Argument is replaced by the tenant's VRF id). Empty: no shard configured.
    pub shard_sids: Vec<Ipv6Addr>,
    /// NAT64 prefixes (`nat64_prefix`, comma-separated IPv6 /96s), each routed toward the shard
    /// beside `::/0`. Empty: the fabric has no NAT64.
    pub nat64_prefixes: Vec<Ipv6Network>,
}

impl EgressConfig {
    pub(super) fn resolve<L: Fn(&str) -> Option<String>>(
        layers: &Layers<'_, L>,
    ) -> Result<Self, ConfigError> {
        const WHY: &str = "not an egress shard SID (an IPv6 unicast address)";
        let current = layers.list(SHARD_SIDS_KEY, WHY, values::shard_sid)?;
        let old = layers.list(SHARD_SIDS_ALIAS, WHY, values::shard_sid)?;
        let shard_sids = match (current.is_empty(), old.is_empty()) {
            (_, true) => current,
            (true, false) => old,
            (false, false) if current == old => current,
            (false, false) => {
                let origin = |key| layers.get(key).map(|(_, o)| o);
                let err = ConfigError::AliasConflict {
                    key: SHARD_SIDS_KEY,
                    alias: SHARD_SIDS_ALIAS,
                    key_origin: origin(SHARD_SIDS_KEY).unwrap_or(Source::Stanza),
                    alias_origin: origin(SHARD_SIDS_ALIAS).unwrap_or(Source::Stanza),
                };
                layers.refuse(err, Vec::new())?
            }
        };
        let nat64_prefixes = layers.list(
            NAT64_KEY,
            "not a NAT64 prefix (an IPv6 /96 network, e.g. 64:ff9b::/96)",
            nat64_prefix,
        )?;
        Ok(Self {
            shard_sids,
            nat64_prefixes,
        })
    }
}

/// An IPv6 /96 network with its host bits zero (where an IPv4 address is embedded).
fn nat64_prefix(raw: &str) -> Option<Ipv6Network> {
    let net = raw.parse::<Ipv6Network>().ok()?;
    (net.prefix() == 96 && net.network() == net.ip()).then_some(net)
}
