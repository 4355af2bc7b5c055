//! The tap master's device kind: a persistent tap in the host namespace, joined to the VPC's
//! routing domain; the VM configures itself from the result (no container end), or a Kata
//! guest from its sandbox's DAN file ([`crate::kata`]). Every tap with an IPv6 gateway is
//! recorded for the datapath container's router advertisements ([`crate::radv`]).

use crate::options::TapOptions;
use crate::{kata, radv, tun};
use galactic_core::attachment::{Kind, Record};
use galactic_core::cni::Request;
use galactic_core::config::NodeConfig;
use galactic_core::ip::Assignment;
use galactic_core::net::netlink::Link;
use galactic_master::conf::MasterConf;
use galactic_master::{Attached, Device, MasterError, NewInterface, NotReady};
use ipnetwork::IpNetwork;
use std::collections::HashSet;
use std::path::Path;

/// The tap master's device kind.
pub struct Tap;

/// The IPv4 prefix a VM sees its address and gateway in: the gateway is on-link inside it, and
/// `noprefixroute` keeps the /25 out of the host's tables (the host routes the VM's /32).
const V4_ON_LINK_PREFIX: u8 = 25;

impl Device for Tap {
    const NAME: &'static str = galactic_core::plugins::TAP_MASTER;
    const KIND: Kind = Kind::Tap;
    const LINK_KIND: &'static str = "tun";
    const V4_GATEWAY_PREFIX: u8 = V4_ON_LINK_PREFIX;
    type Options = TapOptions;

    fn create(new: &NewInterface<'_, TapOptions>) -> Result<(), MasterError> {
        tun::create(new.name, new.options).map_err(MasterError::node("create the tap"))?;
        if let Some(mtu) = new.mtu {
            let link = new
                .host
                .require_link(new.name)
                .map_err(MasterError::node("read the tap"))?;
            new.host
                .set_mtu(link.index, mtu)
                .map_err(MasterError::node("set the tap MTU"))?;
        }
        Ok(())
    }

    /// The Go chain served one tap per VPC attachment and deleted it on any container's DEL: a
    /// tap is adopted by the DEL or CHECK of its VPC attachment, as upstream.
    fn owned_by(_req: &Request, _link: &Link) -> Result<bool, MasterError> {
        Ok(true)
    }

    fn ready() -> Result<(), NotReady> {
        match Path::new("/dev/net/tun").exists() {
            true => Ok(()),
            false => Err(NotReady::NoTun),
        }
    }

    /// A VM on a tap learns its on-link IPv4 subnet (holding the gateway) from the result.
    fn reported(a: &Assignment) -> IpNetwork {
        match a.address {
            IpNetwork::V4(v4) if v4.prefix() == 32 && a.gateway.is_some() => {
                IpNetwork::new(v4.ip().into(), V4_ON_LINK_PREFIX).unwrap_or(a.address)
            }
            _ => a.address,
        }
    }

    fn routed(a: &Assignment) -> IpNetwork {
        match a.address {
            IpNetwork::V4(v4) => IpNetwork::new(v4.ip().into(), 32).unwrap_or(a.address),
            IpNetwork::V6(_) => a.address,
        }
    }

    fn validate(node: &NodeConfig, conf: &MasterConf<TapOptions>) -> Result<(), MasterError> {
        kata::validate(node, conf).map_err(|e| MasterError::Refused(Box::new(e)))
    }

    /// The RA record first, the DAN file last (as upstream): the file appears only once the tap
    /// behind it is complete.
    fn publish(a: &Attached<'_, TapOptions>) -> Result<(), MasterError> {
        radv::publish(a)?;
        kata::publish(a)
    }

    fn published_differences(a: &Attached<'_, TapOptions>) -> Result<Vec<String>, MasterError> {
        let mut problems = radv::differences(a);
        problems.extend(kata::differences(a));
        Ok(problems)
    }

    fn release(node: &NodeConfig, record: &Record) -> Vec<MasterError> {
        kata::release(node, record)
            .into_iter()
            .chain(radv::release(node, record))
            .collect()
    }

    fn sweep(node: &NodeConfig, live: &HashSet<String>) -> Vec<MasterError> {
        let mut failures = radv::sweep(node, live);
        if let Err(e) = crate::staged::sweep(&node.dan_dir) {
            failures.push(MasterError::node("sweep the Kata DAN temporaries")(e));
        }
        failures
    }
}
