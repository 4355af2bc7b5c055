//! The veth pair: the host end `G{vpc:9}{att:3}H` in the host namespace, the container end
//! (`CNI_IFNAME`) created directly in the container's namespace.

use crate::container::ContainerEnd;
use galactic_core::attachment::Kind;
use galactic_core::cni::Request;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;
use galactic_master::{Container, Device, MasterError, NewInterface};
use serde::Deserialize;

/// The veth master's device kind.
pub struct Veth;

/// A veth has no stanza keys of its own (the tap's `owner`, `group` and queue keys are ignored
/// here, like any key the veth master does not know).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NoOptions {}

impl Device for Veth {
    const NAME: &'static str = galactic_core::plugins::VETH_MASTER;
    const KIND: Kind = Kind::Veth;
    const LINK_KIND: &'static str = "veth";
    /// The container routes to its gateway on-link (a /32 on the host end, answered by proxy ARP).
    const V4_GATEWAY_PREFIX: u8 = 32;
    type Options = NoOptions;
    const CONTAINER: Option<&'static dyn Container> = Some(&ContainerEnd);

    fn create(new: &NewInterface<'_, NoOptions>) -> Result<(), MasterError> {
        let Some((ns, pod_nl)) = new.container else {
            return Err(MasterError::node("create the veth pair")(
                galactic_core::net::NetError::Conflict("no container namespace".into()),
            ));
        };
        if pod_nl
            .link(new.ifname)
            .map_err(MasterError::node("look up the container interface"))?
            .is_some()
        {
            return Err(MasterError::GuestExists(new.ifname.to_owned()));
        }
        new.host
            .create_veth(new.name, new.ifname, ns, new.mtu)
            .map_err(MasterError::node("create the veth pair"))
    }

    /// Proof of ownership, since the Go chain recorded nothing: the container's `CNI_IFNAME` is
    /// a veth whose peer is the host interface, and the host interface's peer is it (both
    /// `IFLA_LINK`s agree).
    fn owned_by(req: &Request, link: &Link) -> Result<bool, MasterError> {
        let (Some(path), Ok(ifname)) = (req.env.netns.as_ref(), req.env.ifname()) else {
            return Ok(false);
        };
        let Ok(ns) = Netns::open(path) else {
            return Ok(false);
        };
        let nl = Netlink::in_netns(&ns)
            .map_err(MasterError::node("open the container's netlink socket"))?;
        let end = nl
            .link(ifname.as_str())
            .map_err(MasterError::node("look up the container interface"))?;
        Ok(end.is_some_and(|e| {
            e.kind.as_deref() == Some("veth")
                && e.peer == Some(link.index)
                && link.peer == Some(e.index)
        }))
    }
}
