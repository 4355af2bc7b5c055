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
//!
//! What GC reads grows with the node, not with VPCs times the node: one listing of the records
//! directory, each record once, one dump of the links, and per VPC the routes of the tables its
//! entries name (kernel-filtered dumps). A record is rewritten only when it changes.

use crate::converge;
use crate::error::{net, RouteError};
use crate::record::{FileWork, Ledger, Listing, Owned, VpcRoutes};
use galactic_core::cni::Request;
use galactic_core::ident::VpcId;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::{self, Netlink, RouteKind, RouteSpec};
use ipnetwork::IpNetwork;
use serde_json::json;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

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
/// `dev`: the index of the link named `entry.dev`, if one exists; `routes`: the kernel's routes
/// (at least those of the entry's table).
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

/// Runs GC over every VPC with a record; one VPC's failure does not stop the others. The work
/// is the node's, once: one listing of the records directory, each record read once and
/// rewritten only when it changes, one dump of the links, and the routes of the tables the
/// records name, each dumped once per VPC under the VPC's lock (the kernel filters the dump by
/// table, so this adds up to the node's routes, not VPCs times them).
pub fn gc(req: &Request) -> Result<(), RouteError> {
    let ledger = Ledger::new(&req.node.state_dir);
    let work = (FileWork::now(), netlink::received());
    let listing = ledger.listing()?;
    sweep_orphan_temporaries(&ledger, &listing);
    if listing.records.is_empty() {
        return Ok(());
    }
    let sweep = Sweep::open(req, ledger)?;
    let errors = sweep.every_vpc(&listing);
    let files = FileWork::since(work.0);
    log::info(
        "GC: route records swept",
        json!({"records": listing.records.len(), "recordsRead": files.reads,
               "recordsWritten": files.writes, "listings": files.listings,
               "netlinkMessages": netlink::received() - work.1}),
    );
    match errors.is_empty() {
        true => Ok(()),
        false => Err(RouteError::GcIncomplete(errors)),
    }
}

/// Removes the temporaries of VPCs without a record: no record visit of the sweep would
/// remove them.
fn sweep_orphan_temporaries(ledger: &Ledger, listing: &Listing) {
    let orphans: Vec<VpcId> = listing
        .temporaries
        .iter()
        .filter(|v| !listing.records.iter().any(|r| r.as_ref() == Ok(*v)))
        .cloned()
        .collect();
    ledger.sweep_listed_temp(&orphans);
}

/// The attachments of this network the runtime lists as live (container id, interface).
/// Unreadable or absent: no entry is known live, so every one keeps its fate.
fn listed_attachments(req: &Request) -> HashSet<(String, String)> {
    req.conf
        .valid_attachments()
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.container_id, a.ifname))
        .collect()
}

struct Sweep {
    ledger: Ledger,
    domains: Domains,
    nl: Netlink,
    /// The node's links by name, dumped once per GC.
    links: HashMap<String, u32>,
    /// The network GC runs for.
    network: String,
    /// The attachments the runtime lists as live for it (container id, interface), looked up
    /// once per entry: a node's entries times its attachments would be quadratic.
    listed: HashSet<(String, String)>,
}

/// The routes of the tables one VPC's sweep looks at, each dumped once, under the VPC's lock
/// (an ADD of the VPC, which changes them, cannot interleave).
#[derive(Default)]
struct Tables(HashMap<(Family, u32), Table>);

/// One family of one table: its routes and their destinations.
struct Table {
    routes: Vec<RouteSpec>,
    routed: HashSet<IpNetwork>,
}

impl Tables {
    fn of(&mut self, nl: &Netlink, family: Family, table: u32) -> Result<&Table, RouteError> {
        let found = match self.0.entry((family, table)) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => {
                let routes = nl
                    .routes(family, table)
                    .map_err(net("list a table's routes"))?;
                let routed = converge::destinations(table, &routes);
                slot.insert(Table { routes, routed })
            }
        };
        Ok(found)
    }
}

impl Sweep {
    /// What the sweep of every VPC shares, read once: the host's netlink socket, the node's
    /// links by name and the attachments the runtime lists.
    fn open(req: &Request, ledger: Ledger) -> Result<Self, RouteError> {
        let nl = Netlink::current().map_err(net("open the host netlink socket"))?;
        let links = nl
            .links()
            .map_err(net("list links"))?
            .into_iter()
            .map(|l| (l.name, l.index))
            .collect();
        Ok(Self {
            ledger,
            domains: Domains::new(&req.node.state_dir),
            nl,
            links,
            network: req.conf.name.clone(),
            listed: listed_attachments(req),
        })
    }

    /// Sweeps every VPC of `listing`, one VPC's failure not stopping the others; what failed,
    /// by VPC (or unreadable record).
    fn every_vpc(&self, listing: &Listing) -> Vec<String> {
        let mut errors = Vec::new();
        for vpc in &listing.records {
            match vpc {
                Ok(vpc) => {
                    let temporaries = listing.temporaries.contains(vpc);
                    if let Err(e) = self.vpc(vpc, temporaries) {
                        errors.push(format!("VPC {vpc}: {e}"));
                    }
                }
                Err(e) => errors.push(format!("unreadable route record {e}")),
            }
        }
        errors
    }

    /// Sweeps one VPC's record under its lock (an ADD of the VPC cannot interleave); the record
    /// is rewritten only when an entry changed or went. `temporaries`: the listing found some
    /// of the VPC's.
    fn vpc(&self, vpc: &VpcId, temporaries: bool) -> Result<(), RouteError> {
        let _lock = self.ledger.lock(vpc)?;
        if temporaries {
            self.ledger.remove_stale_temp(vpc);
        }
        let record = self.ledger.get(vpc)?;
        if record.routes.is_empty() {
            return Ok(());
        }
        let domain_table = self
            .domains
            .get(vpc)
            .map_err(net("read the VPC's routing domain"))?
            .map(|d| d.table);
        let mut tables = Tables::default();
        let mut keep = Vec::new();
        for entry in &record.routes {
            let family = Family::of_net(entry.dst);
            let dev = self.dev(&entry.dev);
            if let (true, Some(table)) = (self.is_listed(entry), domain_table) {
                let current = tables.of(&self.nl, family, table)?;
                keep.extend(self.converge(vpc, entry.clone(), table, dev, current));
                continue;
            }
            let recorded = tables.of(&self.nl, family, entry.table)?;
            match fate(entry, domain_table, dev, &recorded.routes) {
                Fate::Keep => keep.push(entry.clone()),
                Fate::Forget => {}
                Fate::Delete(route) => self.delete(vpc, entry, &route)?,
            }
        }
        let kept = converge::rerecord(
            &VpcRoutes {
                vpc: record.vpc.clone(),
                routes: keep,
            },
            &[],
        );
        if kept == record {
            return Ok(());
        }
        self.ledger.put(vpc, &kept)
    }

    /// The index of the link named `name`: from the GC's dump, or looked up again when the dump
    /// has none (the link may have been created since, by an ADD whose entry is read now).
    fn dev(&self, name: &str) -> Option<u32> {
        self.links
            .get(name)
            .copied()
            .or_else(|| self.nl.link(name).ok().flatten().map(|l| l.index))
    }

    /// Whether the runtime lists the attachment that installed `entry` as live.
    fn is_listed(&self, entry: &Owned) -> bool {
        // The key is built per entry; the set is the node's attachments.
        entry.network == self.network
            && self
                .listed
                .contains(&(entry.container_id.clone(), entry.ifname.clone()))
    }

    /// A live attachment's entry converged into the VPC's current `table`, whose routes of the
    /// entry's family are `in_table`: the entry to keep (re-recorded when it moved), `None` when its host interface
    /// is gone. A repair that fails keeps the entry as it was, for the next ADD of the VPC or GC.
    fn converge(
        &self,
        vpc: &VpcId,
        entry: Owned,
        table: u32,
        dev: Option<u32>,
        in_table: &Table,
    ) -> Option<Owned> {
        dev?;
        if !converge::needs_repair(&entry, table, &in_table.routed) {
            return Some(entry);
        }
        let Some(fix) = converge::repair(&entry, table, dev, &in_table.routes) else {
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
