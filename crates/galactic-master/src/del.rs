//! DEL for both masters: remove everything private to the attachment, release its addresses,
//! leave shared state (the routing domain) to GC. Missing things are success.

use super::cni_error;
use super::conf::MasterConf;
use super::record::{Record, Records};
use galactic_core::cni::delegate::{Delegate, DEFAULT_TIMEOUT};
use galactic_core::cni::{CniError, Command, Request};
use galactic_core::ident::VpcId;
use galactic_core::log;
use galactic_core::net::domain::{self, Domains};
use galactic_core::net::netlink::Netlink;
use galactic_core::net::netns::Netns;
use galactic_core::net::{firewall, NetError};
use serde_json::json;

pub fn del(req: &Request) -> Result<(), CniError> {
    let records = Records::new(&req.node.state_dir);
    let record = find_record(req, &records)?;
    let host = Netlink::current().map_err(cni_error("open the host netlink socket"))?;
    if let Some(record) = &record {
        // The container side goes before the address is released, so the address is never
        // handed out while still configured (the host end takes its peer with it).
        remove_guest(req, record);
        galactic_core::bpf::unregister_or_defer(&req.node.state_dir, &record.host_ifname);
        teardown_host(&host, &Domains::new(&req.node.state_dir), record)
            .map_err(cni_error("remove the host side"))?;
    }
    release_ipam(req, record.as_ref())?;
    if let Some(record) = &record {
        records
            .remove(&record.host_ifname)
            .map_err(cni_error("remove the attachment record"))?;
    }
    Ok(())
}

/// The attachment's record: by host interface when the config still parses, else by scanning.
fn find_record(req: &Request, records: &Records) -> Result<Option<Record>, CniError> {
    let container = req.env.container_id()?.to_string();
    let ifname = req.env.ifname()?.to_string();
    let by_config = MasterConf::parse(req).ok().map(|c| c.host_ifname());
    let found = match by_config {
        Some(host) => records
            .get(&host)
            .map_err(cni_error("read the attachment record"))?,
        None => None,
    };
    match found {
        Some(r) if r.is_for(&req.conf.name, &container, &ifname) => Ok(Some(r)),
        _ => records
            .find(&req.conf.name, &container, &ifname)
            .map_err(cni_error("find the attachment record")),
    }
}

/// Deletes the guest interface inside the container, if the namespace still exists.
fn remove_guest(req: &Request, record: &Record) {
    let Some(path) = req.env.netns.as_ref() else {
        return;
    };
    let Ok(ns) = Netns::open(path) else { return };
    let removed = Netlink::in_netns(&ns).and_then(|nl| nl.delete_link(&record.ifname));
    if let Err(e) = removed {
        log::warn(
            "DEL: could not remove the container interface; its host end goes anyway",
            json!({"err": e.to_string()}),
        );
    }
}

/// Removes the host interface, its forward rules and its routing-domain membership.
pub fn teardown_host(host: &Netlink, domains: &Domains, record: &Record) -> Result<(), NetError> {
    // Rules first: they outlive the interface.
    if let Ok(vpc) = VpcId::parse(&record.vpc) {
        if let Some(d) = domains.get(&vpc)? {
            domain::detach(host, &d, &record.host_ifname)?;
        }
    }
    firewall::remove(&record.host_ifname)?;
    host.delete_link(&record.host_ifname)
}

/// Runs the IPAM delegate's DEL with the caller's stdin. The delegate comes from the config, or
/// from the record when the config no longer says.
fn release_ipam(req: &Request, record: Option<&Record>) -> Result<(), CniError> {
    let from_config = MasterConf::parse(req).ok().and_then(|c| c.ipam_type);
    let plugin_type = from_config.or_else(|| record.and_then(|r| r.ipam_type.clone()));
    let Some(plugin_type) = plugin_type else {
        return Ok(());
    };
    let delegate = Delegate {
        plugin_type: &plugin_type,
        search_path: &req.env.path,
        timeout: DEFAULT_TIMEOUT,
    };
    delegate.call(Command::Del, &req.stdin)
}
