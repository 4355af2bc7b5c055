//! What ADD and CHECK learn from their place in the chain: the validated stanza, the master's
//! result (`prevResult`, required) and the host interface the terminations go out of.

use crate::conf::RouteConf;
use crate::error::RouteError;
use galactic_core::attachment::ChainPosition;
use galactic_core::cni::{CniResult, Request};
use galactic_core::ident::ChainIds;

/// The validated input of ADD and CHECK.
#[derive(Debug)]
pub struct Target {
    /// The stanza.
    pub conf: RouteConf,
    /// `prevResult`, passed on unchanged by ADD.
    pub prev: CniResult,
    /// The host interface `G{vpc:9}{att:3}H`.
    pub host_ifname: String,
}

impl Target {
    /// Validates the stanza, then requires `prevResult` and checks, against it and the master's
    /// record, that the stanza names this chain's own attachment (before anything is routed).
    pub fn from_request(req: &Request) -> Result<Self, RouteError> {
        let conf = RouteConf::parse(&req.conf.raw)?;
        let prev = req.conf.prev_result()?.ok_or(RouteError::NoPrevResult)?;
        let ids = ChainIds {
            vpc: conf.vpc.clone(),
            att: conf.att.clone(),
        };
        let prev_hosts = host_interfaces(&prev);
        ChainPosition {
            ids: &ids,
            prev_hosts: &prev_hosts,
            network: &req.conf.name,
            container_id: req.env.container_id()?.as_str(),
            ifname: req.env.ifname()?.as_str(),
        }
        .verify(&req.node.state_dir)?;
        Ok(Self {
            host_ifname: conf.host_ifname(),
            conf,
            prev,
        })
    }
}

/// `prevResult`'s host interfaces: those without a sandbox (the veth host end, the tap). A
/// master that reports only the guest side lists none; the record check still applies.
pub fn host_interfaces(prev: &CniResult) -> Vec<&str> {
    prev.interfaces
        .iter()
        .filter(|i| i.sandbox.as_deref().is_none_or(str::is_empty))
        .map(|i| i.name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(interfaces: serde_json::Value) -> CniResult {
        serde_json::from_value(json!({"cniVersion": "1.1.0", "interfaces": interfaces})).unwrap()
    }

    #[test]
    fn the_host_interfaces_are_the_sandbox_less_entries() {
        let veth = result(
            json!([{"name": "G00000000A001H"}, {"name": "eth0", "sandbox": "/run/netns/p"}]),
        );
        assert_eq!(host_interfaces(&veth), ["G00000000A001H"]);
        let tap = result(json!([{"name": "G00000000A001H", "sandbox": ""}]));
        assert_eq!(host_interfaces(&tap), ["G00000000A001H"]);
        let guest_only = result(json!([{"name": "eth0", "sandbox": "/run/netns/p"}]));
        assert!(host_interfaces(&guest_only).is_empty());
    }
}
