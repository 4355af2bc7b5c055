//! CHECK for both masters: the live state against `prevResult` and the attachment record, both
//! families, and the kind's published state; then the IPAM delegate's CHECK. Every difference is
//! named, and what its routing domain and host gateway lack says what restores it: the VPC's
//! convergence, which the next ADD of the VPC on this node or CNI GC runs (`converge.rs`).

use super::addressing;
use super::conf::MasterConf;
use crate::delegate::Delegate;
use crate::device::{Attached, Container, Device};
use crate::error::MasterError;
use crate::gateway;
use galactic_core::attachment::Records;
use galactic_core::cni::{CniResult, Command, Request};
use galactic_core::ip::Assignment;
use galactic_core::net::domain::{self, Domains};
use galactic_core::net::firewall;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;

pub fn check<D: Device>(req: &Request) -> Result<(), MasterError> {
    let conf = MasterConf::<D::Options>::parse(&req.conf.raw)?;
    let prev = req.conf.prev_result()?.ok_or(MasterError::NoPrevResult)?;
    let host = Netlink::current().map_err(MasterError::node("open the host netlink socket"))?;
    let host_ifname = conf.host_ifname();
    // An attachment the upstream chain created is adopted (recorded, its rules made ours), made
    // a member of the VPC's routing domain as this node runs it, and then checked like any
    // other.
    if super::legacy::adopt::<D>(req, &Records::new(&req.node.state_dir), true)?.is_some() {
        join_adopted::<D>(req, &conf, &host, &prev)?;
        publish_adopted::<D>(req, &conf, &host, &prev)?;
    }
    let mut problems = Vec::new();
    match host
        .link(&host_ifname)
        .map_err(MasterError::node("look up the host interface"))?
    {
        None => problems.push(format!("host interface {host_ifname} does not exist")),
        Some(link) => {
            problems.extend(host_side::<D>(req, &conf, &host, &link, &prev)?);
            problems.extend(D::published_differences(&Attached {
                node: &req.node,
                container_id: req.env.container_id()?.as_str(),
                host: &link,
                addresses: &addressing::from_result(&prev),
                options: &conf.options,
            })?);
        }
    }
    if let Some(side) = D::CONTAINER {
        problems.extend(container_side(side, req, &prev)?);
    }
    if !problems.is_empty() {
        return Err(MasterError::CheckFailed(problems));
    }
    match conf.ipam_type.as_deref() {
        Some(plugin_type) => {
            Ok(Delegate::new(plugin_type, &req.env.path).call(Command::Check, &req.stdin)?)
        }
        None => Ok(()),
    }
}

/// Joins an attachment just adopted from the upstream chain to the VPC's recorded routing
/// domain, as ADD joins one of ours: its host sysctls, its membership (table mode: its policy
/// rules; a VRF: the Go chain already enslaved it to the VRF the domain adopted) and its host
/// gateway in the domain's table for the result's addresses (the Go chain's routes are in its
/// VRF's table, which table mode does not use). Without a recorded domain (no ADD of the VPC on
/// this node since the switch) there is nothing to join, and the check says so.
fn join_adopted<D: Device>(
    req: &Request,
    conf: &MasterConf<D::Options>,
    host: &Netlink,
    prev: &CniResult,
) -> Result<(), MasterError> {
    let domains = Domains::new(&req.node.state_dir);
    let Some(d) = domains
        .get(&conf.ids.vpc)
        .map_err(MasterError::node("read the routing domain"))?
    else {
        return Ok(());
    };
    let link = host
        .require_link(&conf.host_ifname())
        .map_err(MasterError::node("read the host interface"))?;
    // Ours forward IPv6 with `force_forwarding` where the kernel has it; the Go chain's did not.
    super::add::host_sysctls::<D>(&link.name)?;
    domain::attach(host, &d, &conf.ids.vpc, &link)
        .map_err(MasterError::node("join the routing domain"))?;
    let assigned = host_view::<D>(&addressing::from_result(prev));
    // The neighbours the Go chain made stay; none are added without the guest's MAC.
    gateway::configure(host, D::V4_GATEWAY_PREFIX, &link, d.table, &assigned, None)
        .map_err(MasterError::node("configure the host gateway"))
}

/// Writes the kind's published state for an attachment just adopted, as ADD would have: a Go
/// chain older than upstream's RA records wrote none, and the adopted attachment is checked like
/// one of ours.
fn publish_adopted<D: Device>(
    req: &Request,
    conf: &MasterConf<D::Options>,
    host: &Netlink,
    prev: &CniResult,
) -> Result<(), MasterError> {
    let link = host
        .require_link(&conf.host_ifname())
        .map_err(MasterError::node("read the host interface"))?;
    D::publish(&Attached {
        node: &req.node,
        container_id: req.env.container_id()?.as_str(),
        host: &link,
        addresses: &addressing::from_result(prev),
        options: &conf.options,
    })
}

/// The host side: the record, the host interface as the result describes it, its forward
/// rules, the routing domain and the host gateway.
fn host_side<D: Device>(
    req: &Request,
    conf: &MasterConf<D::Options>,
    host: &Netlink,
    link: &Link,
    prev: &CniResult,
) -> Result<Vec<String>, MasterError> {
    let mut problems = host_interface(req, link, prev)?;
    let domains = Domains::new(&req.node.state_dir);
    let Some(d) = domains
        .get(&conf.ids.vpc)
        .map_err(MasterError::node("read the routing domain"))?
    else {
        problems.push(format!(
            "VPC {} has no routing domain on this node",
            conf.ids.vpc
        ));
        return Ok(problems);
    };
    problems.extend(
        domain::check(host, &d, &conf.ids.vpc, link)
            .map_err(MasterError::node("check the routing domain"))?,
    );
    let assigned = addressing::from_result(prev);
    let remedy = domain::restored_by(&conf.ids.vpc);
    problems.extend(
        gateway::differences(
            host,
            D::V4_GATEWAY_PREFIX,
            link,
            d.table,
            &host_view::<D>(&assigned),
        )
        .map_err(MasterError::node("check the host gateway"))?
        .into_iter()
        .map(|p| format!("{p}; {remedy}")),
    );
    Ok(problems)
}

/// The host interface: recorded as this attachment's, its MAC the result's, its forward rules
/// present.
fn host_interface(
    req: &Request,
    link: &Link,
    prev: &CniResult,
) -> Result<Vec<String>, MasterError> {
    let mut problems = Vec::new();
    let owned = Records::new(&req.node.state_dir)
        .get(&link.name)
        .map_err(MasterError::node("read the attachment record"))?;
    let (container, ifname) = (
        req.env.container_id()?.to_string(),
        req.env.ifname()?.to_string(),
    );
    if !owned.is_some_and(|r| r.is_for(&req.conf.name, &container, &ifname)) {
        problems.push(format!(
            "{} is not recorded as this attachment's host interface",
            link.name
        ));
    }
    let recorded_mac = prev
        .interfaces
        .iter()
        .find(|i| i.name == link.name && i.sandbox.is_none())
        .and_then(|i| i.mac.as_deref());
    if let Some(want) = recorded_mac.filter(|m| link.mac.as_deref() != Some(*m)) {
        problems.push(format!(
            "{} has MAC {}, the result says {want}",
            link.name,
            link.mac.as_deref().unwrap_or("none"),
        ));
    }
    if !firewall::is_allowed(&link.name).map_err(MasterError::node("read the forward rules"))? {
        problems.push(format!(
            "forward-accept rules for {} are missing",
            link.name
        ));
    }
    Ok(problems)
}

/// What the host holds for the result's addresses (a tap's result reports the IPv4 address
/// with the /25 the VM uses; the host routes the /32).
fn host_view<D: Device>(assigned: &[Assignment]) -> Vec<Assignment> {
    assigned
        .iter()
        .map(|a| Assignment {
            address: D::routed(a),
            gateway: a.gateway,
        })
        .collect()
}

fn container_side(
    side: &dyn Container,
    req: &Request,
    prev: &CniResult,
) -> Result<Vec<String>, MasterError> {
    let ifname = req.env.ifname()?.to_string();
    let netns = req.env.netns_path()?;
    let ns = Netns::open(netns).map_err(|source| MasterError::Netns {
        path: netns.clone(),
        source,
    })?;
    let nl =
        Netlink::in_netns(&ns).map_err(MasterError::node("open the container's netlink socket"))?;
    let Some(guest) = nl
        .link(&ifname)
        .map_err(MasterError::node("look up the container interface"))?
    else {
        return Ok(vec![format!(
            "interface {ifname} does not exist in the container"
        )]);
    };
    let mut problems = Vec::new();
    if let Some(recorded) = prev
        .interfaces
        .iter()
        .find(|i| i.name == ifname && i.sandbox.is_some())
    {
        if let Some(want) = recorded.mtu.filter(|m| *m != guest.mtu) {
            problems.push(format!(
                "{ifname} has MTU {}, the result says {want}",
                guest.mtu
            ));
        }
        if let Some(want) = recorded.mac.as_deref().filter(|m| {
            !guest
                .mac
                .as_deref()
                .is_some_and(|g| g.eq_ignore_ascii_case(m))
        }) {
            problems.push(format!(
                "{ifname} has MAC {}, the result says {want}",
                guest.mac.as_deref().unwrap_or("none")
            ));
        }
    }
    problems.extend(
        side.differences(&nl, &guest, &addressing::from_result(prev))
            .map_err(MasterError::node("check the container interface"))?,
    );
    Ok(problems)
}
