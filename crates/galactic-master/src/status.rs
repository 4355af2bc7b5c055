//! STATUS for both masters: ready when the kernel side works (netlink, and what the device kind
//! needs: /dev/net/tun for taps),
//! the state directory is writable, a routing domain backend works as the node config says, and
//! the IPAM delegate (if any) is found and ready itself.
//!
//! A successful STATUS prints nothing (CNI 1.1), so which routing domain backend is in force,
//! and why, goes to the log: one `info` line, "STATUS: routing domain backend", with `backend`,
//! `routingDomain`, `publisher`, `reason` and `recorded` (the node's recorded domains by
//! backend: they keep the backend they were created with), logged before the device kind's and
//! the delegate's readiness are checked, so it is there whatever fails after it. When none can be used (`auto` with the Kubernetes
//! publisher and no VRF, or `vrf` without VRF) STATUS fails with code 50 and the same message
//! ADD would refuse with.

use crate::conf::MasterConf;
use crate::delegate::Delegate;
use crate::device::Device;
use crate::error::MasterError;
use crate::error::NotReady;
use galactic_core::cni::{Command, Request};
use galactic_core::config::{NodeConfig, Publisher, RoutingDomainMode};
use galactic_core::log;
use galactic_core::net::domain::{Backend, Domains};
use serde_json::json;

/// STATUS of the master of device kind `D`.
pub fn status<D: Device>(req: &Request) -> Result<(), MasterError> {
    galactic_core::net::readiness(&req.node.state_dir).map_err(NotReady::Node)?;
    // Before the device kind's and the delegate's readiness, so the backend in force is
    // logged whatever fails after it.
    routing_domains(&req.node).map_err(NotReady::RoutingDomain)?;
    D::ready()?;
    let conf = MasterConf::<D::Options>::parse(&req.conf.raw)?;
    let Some(plugin_type) = conf.ipam_type.as_deref() else {
        return Ok(());
    };
    let delegate = Delegate::new(plugin_type, &req.env.path);
    delegate.find().map_err(NotReady::Delegate)?;
    Ok(delegate.call(Command::Status, &req.stdin)?)
}

/// The backend new routing domains get, logged with why.
fn routing_domains(node: &NodeConfig) -> Result<(), galactic_core::net::NetError> {
    let domains = Domains::new(&node.state_dir);
    let choice = domains.choose(node.routing_domain, node.publisher)?;
    // The domains already recorded keep the backend they were created with (a node config
    // changed since does not move them): counted by backend.
    let (mut vrf, mut table) = (0, 0);
    for d in domains.all()? {
        match d.backend {
            Backend::Vrf => vrf += 1,
            Backend::Table => table += 1,
        }
    }
    log::info(
        "STATUS: routing domain backend",
        json!({"backend": choice.backend, "routingDomain": mode_name(node.routing_domain),
               "publisher": publisher_name(node.publisher), "reason": choice.reason.to_string(),
               "recorded": {"vrf": vrf, "table": table}}),
    );
    if choice.backend == Backend::Table || table > 0 {
        warn_of_mark_users(node.table_mark_mask);
    }
    Ok(())
}

/// Logs, at `warn`, the nftables rules of other tables that set or match bits of the node's
/// `table_mark_mask` (decision 0082): such a rule can steer traffic into a VPC's table, wipe a
/// VPC's mark, or take our marks for its own. STATUS does not fail for it: whether the rule ever
/// meets the traffic of a VPC interface is not known here, and rules outside nftables
/// (iptables-legacy, eBPF) are not seen at all.
fn warn_of_mark_users(mask: u32) {
    use galactic_core::net::{firewall, nftables::mark_users};
    let Ok(users) = mark_users::mark_users(firewall::OWN_TABLE) else {
        return;
    };
    let overlapping: Vec<String> = users
        .iter()
        .filter(|u| u.bits & mask != 0)
        .map(mark_users::MarkUser::label)
        .collect();
    if overlapping.is_empty() {
        return;
    }
    log::warn(
        "STATUS: nftables rules of other tables set or match firewall-mark bits of \
         table_mark_mask; set table_mark_mask (or theirs) to bits they leave alone",
        json!({"tableMarkMask": format!("{mask:#x}"), "rules": overlapping}),
    );
}

fn mode_name(mode: RoutingDomainMode) -> &'static str {
    match mode {
        RoutingDomainMode::Vrf => "vrf",
        RoutingDomainMode::Table => "table",
        RoutingDomainMode::Auto => "auto",
    }
}

fn publisher_name(publisher: Publisher) -> &'static str {
    match publisher {
        Publisher::Kubernetes => "kubernetes",
        Publisher::Local => "local",
    }
}
