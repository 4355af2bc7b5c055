//! Convergence: the VPC's recorded termination routes brought back into the VPC's *current*
//! table. A recorded route can go missing behind the plugin's back (an operator's `ip route
//! del`, a router's GC), or be left in a table the VPC no longer routes through (a VRF re-bound
//! to another table: the domain record's `table` changed). Nothing else restores either, so
//! every ADD of any attachment of the VPC converges the VPC's record (under the VPC's ledger
//! lock), and GC does the same for the attachments the runtime lists.
//!
//! Per entry (pure: [`needs_repair`], [`repair`]):
//! - its table is the current one and the table routes its destination: nothing to do (our
//!   route, or someone else's that is never overwritten). The steady state costs nothing beyond
//!   the table's dump, which ADD reads anyway, and one lookup per entry in its destinations;
//! - otherwise, when its host interface (recorded by name) exists: the route recorded with an
//!   old table is removed from it if it is still exactly ours there (the device belongs to the
//!   VPC, so a route out of it in a reused table is ours), the route is installed in the current
//!   table when nothing routes its destination there, and the entry is re-recorded with the
//!   current table;
//! - a host interface that is gone took its routes with it: left to GC, which forgets it.

use crate::error::{net, RouteError};
use crate::plan::{self, State};
use crate::record::{Owned, VpcRoutes};
use galactic_core::log;
use galactic_core::net::netlink::{Netlink, RouteSpec};
use ipnetwork::IpNetwork;
use serde_json::json;
use std::collections::HashSet;

/// What one entry needs to be where the record says, in the current table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The entry's route in its old table, to remove (exactly ours: destination, device,
    /// gateway); `None` when the entry is recorded with the current table.
    pub stale: Option<RouteSpec>,
    /// The route to install in the current table; `None` when it is there already, or when
    /// another route holds its destination (never overwritten).
    pub install: Option<RouteSpec>,
    /// The entry as it is recorded afterwards (the current table).
    pub entry: Owned,
}

/// The destinations `table` routes (any route, any device, any type), from its `routes`: what
/// [`needs_repair`] looks an entry up in, once per entry however large the table.
pub fn destinations(table: u32, routes: &[RouteSpec]) -> HashSet<IpNetwork> {
    routes
        .iter()
        .filter(|r| r.table == table)
        .map(|r| r.dst)
        .collect()
}

/// Whether `entry` may need a repair against `routed`, the current `table`'s destinations
/// ([`destinations`]): recorded with another table, or its destination missing. Needs no link
/// lookup.
pub fn needs_repair(entry: &Owned, table: u32, routed: &HashSet<IpNetwork>) -> bool {
    entry.table != table || !routed.contains(&entry.dst)
}

/// The repair of `entry`, whose host interface has index `dev` (`None`: gone, nothing to do),
/// into `table` whose routes are `table_routes`. `None` when nothing is to be done.
pub fn repair(
    entry: &Owned,
    table: u32,
    dev: Option<u32>,
    table_routes: &[RouteSpec],
) -> Option<Repair> {
    let dev = dev?;
    let mut want = RouteSpec::device(entry.dst, table, dev);
    if let Some(gw) = entry.gateway {
        want.gateway = Some(gw);
        want.scope_link = false;
        want.onlink = !plan::reachable_on_link(gw, dev, table_routes);
    }
    let stale = (entry.table != table).then(|| RouteSpec {
        table: entry.table,
        onlink: entry.onlink,
        ..want.clone()
    });
    let install = match plan::classify(&want, table_routes) {
        State::Absent => Some(want.clone()),
        State::Present | State::Conflict(_) => None,
    };
    if stale.is_none() && install.is_none() {
        return None;
    }
    let entry = Owned {
        table,
        onlink: want.onlink,
        ..entry.clone()
    };
    Some(Repair {
        stale,
        install,
        entry,
    })
}

/// Applies `repair`: the stale route removed (a missing one is success), the route installed
/// exclusively (one that appeared meanwhile is left alone).
pub fn apply(nl: &Netlink, vpc: &str, repair: &Repair) -> Result<(), RouteError> {
    if let Some(stale) = &repair.stale {
        nl.delete_route(stale)
            .map_err(net("remove a termination route from the VPC's old table"))?;
    }
    if let Some(install) = &repair.install {
        match nl.add_route(install) {
            Err(e) if !e.is_exists() => {
                return Err(RouteError::Install {
                    route: format!("{} table {}", install.dst, install.table),
                    source: e,
                })
            }
            _ => {}
        }
    }
    let e = &repair.entry;
    log::info(
        "termination route converged into the VPC's table",
        json!({"vpc": vpc, "dst": e.dst, "table": e.table, "dev": e.dev, "gateway": e.gateway,
               "movedFrom": repair.stale.as_ref().map(|s| s.table),
               "reinstalled": repair.install.is_some(), "containerId": e.container_id}),
    );
    Ok(())
}

/// `record` with each repaired entry replaced by its re-recorded form; an entry the record
/// already holds for the same route (a retried ADD recorded it in the current table) is not
/// listed twice.
pub fn rerecord(record: &VpcRoutes, repaired: &[(usize, Owned)]) -> VpcRoutes {
    let mut routes: Vec<Owned> = Vec::with_capacity(record.routes.len());
    for (i, entry) in record.routes.iter().enumerate() {
        let entry = repaired
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(entry, |(_, e)| e);
        match routes.iter_mut().find(|r| r.same_route(entry)) {
            // The later entry of the same route is the newer holder (Ledger::add's rule).
            Some(held) => *held = entry.clone(),
            None => routes.push(entry.clone()),
        }
    }
    VpcRoutes {
        vpc: record.vpc.clone(),
        routes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: u32 = 7;

    fn entry(table: u32, gateway: Option<&str>) -> Owned {
        Owned {
            dst: "198.51.100.0/24".parse().unwrap(),
            table,
            dev: "G00000000A001H".into(),
            gateway: gateway.map(|g| g.parse().unwrap()),
            onlink: gateway.is_some(),
            network: "n".into(),
            container_id: "c".into(),
            ifname: "eth0".into(),
        }
    }

    fn route(table: u32, dev: u32) -> RouteSpec {
        RouteSpec::device("198.51.100.0/24".parse().unwrap(), table, dev)
    }

    #[test]
    fn a_route_in_place_or_someone_elses_needs_nothing_and_no_lookup() {
        let routed = |routes: &[RouteSpec]| destinations(1000, routes);
        assert!(!needs_repair(
            &entry(1000, None),
            1000,
            &routed(&[route(1000, DEV)])
        ));
        // Another device holds the destination: never overwritten.
        assert!(!needs_repair(
            &entry(1000, None),
            1000,
            &routed(&[route(1000, DEV + 1)])
        ));
        assert_eq!(
            repair(&entry(1000, None), 1000, Some(DEV), &[route(1000, DEV + 1)]),
            None
        );
    }

    #[test]
    fn a_missing_route_is_reinstalled_when_its_interface_exists() {
        assert!(needs_repair(&entry(1000, None), 1000, &HashSet::new()));
        let fixed = repair(&entry(1000, None), 1000, Some(DEV), &[]).unwrap();
        assert_eq!(fixed.stale, None);
        assert_eq!(fixed.install, Some(route(1000, DEV)));
        assert_eq!(fixed.entry, entry(1000, None));
        assert_eq!(repair(&entry(1000, None), 1000, None, &[]), None, "gone");
    }

    #[test]
    fn an_entry_of_an_old_table_moves_to_the_current_one() {
        let old = entry(1000, Some("10.66.0.2"));
        assert!(needs_repair(
            &old,
            1001,
            &destinations(1001, &[route(1001, DEV)])
        ));
        let fixed = repair(&old, 1001, Some(DEV), &[]).unwrap();
        let stale = fixed.stale.unwrap();
        assert_eq!(
            (stale.table, stale.dev, stale.gateway),
            (1000, Some(DEV), old.gateway)
        );
        let install = fixed.install.unwrap();
        assert_eq!((install.table, install.onlink), (1001, true));
        assert_eq!(fixed.entry.table, 1001);
        // Already installed in the current table (a retried ADD): only moved in the record.
        let mut present = route(1001, DEV);
        present.gateway = old.gateway;
        present.scope_link = false;
        let fixed = repair(&old, 1001, Some(DEV), &[present]).unwrap();
        assert!(fixed.stale.is_some() && fixed.install.is_none());
    }

    #[test]
    fn rerecording_keeps_one_entry_per_route() {
        let record = VpcRoutes {
            vpc: "A".into(),
            routes: vec![entry(1000, None), entry(1001, None)],
        };
        let moved = rerecord(&record, &[(0, entry(1001, None))]);
        assert_eq!(moved.routes, vec![entry(1001, None)]);
    }
}
