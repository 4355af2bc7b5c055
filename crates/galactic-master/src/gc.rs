//! GC and STATUS for both masters.
//!
//! GC removes the host side of every attachment of this network that the runtime no longer
//! lists, delegates GC to IPAM, then removes routing domains no attachment uses. Ownership comes
//! from the attachment records, never from interface names. Without a valid-attachments list GC
//! removes nothing (`docs/decisions/0002`).

use super::cni_error;
use super::conf::MasterConf;
use super::del::teardown_host;
use super::record::{Kind, Records};
use galactic_core::cni::delegate::{Delegate, DEFAULT_TIMEOUT};
use galactic_core::cni::{CniError, Command, Request};
use galactic_core::ident::VpcId;
use galactic_core::log;
use galactic_core::net::domain::table::ATTACH_PRIORITY;
use galactic_core::net::domain::Domains;
use galactic_core::net::firewall;
use galactic_core::net::netlink::Netlink;
use serde_json::json;
use std::collections::HashSet;

pub fn gc(req: &Request) -> Result<(), CniError> {
    let Some(valid) = req.conf.valid_attachments()? else {
        log::info("GC: no valid-attachments list; nothing removed", json!({}));
        return delegate_gc(req);
    };
    let valid: HashSet<(String, String)> = valid
        .into_iter()
        .map(|a| (a.container_id, a.ifname))
        .collect();
    let host = Netlink::current().map_err(cni_error("open the host netlink socket"))?;
    let records = Records::new(&req.node.state_dir);
    let domains = Domains::new(&req.node.state_dir);
    let mut errors = Vec::new();
    for record in records
        .all()
        .map_err(cni_error("list attachment records"))?
    {
        if record.network != req.conf.name
            || valid.contains(&(record.container_id.clone(), record.ifname.clone()))
        {
            continue;
        }
        let removed = teardown_host(&host, &domains, &record)
            .and_then(|()| records.remove(&record.host_ifname));
        match removed {
            Ok(()) => log::info(
                "GC: removed stale attachment",
                json!({"hostIfname": record.host_ifname, "containerID": record.container_id}),
            ),
            Err(e) => errors.push(format!("{}: {e}", record.host_ifname)),
        }
    }
    if let Err(e) = sweep_datapath(&req.node.state_dir, &records) {
        errors.push(format!("eBPF datapath rows: {e}"));
    }
    if let Err(e) = sweep_orphans(&host, &domains, &records) {
        errors.push(format!("orphaned rules: {e}"));
    }
    if let Err(e) = delegate_gc(req) {
        errors.push(format!("IPAM GC: {e}"));
    }
    if let Err(e) = remove_unused_domains(&host, &domains, &records) {
        errors.push(format!("routing domains: {e}"));
    }
    for swept in [records.sweep_temporaries(), domains.sweep_temporaries()] {
        if let Err(e) = swept {
            errors.push(format!("temporary state files: {e}"));
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(CniError::io(format!(
            "GC could not remove everything: {}",
            errors.join("; ")
        ))),
    }
}

fn delegate_gc(req: &Request) -> Result<(), CniError> {
    let Some(plugin_type) = MasterConf::parse(req).ok().and_then(|c| c.ipam_type) else {
        return Ok(());
    };
    Delegate {
        plugin_type: &plugin_type,
        search_path: &req.env.path,
        timeout: DEFAULT_TIMEOUT,
    }
    .call(Command::Gc, &req.stdin)
}

/// Removes policy rules and forward-accept rules of host interfaces no record owns: rules
/// outlive their interface (a crash between the link deletion and the rule deletion leaves them
/// "detached"). Ours are recognised by their table (one of our domains') or our comment tag.
fn sweep_orphans(
    host: &Netlink,
    domains: &Domains,
    records: &Records,
) -> Result<(), galactic_core::net::NetError> {
    let owned: HashSet<String> = records.all()?.into_iter().map(|r| r.host_ifname).collect();
    let tables: HashSet<u32> = domains.all()?.into_iter().map(|d| d.table).collect();
    for v6 in [false, true] {
        for rule in host.rules(v6)? {
            let orphan = rule.priority == ATTACH_PRIORITY
                && tables.contains(&rule.table)
                && rule.iif.as_ref().is_some_and(|i| !owned.contains(i));
            if orphan {
                host.delete_rule(&rule)?;
            }
        }
    }
    for ifname in firewall::owned_interfaces()?
        .into_iter()
        .filter(|i| !owned.contains(i))
    {
        firewall::remove(&ifname)?;
    }
    Ok(())
}

/// Removes the eBPF datapath rows of every registration whose attachment has no record left.
fn sweep_datapath(state_dir: &std::path::Path, records: &Records) -> Result<(), String> {
    let live: HashSet<String> = records
        .all()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|r| r.host_ifname)
        .collect();
    galactic_core::bpf::sweep_attachments(state_dir, &live)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Removes every recorded domain whose VPC has no attachment record left.
fn remove_unused_domains(
    host: &Netlink,
    domains: &Domains,
    records: &Records,
) -> Result<(), galactic_core::net::NetError> {
    let _lock = domains.lock()?;
    let in_use: HashSet<String> = records.all()?.into_iter().map(|r| r.vpc).collect();
    for d in domains.all()? {
        if in_use.contains(&d.vpc) {
            continue;
        }
        if let Ok(vpc) = VpcId::parse(&d.vpc) {
            domains.remove(host, &vpc)?;
            log::info(
                "GC: removed unused routing domain",
                json!({"vpc": d.vpc, "table": d.table}),
            );
        }
    }
    Ok(())
}

/// Ready when the kernel side works (netlink; /dev/net/tun for taps), the state directory is
/// writable and the IPAM delegate (if any) is found and ready itself.
pub fn status(kind: Kind, req: &Request) -> Result<(), CniError> {
    let not_ready = |what: String| CniError::not_available(what);
    Netlink::current().map_err(|e| not_ready(format!("netlink is not usable: {e}")))?;
    if kind == Kind::Tap && !std::path::Path::new("/dev/net/tun").exists() {
        return Err(not_ready(
            "/dev/net/tun is missing: taps cannot be created".into(),
        ));
    }
    let probe = req
        .node
        .state_dir
        .join(format!(".status-probe.{}", std::process::id()));
    std::fs::create_dir_all(&req.node.state_dir)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            not_ready(format!(
                "state directory {} is not writable: {e}",
                req.node.state_dir.display()
            ))
        })?;
    let conf = MasterConf::parse(req)?;
    match conf.ipam_type.as_deref() {
        Some(plugin_type) => {
            let delegate = Delegate {
                plugin_type,
                search_path: &req.env.path,
                timeout: DEFAULT_TIMEOUT,
            };
            delegate.find().map_err(|e| not_ready(e.msg))?;
            delegate.call(Command::Status, &req.stdin)
        }
        None => Ok(()),
    }
}
