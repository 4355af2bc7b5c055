//! Pure route logic: the route each termination becomes, and how it relates to what the VPC table
//! already holds. No kernel access here, so every rule is unit-tested.
//!
//! - A termination without `via` is a link-scope device route out of the host interface.
//! - A termination with `via` is a gateway route that *also* names the host interface: the next
//!   hop lives behind this attachment, and naming the device keeps the kernel from resolving it
//!   through some other interface of the VPC (upstream left the device out).
//! - `onlink` is set exactly when the VPC table has no gateway-less route through the host
//!   interface that covers `via` (for example an attachment without IPAM, or a next hop that is not
//!   the pod's own address). The host interface is a point-to-point link whose only neighbour is
//!   the pod or VM, so "on link" is true by construction; without the flag the kernel would refuse
//!   such a route ("Nexthop has invalid gateway"). When a covering route exists, the flag is left
//!   off and the kernel validates the next hop as usual. IPv6 link-local next hops never need it.
//! - A route "matches" a termination when it is a unicast route to the same canonical destination
//!   with the same device and gateway; `onlink` is not compared, because whether it was needed
//!   depends on the table at the time of the ADD, not on where packets go.

use crate::conf::Termination;
use galactic_core::ip::Family;
use galactic_core::net::netlink::{RouteKind, RouteSpec};
use std::net::IpAddr;

/// The route for `t` in `table` out of the host interface `dev`, given the table's routes.
/// The terminations of each family that has any, IPv6 first (each family's table is read once).
pub fn by_family(terminations: &[Termination]) -> Vec<(Family, Vec<&Termination>)> {
    Family::ALL
        .into_iter()
        .map(|family| {
            let of_family = terminations
                .iter()
                .filter(|t| Family::of_net(t.network) == family)
                .collect::<Vec<_>>();
            (family, of_family)
        })
        .filter(|(_, of_family)| !of_family.is_empty())
        .collect()
}

pub fn route_for(t: &Termination, table: u32, dev: u32, table_routes: &[RouteSpec]) -> RouteSpec {
    let mut spec = RouteSpec::device(t.network, table, dev);
    if let Some(via) = t.via {
        spec.gateway = Some(via);
        spec.scope_link = false;
        spec.onlink = !reachable_on_link(via, dev, table_routes);
    }
    spec
}

/// Whether the kernel can validate `gw` as a next hop out of `dev` without `onlink`: it is
/// IPv6 link-local, or a gateway-less unicast route through `dev` in the table covers it.
pub fn reachable_on_link(gw: IpAddr, dev: u32, table_routes: &[RouteSpec]) -> bool {
    if let IpAddr::V6(v6) = gw {
        // fe80::/10: the kernel accepts a link-local gateway on any named device.
        if v6.segments()[0] & 0xffc0 == 0xfe80 {
            return true;
        }
    }
    table_routes.iter().any(|r| {
        r.kind == RouteKind::Unicast
            && r.gateway.is_none()
            && r.dev == Some(dev)
            && r.dst.is_ipv6() == gw.is_ipv6()
            && r.dst.contains(gw)
            // IPv4 looks the gateway up with at least link scope; IPv6 has no route scopes.
            && (gw.is_ipv6() || r.scope_link)
    })
}

/// How a wanted route relates to the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// An equal route is installed (a retried ADD, or a previous one).
    Present,
    /// Nothing routes the destination in this table.
    Absent,
    /// Other routes to the same destination are in the table; they are never overwritten.
    Conflict(Vec<RouteSpec>),
}

/// Whether `route` goes where `want` says (see the module doc: `onlink` is not compared).
pub fn matches(route: &RouteSpec, want: &RouteSpec) -> bool {
    route.table == want.table
        && route.dst == want.dst
        && route.kind == RouteKind::Unicast
        && route.dev == want.dev
        && route.gateway == want.gateway
}

/// Classifies `want` against the routes of its table.
pub fn classify(want: &RouteSpec, table_routes: &[RouteSpec]) -> State {
    let same_dst: Vec<&RouteSpec> = table_routes
        .iter()
        .filter(|r| r.table == want.table && r.dst == want.dst)
        .collect();
    if same_dst.iter().any(|r| matches(r, want)) {
        State::Present
    } else if same_dst.is_empty() {
        State::Absent
    } else {
        State::Conflict(same_dst.into_iter().cloned().collect())
    }
}

/// `198.51.100.0/24 via 10.66.0.2 dev G00000000A001H table 1000`, naming devices by `name_of`.
pub fn describe(route: &RouteSpec, name_of: &dyn Fn(u32) -> String) -> String {
    let mut text = match route.kind {
        RouteKind::Unicast => route.dst.to_string(),
        RouteKind::Local => format!("local {}", route.dst),
        RouteKind::Unreachable => format!("unreachable {}", route.dst),
    };
    if let Some(gw) = route.gateway {
        text += &format!(" via {gw}");
    }
    if let Some(dev) = route.dev {
        text += &format!(" dev {}", name_of(dev));
    }
    if route.onlink {
        text += " onlink";
    }
    text + &format!(" table {}", route.table)
}

#[cfg(test)]
mod tests;
