//! What the two masters differ in: the interface a workload is attached with.
//!
//! `galactic-cni` attaches a container through a veth pair whose other end it configures inside
//! the container's namespace; `galactic-tap-cni` attaches a VM through a persistent tap that the
//! VMM opens, and the VM configures itself from the result. Each crate implements [`Device`]; the
//! flow in this library calls it at fixed points of ADD, CHECK, DEL and STATUS and knows nothing
//! else of either kind.

use crate::conf::MasterConf;
use crate::error::{MasterError, NotReady};
use galactic_core::attachment::{Kind, Record};
use galactic_core::cni::Request;
use galactic_core::config::NodeConfig;
use galactic_core::ip::Assignment;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use serde::de::DeserializeOwned;
use std::collections::HashSet;

/// One master's interface kind.
pub trait Device: Sync + 'static {
    /// The plugin's name (its binary and its stanza's `type`).
    const NAME: &'static str;
    /// The kind its attachment records carry (chained plugins and GC read it).
    const KIND: Kind;
    /// The netlink kind of its host interface: a retried ADD must find one of this kind.
    const LINK_KIND: &'static str;
    /// Prefix length of the IPv4 gateway address on the host interface.
    const V4_GATEWAY_PREFIX: u8;
    /// Its own stanza keys, read from the same stanza object as the flow's (unknown keys are
    /// ignored, as the flow ignores them).
    type Options: DeserializeOwned + Default + Clone + std::fmt::Debug;

    /// Creates the host interface `new.name` (and, for a kind with a container side, the
    /// container's end in `new.container`).
    fn create(new: &NewInterface<'_, Self::Options>) -> Result<(), MasterError>;

    /// Whether `link`, the host interface of this request's VPC attachment that the upstream Go
    /// chain left without a record, is the caller's (decision 0061): only then is it adopted.
    fn owned_by(req: &Request, link: &Link) -> Result<bool, MasterError>;

    /// STATUS: what this kind needs from the kernel beyond netlink.
    fn ready() -> Result<(), NotReady> {
        Ok(())
    }

    /// The address a result reports for `a`.
    fn reported(a: &Assignment) -> IpNetwork {
        a.address
    }

    /// The address the host routes for a reported one (the inverse of [`Device::reported`]).
    fn routed(a: &Assignment) -> IpNetwork {
        a.address
    }

    /// The workload's own interface inside its network namespace, for a kind that has one.
    const CONTAINER: Option<&'static dyn Container> = None;

    /// ADD, right after the stanza is read and before anything changes: what this kind refuses
    /// in the stanza and the node config together.
    fn validate(_node: &NodeConfig, _conf: &MasterConf<Self::Options>) -> Result<(), MasterError> {
        Ok(())
    }

    /// ADD, last: the node state of this kind's own that other components read (a tap's Kata
    /// DAN file and router-advertisement record). A failure rolls the ADD back, and the
    /// rollback runs [`Device::release`].
    fn publish(_attached: &Attached<'_, Self::Options>) -> Result<(), MasterError> {
        Ok(())
    }

    /// CHECK: what is missing or wrong in [`Device::publish`]'s state.
    fn published_differences(
        _attached: &Attached<'_, Self::Options>,
    ) -> Result<Vec<String>, MasterError> {
        Ok(Vec::new())
    }

    /// DEL, GC, a failed ADD: removes what [`Device::publish`] wrote for `record`'s attachment
    /// and nothing of anyone else's; the failures (none when everything is gone).
    fn release(_node: &NodeConfig, _record: &Record) -> Vec<MasterError> {
        Vec::new()
    }

    /// GC: removes [`Device::publish`]'s state of attachments that are gone; `live` holds the
    /// host interfaces that still have a record. The failures are returned.
    fn sweep(_node: &NodeConfig, _live: &HashSet<String>) -> Vec<MasterError> {
        Vec::new()
    }
}

/// An attachment as ADD configured it or as CHECK finds it: what [`Device::publish`] describes.
pub struct Attached<'a, O> {
    /// The node config.
    pub node: &'a NodeConfig,
    /// `CNI_CONTAINERID` (for Kata, the sandbox's id).
    pub container_id: &'a str,
    /// The host interface.
    pub host: &'a Link,
    /// The addresses and gateways as the result reports them.
    pub addresses: &'a [Assignment],
    /// The kind's own stanza options.
    pub options: &'a O,
}

/// Where a host interface is created.
pub struct NewInterface<'a, O> {
    /// The host namespace's netlink socket.
    pub host: &'a Netlink,
    /// The host interface's name, `G{vpc:9}{att:3}H`.
    pub name: &'a str,
    /// The container's namespace and a netlink socket in it, for a kind with a container side.
    pub container: Option<(&'a Netns, &'a Netlink)>,
    /// `CNI_IFNAME`: the container end's name.
    pub ifname: &'a str,
    /// The stanza's MTU (kernel default when absent).
    pub mtu: Option<u32>,
    /// The kind's own stanza options.
    pub options: &'a O,
}

/// The container's end of an attachment, configured through a netlink socket opened inside the
/// container's namespace.
pub trait Container: Sync {
    /// Gives the container end its addresses and routes.
    fn configure(&self, nl: &Netlink, link: &Link, assigned: &[Assignment])
        -> Result<(), NetError>;

    /// What CHECK finds missing on the container end.
    fn differences(
        &self,
        nl: &Netlink,
        link: &Link,
        assigned: &[Assignment],
    ) -> Result<Vec<String>, NetError>;
}
