//! The chain's plugin names, in one place: the binaries this workspace builds, the upstream
//! type names kept as aliases, and what role each type plays in a chain.

/// The veth master (containers).
pub const VETH_MASTER: &str = "galactic-cni";
/// The tap master (VM workloads).
pub const TAP_MASTER: &str = "galactic-tap-cni";
/// The delegated IPAM plugin.
pub const IPAM: &str = "galactic-ipam";
/// The termination-route stage.
pub const ROUTE: &str = "galactic-route";
/// The BGP publication stage (also performs the masters' NAD calls).
pub const BGP: &str = "galactic-bgp";

/// Every plugin binary the workspace builds.
pub const BINARIES: [&str; 5] = [VETH_MASTER, TAP_MASTER, IPAM, ROUTE, BGP];

/// Upstream type names that existing NetworkAttachmentDefinitions use, and the master each one
/// is installed as: (alias, binary).
pub const ALIASES: [(&str, &str); 2] =
    [("galactic-veth", VETH_MASTER), ("galactic-tap", TAP_MASTER)];

/// What a plugin type is in a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A master: first in the chain, creates the attachment.
    Master,
    /// The IPAM delegate: never a chain entry, exec'd by a master.
    Ipam,
    /// The optional route stage.
    Route,
    /// The last stage.
    Bgp,
}

/// The role of a plugin `type` (ours or an upstream alias); `None` for anything else.
pub fn role(plugin_type: &str) -> Option<Role> {
    match plugin_type {
        VETH_MASTER | TAP_MASTER => Some(Role::Master),
        t if ALIASES.iter().any(|(alias, _)| *alias == t) => Some(Role::Master),
        IPAM => Some(Role::Ipam),
        ROUTE => Some(Role::Route),
        BGP => Some(Role::Bgp),
        _ => None,
    }
}

/// Whether `plugin_type` is one of the masters (or an upstream master alias).
pub fn is_master(plugin_type: &str) -> bool {
    role(plugin_type) == Some(Role::Master)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_its_role() {
        for master in [
            "galactic-cni",
            "galactic-tap-cni",
            "galactic-veth",
            "galactic-tap",
        ] {
            assert!(is_master(master), "{master}");
        }
        assert_eq!(role("galactic-ipam"), Some(Role::Ipam));
        assert_eq!(role("galactic-route"), Some(Role::Route));
        assert_eq!(role("galactic-bgp"), Some(Role::Bgp));
        assert_eq!(role("host-local"), None);
    }
}
