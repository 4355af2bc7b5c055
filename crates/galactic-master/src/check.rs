//! CHECK for both masters: the live state against `prevResult` and the attachment record, both
//! families, then the IPAM delegate's CHECK. Every difference is named.

use super::addressing::{self, Assigned};
use super::conf::MasterConf;
use super::record::{Kind, Records};
use super::{cni_error, gateway, guest};
use galactic_core::cni::delegate::{Delegate, DEFAULT_TIMEOUT};
use galactic_core::cni::{CniError, CniResult, Code, Command, Request};
use galactic_core::net::domain::{self, Domains};
use galactic_core::net::firewall;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;

pub fn check(kind: Kind, req: &Request) -> Result<(), CniError> {
    let conf = MasterConf::parse(req)?;
    let prev = req.conf.prev_result()?.ok_or_else(|| {
        CniError::invalid_config(
            "CHECK needs the prevResult of the ADD (the runtime's cached result)",
        )
    })?;
    let mut problems = Vec::new();
    let host = Netlink::current().map_err(cni_error("open the host netlink socket"))?;
    let host_ifname = conf.host_ifname();
    match host
        .link(&host_ifname)
        .map_err(cni_error("look up the host interface"))?
    {
        None => problems.push(format!("host interface {host_ifname} does not exist")),
        Some(link) => problems.extend(host_side(req, &conf, &host, &link, kind, &prev)?),
    }
    if kind == Kind::Veth {
        problems.extend(guest_side(req, &prev)?);
    }
    if !problems.is_empty() {
        return Err(CniError::new(
            Code::CHECK_FAILED,
            format!("CHECK failed: {}", problems.join("; ")),
        ));
    }
    match conf.ipam_type.as_deref() {
        Some(plugin_type) => Delegate {
            plugin_type,
            search_path: &req.env.path,
            timeout: DEFAULT_TIMEOUT,
        }
        .call(Command::Check, &req.stdin),
        None => Ok(()),
    }
}

fn host_side(
    req: &Request,
    conf: &MasterConf,
    host: &Netlink,
    link: &Link,
    kind: Kind,
    prev: &CniResult,
) -> Result<Vec<String>, CniError> {
    let mut problems = Vec::new();
    let records = Records::new(&req.node.state_dir);
    let owned = records
        .get(&link.name)
        .map_err(cni_error("read the attachment record"))?;
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
    if let Some(recorded) = prev
        .interfaces
        .iter()
        .find(|i| i.name == link.name && i.sandbox.is_none())
    {
        if recorded.mac.is_some() && recorded.mac != link.mac {
            problems.push(format!(
                "{} has MAC {:?}, the result says {:?}",
                link.name, link.mac, recorded.mac
            ));
        }
    }
    if !firewall::is_allowed(&link.name).map_err(cni_error("read the forward rules"))? {
        problems.push(format!(
            "forward-accept rules for {} are missing",
            link.name
        ));
    }
    let domains = Domains::new(&req.node.state_dir);
    let Some(d) = domains
        .get(&conf.vpc)
        .map_err(cni_error("read the routing domain"))?
    else {
        problems.push(format!(
            "VPC {} has no routing domain on this node",
            conf.vpc
        ));
        return Ok(problems);
    };
    problems.extend(
        domain::check(host, &d, &conf.vpc, link).map_err(cni_error("check the routing domain"))?,
    );
    let assigned = addressing::from_result(prev);
    problems.extend(
        gateway::differences(host, kind, link, d.table, &host_view(kind, &assigned))
            .map_err(cni_error("check the host gateway"))?,
    );
    Ok(problems)
}

/// A tap result reports the IPv4 address with the /25 the VM uses; the host routes the /32.
fn host_view(kind: Kind, assigned: &[Assigned]) -> Vec<Assigned> {
    assigned
        .iter()
        .map(|a| match (kind, a.address) {
            (Kind::Tap, ipnetwork::IpNetwork::V4(v4)) => Assigned {
                address: ipnetwork::IpNetwork::new(v4.ip().into(), 32).unwrap_or(a.address),
                gateway: a.gateway,
            },
            _ => *a,
        })
        .collect()
}

fn guest_side(req: &Request, prev: &CniResult) -> Result<Vec<String>, CniError> {
    let ifname = req.env.ifname()?.to_string();
    let netns = req
        .env
        .netns
        .as_ref()
        .ok_or_else(|| CniError::invalid_env("CHECK requires CNI_NETNS"))?;
    let ns = Netns::open(netns).map_err(|e| CniError::invalid_env(format!("CNI_NETNS: {e}")))?;
    let nl = Netlink::in_netns(&ns).map_err(cni_error("open the container's netlink socket"))?;
    let Some(guest) = nl
        .link(&ifname)
        .map_err(cni_error("look up the container interface"))?
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
        if recorded.mtu.is_some_and(|m| m != guest.mtu) {
            problems.push(format!(
                "{ifname} has MTU {}, the result says {:?}",
                guest.mtu, recorded.mtu
            ));
        }
    }
    problems.extend(
        guest::differences(&nl, &guest, &addressing::from_result(prev))
            .map_err(cni_error("check the container interface"))?,
    );
    Ok(problems)
}
