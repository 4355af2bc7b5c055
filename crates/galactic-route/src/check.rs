//! CHECK: every termination, both families, against the live VPC table. A termination passes
//! when a unicast route to its canonical destination goes out of the host interface with the
//! configured next hop (see `plan` for why `onlink` is not compared), and the route is recorded
//! as this plugin's (otherwise GC could not clean it up). Every failure names the route. With
//! terminations to check, the VPC's routing domain itself is checked against its record too
//! (the VRF device and its table; table mode's closing routes and gateway rules).

use crate::add::device_name;
use crate::chain::Target;
use crate::conf::Termination;
use crate::error::{net, RouteError};
use crate::plan::{self, State};
use crate::record::{Ledger, VpcRoutes};
use galactic_core::cni::Request;
use galactic_core::ip::Family;
use galactic_core::net::domain::{self, Domains};
use galactic_core::net::netlink::{Link, Netlink};

/// Runs CHECK; `Err(CheckFailed)` lists every difference.
pub fn check(req: &Request) -> Result<(), RouteError> {
    let target = Target::from_request(req)?;
    let vpc = &target.conf.vpc;
    let Some(domain) = Domains::new(&req.node.state_dir)
        .get(vpc)
        .map_err(net("read the VPC's routing domain"))?
    else {
        return Err(RouteError::CheckFailed(vec![format!(
            "VPC {vpc} has no routing domain on this node"
        )]));
    };
    let nl = Netlink::current().map_err(net("open the host netlink socket"))?;
    let Some(host) = nl
        .link(&target.host_ifname)
        .map_err(net("look up the host interface"))?
    else {
        return Err(RouteError::CheckFailed(vec![format!(
            "host interface {} does not exist",
            target.host_ifname
        )]));
    };
    let record = Ledger::new(&req.node.state_dir).get(vpc)?;
    let mut problems = Vec::new();
    // Terminations live in the VPC table: a table no device (or rule set) routes through any
    // more is reported as such, with what restores it, not only as missing routes.
    if !target.conf.terminations.is_empty() {
        problems.extend(
            domain::problems(&nl, &domain, vpc).map_err(net("check the VPC's routing domain"))?,
        );
    }
    for (family, terminations) in plan::by_family(&target.conf.terminations) {
        let view = TableView {
            nl: &nl,
            host: &host,
            table: domain.table,
            record: &record,
        };
        problems.extend(view.differences(family, &terminations)?);
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(RouteError::CheckFailed(problems)),
    }
}

/// One family of the VPC table, as CHECK sees it.
struct TableView<'a> {
    nl: &'a Netlink,
    host: &'a Link,
    table: u32,
    record: &'a VpcRoutes,
}

impl TableView<'_> {
    fn differences(
        &self,
        family: Family,
        terminations: &[&Termination],
    ) -> Result<Vec<String>, RouteError> {
        let routes = self
            .nl
            .routes(family, self.table)
            .map_err(net("list the VPC table"))?;
        let name_of = |index| device_name(self.nl, self.host, index);
        let mut problems = Vec::new();
        for t in terminations {
            let want = plan::route_for(t, self.table, self.host.index, &routes);
            let shown = plan::describe(&want, &name_of);
            match plan::classify(&want, &routes) {
                State::Present if !self.record.owns(&want, &self.host.name) => {
                    problems.push(format!(
                        "termination {shown} is installed but not recorded as galactic-route's"
                    ))
                }
                State::Present => {}
                State::Absent => problems.push(format!("termination {shown} is missing")),
                State::Conflict(existing) => problems.push(format!(
                    "termination {shown} is missing: the table routes {} instead",
                    existing
                        .iter()
                        .map(|r| plan::describe(r, &name_of))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        Ok(problems)
    }
}
