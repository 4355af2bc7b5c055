//! GC: removes termination routes whose routing domain no longer exists.
//!
//! "No longer exists" is decided from the records, never from the table alone: an entry is stale
//! when its VPC has no domain record any more, or when the VPC's domain now uses a different
//! table (it was torn down and created again). A stale entry's route is deleted only when the
//! kernel still has *exactly* that route (destination, table, gateway, and the device recorded by
//! name, which belongs to the VPC), so a table id that a new domain reuses keeps its own routes.
//! Entries whose route is gone (the master's DEL deleted the host interface, and the kernel drops
//! a device's routes with it; or a domain teardown flushed the table) are dropped from the
//! record. Routes of live domains are kept: the routes go with their host interface, and DEL
//! (`del`) already removed the entries of attachments that were torn down.
//!
//! Entries of attachments the runtime lists (`cni.dev/valid-attachments`, this network's) are
//! live: while their VPC has a domain, they are converged into its current table instead
//! (`converge`: a route removed behind our back is re-installed, one left in an old table is
//! moved), as the next ADD of the VPC would. Entries of attachments it does not list keep the
//! fates above: their lifetime is bounded by their host interface, which the master's DEL and GC
//! remove.

use crate::converge;
use crate::error::{net, RouteError};
use crate::record::{Ledger, Owned, VpcRoutes};
use galactic_core::cni::{Attachment, Request};
use galactic_core::ident::VpcId;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::{Link, Netlink, RouteKind, RouteSpec};
use serde_json::json;

/// What GC does with one record entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// The domain still uses the entry's table and the route exists.
    Keep,
    /// The route no longer exists: forget the entry.
    Forget,
    /// The domain is gone (or moved to another table) and the route is still installed.
    Delete(RouteSpec),
}

/// Decides an entry's fate. `domain_table`: the VPC's current table (`None` without a domain);
/// `dev`: the index of the link named `entry.dev`, if one exists; `routes`: the kernel's routes.
pub fn fate(
    entry: &Owned,
    domain_table: Option<u32>,
    dev: Option<u32>,
    routes: &[RouteSpec],
) -> Fate {
    let installed = dev.and_then(|dev| {
        routes.iter().find(|r| {
            r.table == entry.table
                && r.dst == entry.dst
                && r.kind == RouteKind::Unicast
                && r.dev == Some(dev)
                && r.gateway == entry.gateway
        })
    });
    match installed {
        None => Fate::Forget,
        Some(_) if domain_table == Some(entry.table) => Fate::Keep,
        Some(route) => Fate::Delete(route.clone()),
    }
}

/// Runs GC over every VPC with a record; one VPC's failure does not stop the others.
pub fn gc(req: &Request) -> Result<(), RouteError> {
    let ledger = Ledger::new(&req.node.state_dir);
    ledger.sweep_stale_temp();
    let vpcs = ledger.vpcs()?;
    if vpcs.is_empty() {
        return Ok(());
    }
    let sweep = Sweep {
        ledger,
        domains: Domains::new(&req.node.state_dir),
        nl: Netlink::current().map_err(net("open the host netlink socket"))?,
        network: req.conf.name.clone(),
        // Unreadable or absent: no entry is known live, so every one keeps its fate.
        listed: req
            .conf
            .valid_attachments()
            .ok()
            .flatten()
            .unwrap_or_default(),
    };
    let mut errors = Vec::new();
    for vpc in vpcs {
        match vpc.map_err(|e| format!("unreadable route record {e}")) {
            Ok(vpc) => {
                if let Err(e) = sweep.vpc(&vpc) {
                    errors.push(format!("VPC {vpc}: {e}"));
                }
            }
            Err(e) => errors.push(e),
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(RouteError::GcIncomplete(errors)),
    }
}

struct Sweep {
    ledger: Ledger,
    domains: Domains,
    nl: Netlink,
    /// The network GC runs for.
    network: String,
    /// The attachments the runtime lists as live for it.
    listed: Vec<Attachment>,
}

impl Sweep {
    /// Sweeps one VPC's record under its lock (an ADD of the VPC cannot interleave).
    fn vpc(&self, vpc: &VpcId) -> Result<(), RouteError> {
        let _lock = self.ledger.lock(vpc)?;
        self.ledger.remove_stale_temp(vpc);
        let record = self.ledger.get(vpc)?;
        if record.routes.is_empty() {
            return Ok(());
        }
        let domain_table = self
            .domains
            .get(vpc)
            .map_err(net("read the VPC's routing domain"))?
            .map(|d| d.table);
        let links = self.nl.links().map_err(net("list links"))?;
        let mut routes = Vec::new();
        for family in Family::ALL {
            routes.extend(self.nl.all_routes(family).map_err(net("list routes"))?);
        }
        // The current table's routes, which listed entries converge into.
        let current: Vec<RouteSpec> = routes
            .iter()
            .filter(|r| Some(r.table) == domain_table)
            .cloned()
            .collect();
        let mut keep = Vec::new();
        for entry in record.routes {
            let dev = index_of(&links, &entry.dev);
            if let (true, Some(table)) = (self.is_listed(&entry), domain_table) {
                keep.extend(self.converge(vpc, entry, table, dev, &current));
                continue;
            }
            match fate(&entry, domain_table, dev, &routes) {
                Fate::Keep => keep.push(entry),
                Fate::Forget => {}
                Fate::Delete(route) => self.delete(vpc, &entry, &route)?,
            }
        }
        let kept = VpcRoutes {
            vpc: vpc.raw().to_owned(),
            routes: keep,
        };
        self.ledger.put(vpc, &converge::rerecord(&kept, &[]))
    }

    /// Whether the runtime lists the attachment that installed `entry` as live.
    fn is_listed(&self, entry: &Owned) -> bool {
        entry.network == self.network
            && self
                .listed
                .iter()
                .any(|a| a.container_id == entry.container_id && a.ifname == entry.ifname)
    }

    /// A live attachment's entry converged into the VPC's current `table`, whose routes are
    /// `in_table`: the entry to keep (re-recorded when it moved), `None` when its host interface
    /// is gone. A repair that fails keeps the entry as it was, for the next ADD of the VPC or GC.
    fn converge(
        &self,
        vpc: &VpcId,
        entry: Owned,
        table: u32,
        dev: Option<u32>,
        in_table: &[RouteSpec],
    ) -> Option<Owned> {
        dev?;
        if !converge::needs_repair(&entry, table, in_table) {
            return Some(entry);
        }
        let Some(fix) = converge::repair(&entry, table, dev, in_table) else {
            return Some(entry);
        };
        match converge::apply(&self.nl, vpc.raw(), &fix) {
            Ok(()) => Some(fix.entry),
            Err(e) => {
                log::warn(
                    "GC: could not converge a live attachment's termination route",
                    json!({"dst": entry.dst, "dev": entry.dev, "err": e.to_string()}),
                );
                Some(entry)
            }
        }
    }

    fn delete(&self, vpc: &VpcId, entry: &Owned, route: &RouteSpec) -> Result<(), RouteError> {
        self.nl
            .delete_route(route)
            .map_err(net("delete a stale termination route"))?;
        log::info(
            "GC: removed a termination route whose routing domain is gone",
            json!({"vpc": vpc.raw(), "dst": entry.dst, "table": entry.table, "dev": entry.dev,
                   "gateway": entry.gateway}),
        );
        Ok(())
    }
}

fn index_of(links: &[Link], name: &str) -> Option<u32> {
    links.iter().find(|l| l.name == name).map(|l| l.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: u32 = 7;

    fn entry(table: u32) -> Owned {
        Owned {
            dst: "198.51.100.0/24".parse().unwrap(),
            table,
            dev: "G00000000A001H".into(),
            gateway: Some("10.66.0.2".parse().unwrap()),
            onlink: false,
            network: "n".into(),
            container_id: "c".into(),
            ifname: "eth0".into(),
        }
    }

    fn route(table: u32, dev: u32) -> RouteSpec {
        let mut spec = RouteSpec::device("198.51.100.0/24".parse().unwrap(), table, dev);
        spec.gateway = Some("10.66.0.2".parse().unwrap());
        spec.scope_link = false;
        spec
    }

    #[test]
    fn live_domains_keep_their_routes() {
        assert_eq!(
            fate(&entry(1000), Some(1000), Some(DEV), &[route(1000, DEV)]),
            Fate::Keep
        );
    }

    #[test]
    fn a_gone_or_moved_domain_deletes_exactly_the_recorded_route() {
        let installed = route(1000, DEV);
        for domain_table in [None, Some(1001)] {
            assert_eq!(
                fate(
                    &entry(1000),
                    domain_table,
                    Some(DEV),
                    std::slice::from_ref(&installed)
                ),
                Fate::Delete(installed.clone()),
                "{domain_table:?}"
            );
        }
    }

    #[test]
    fn routes_that_are_not_exactly_ours_are_never_deleted() {
        // Another VPC reusing table 1000 routes the same prefix through its own interface.
        let theirs = route(1000, DEV + 1);
        assert_eq!(fate(&entry(1000), None, Some(DEV), &[theirs]), Fate::Forget);
        // Same device, different next hop.
        let mut other_gw = route(1000, DEV);
        other_gw.gateway = Some("10.66.0.3".parse().unwrap());
        assert_eq!(
            fate(&entry(1000), None, Some(DEV), &[other_gw]),
            Fate::Forget
        );
        // Our interface is gone: the kernel removed its routes; whatever is there is not ours.
        assert_eq!(
            fate(&entry(1000), None, None, &[route(1000, DEV)]),
            Fate::Forget
        );
    }
}
