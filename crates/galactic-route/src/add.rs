//! ADD: validate → find the VPC table and the host interface → read the VPC table (one dump per
//! family this attachment or the VPC's record needs) → plan every termination against it (any
//! conflict stops here, before anything changes) → record the routes about to be installed →
//! install the missing ones → converge the rest of the VPC's record (`converge`: routes removed
//! behind our back re-installed, routes of an old table moved) → pass `prevResult` on.
//!
//! A retried ADD finds its routes present and changes nothing. Routes are created with
//! `NLM_F_EXCL`, so even a route that appears between planning and installing (another plugin
//! writing the same table) is never overwritten. On failure the rollback removes only the routes
//! this call installed and the record entries this call added. Convergence runs after this
//! attachment's own routes are in place and never fails the ADD: it repairs other attachments'
//! routes, and what it could not repair is logged and left to the next ADD of the VPC or GC.

use crate::chain::Target;
use crate::converge;
use crate::error::{net, RouteError};
use crate::plan::{self, State};
use crate::record::{Ledger, Owned, VpcRoutes};
use galactic_core::cni::{CniResult, Request};
use galactic_core::failpoint;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::{Link, Netlink, RouteSpec};
use galactic_core::rollback::Rollback;
use ipnetwork::IpNetwork;
use serde_json::json;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashSet};

/// The VPC table's routes, per family: read once per ADD and shared by its plan and the
/// convergence.
type Tables = BTreeMap<Family, Vec<RouteSpec>>;

/// Everything one ADD works with, borrowed by the undo closures.
struct Add<'a> {
    req: &'a Request,
    target: Target,
    table: u32,
    host: Link,
    nl: Netlink,
    ledger: Ledger,
}

/// Runs ADD and returns `prevResult` unchanged.
pub fn add(req: &Request) -> Result<CniResult, RouteError> {
    let target = Target::from_request(req)?;
    let domain = Domains::new(&req.node.state_dir)
        .get(&target.conf.vpc)
        .map_err(net("read the VPC's routing domain"))?
        .ok_or_else(|| RouteError::NoDomain {
            vpc: target.conf.vpc.raw().to_owned(),
        })?;
    let nl = Netlink::current().map_err(net("open the host netlink socket"))?;
    let host = nl
        .link(&target.host_ifname)
        .map_err(net("look up the host interface"))?
        .ok_or_else(|| RouteError::NoHostInterface {
            name: target.host_ifname.clone(),
        })?;
    log::info(
        "ADD: installing termination routes",
        json!({"terminations": target.conf.terminations.len(), "table": domain.table,
               "hostIfname": target.host_ifname}),
    );
    let add = Add {
        req,
        target,
        table: domain.table,
        host,
        nl,
        ledger: Ledger::new(&req.node.state_dir),
    };
    add.run()?;
    Ok(add.target.prev)
}

impl<'a> Add<'a> {
    fn run(&'a self) -> Result<(), RouteError> {
        // Held until the rollback below has run: GC and other ADDs of the VPC wait.
        let _lock = self.ledger.lock(&self.target.conf.vpc)?;
        // Read once: the plan, the intent log and the convergence all work on this copy, which
        // only this ADD changes while it holds the lock.
        let mut record = self.ledger.get(&self.target.conf.vpc)?;
        let tables = self.read_tables(&record)?;
        let planned = self.plan(&tables)?;
        let mut rb = Rollback::new();
        match self.apply(&planned, &mut record, &mut rb) {
            Ok(()) => rb.commit(),
            Err(e) => return Err(rb.unwind(e)),
        }
        self.converge(&record, &tables);
        Ok(())
    }

    /// The VPC table's routes of every family this ADD's terminations or the record's other
    /// entries have, one dump each.
    fn read_tables(&self, record: &VpcRoutes) -> Result<Tables, RouteError> {
        let mut families: Vec<Family> = plan::by_family(&self.target.conf.terminations)
            .into_iter()
            .map(|(family, _)| family)
            .collect();
        families.extend(
            record
                .routes
                .iter()
                .filter(|e| !self.planned_here(e))
                .map(|e| Family::of_net(e.dst)),
        );
        let mut tables = Tables::new();
        for family in families {
            if let Entry::Vacant(slot) = tables.entry(family) {
                let routes = self
                    .nl
                    .routes(family, self.table)
                    .map_err(net("list the VPC table"))?;
                slot.insert(routes);
            }
        }
        Ok(tables)
    }

    /// Whether `entry` is one this ADD plans itself: this attachment's, in the current table.
    fn planned_here(&self, entry: &Owned) -> bool {
        entry.dev == self.host.name && entry.table == self.table
    }

    /// Each termination's route and its state in the table; the first conflict is an error.
    fn plan(&self, tables: &Tables) -> Result<Vec<(RouteSpec, State)>, RouteError> {
        let mut planned = Vec::new();
        for (family, terminations) in plan::by_family(&self.target.conf.terminations) {
            let table = tables.get(&family).map_or(&[][..], Vec::as_slice);
            for t in terminations {
                let spec = plan::route_for(t, self.table, self.host.index, table);
                let state = plan::classify(&spec, table);
                if let State::Conflict(existing) = &state {
                    return Err(self.conflict(&spec, existing));
                }
                planned.push((spec, state));
            }
        }
        Ok(planned)
    }

    /// Converges the VPC's other recorded entries into the current table (module comment);
    /// failures are logged, never this ADD's.
    fn converge(&self, record: &VpcRoutes, tables: &Tables) {
        let vpc = &self.target.conf.vpc;
        let repaired = self.repair_entries(record, tables);
        let result = match repaired.is_empty() {
            true => Ok(0),
            false => self
                .ledger
                .put(vpc, &converge::rerecord(record, &repaired))
                .map(|()| repaired.len()),
        };
        match result {
            Ok(0) => {}
            Ok(n) => log::info("ADD: VPC routes converged", json!({"entries": n})),
            Err(e) => log::warn(
                "ADD: could not converge the VPC's recorded routes; the next ADD of the VPC or GC retries",
                json!({"err": e.to_string()}),
            ),
        }
    }

    /// Repairs every entry that needs it (looking up each device once); the repaired entries
    /// by their index in `record`.
    fn repair_entries(&self, record: &VpcRoutes, tables: &Tables) -> Vec<(usize, Owned)> {
        let mut devs: BTreeMap<String, Option<u32>> = BTreeMap::new();
        let mut repaired = Vec::new();
        // Both families' destinations in one set: an IPv4 and an IPv6 network never compare
        // equal.
        let routed: HashSet<IpNetwork> = tables
            .values()
            .flat_map(|routes| converge::destinations(self.table, routes))
            .collect();
        for (i, entry) in record.routes.iter().enumerate() {
            if self.planned_here(entry) || !converge::needs_repair(entry, self.table, &routed) {
                continue;
            }
            let table = tables
                .get(&Family::of_net(entry.dst))
                .map_or(&[][..], Vec::as_slice);
            let dev = *devs
                .entry(entry.dev.clone())
                .or_insert_with(|| self.nl.link(&entry.dev).ok().flatten().map(|l| l.index));
            let Some(fix) = converge::repair(entry, self.table, dev, table) else {
                continue;
            };
            match converge::apply(&self.nl, self.target.conf.vpc.raw(), &fix) {
                Ok(()) => repaired.push((i, fix.entry)),
                Err(e) => log::warn(
                    "ADD: could not converge a recorded termination route",
                    json!({"dst": entry.dst, "dev": entry.dev, "err": e.to_string()}),
                ),
            }
        }
        repaired
    }

    fn apply(
        &'a self,
        planned: &[(RouteSpec, State)],
        record: &mut VpcRoutes,
        rb: &mut Rollback<'a>,
    ) -> Result<(), RouteError> {
        let entries: Vec<Owned> = planned.iter().map(|(s, _)| self.owned(s)).collect();
        let vpc = &self.target.conf.vpc;
        let added = self.ledger.add_to(vpc, record, &entries)?;
        if !added.is_empty() {
            rb.push("route record entries", move || {
                self.ledger.remove(vpc, &added)
            });
        }
        failpoint::hit("after-route-record")?;
        let mut installed = 0;
        for (spec, _) in planned.iter().filter(|(_, s)| *s == State::Absent) {
            if self.install(spec)? {
                let spec = spec.clone();
                rb.push(format!("route {}", spec.dst), move || {
                    self.nl.delete_route(&spec)
                });
                installed += 1;
                failpoint::hit(&format!("after-route-{installed}"))?;
            }
        }
        log::debug(
            "ADD: termination routes in place",
            json!({"installed": installed, "present": planned.len() - installed}),
        );
        Ok(())
    }

    /// Installs `spec` exclusively. `Ok(false)` when an equal route appeared meanwhile (not ours
    /// to undo); a different one is a conflict.
    fn install(&self, spec: &RouteSpec) -> Result<bool, RouteError> {
        match self.nl.add_route(spec) {
            Ok(()) => Ok(true),
            Err(e) if e.is_exists() => {
                let table = self
                    .nl
                    .routes(Family::of_net(spec.dst), self.table)
                    .map_err(net("list the VPC table"))?;
                match plan::classify(spec, &table) {
                    State::Present => Ok(false),
                    State::Conflict(existing) => Err(self.conflict(spec, &existing)),
                    State::Absent => Err(RouteError::Install {
                        route: self.describe(spec),
                        source: e,
                    }),
                }
            }
            Err(source) => Err(RouteError::Install {
                route: self.describe(spec),
                source,
            }),
        }
    }

    fn owned(&self, spec: &RouteSpec) -> Owned {
        let env = &self.req.env;
        Owned {
            dst: spec.dst,
            table: spec.table,
            dev: self.host.name.clone(),
            gateway: spec.gateway,
            onlink: spec.onlink,
            network: self.req.conf.name.clone(),
            container_id: env
                .container_id
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            ifname: env
                .ifname
                .as_ref()
                .map(|i| i.to_string())
                .unwrap_or_default(),
        }
    }

    fn conflict(&self, spec: &RouteSpec, existing: &[RouteSpec]) -> RouteError {
        RouteError::Conflict {
            route: self.describe(spec),
            existing: existing
                .iter()
                .map(|r| self.describe(r))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    fn describe(&self, spec: &RouteSpec) -> String {
        plan::describe(spec, &|index| device_name(&self.nl, &self.host, index))
    }
}

/// A device's name for messages (`#<index>` when it cannot be found).
pub fn device_name(nl: &Netlink, host: &Link, index: u32) -> String {
    if index == host.index {
        return host.name.clone();
    }
    nl.links()
        .ok()
        .and_then(|links| links.into_iter().find(|l| l.index == index))
        .map_or_else(|| format!("#{index}"), |l| l.name)
}
