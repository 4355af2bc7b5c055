//! CHECK: every termination, both families, against the live VPC table (the host interface's
//! routes in it when they hold every termination, the whole table to explain a difference). A termination passes
//! when a unicast route to its canonical destination goes out of the host interface with the
//! configured next hop (see `plan` for why `onlink` is not compared), and the route is recorded
//! as this plugin's (otherwise GC could not clean it up). Every failure names the route, and a
//! missing one what restores it: the VPC's next ADD on this node or GC re-installs a recorded
//! route (`converge`), also one recorded in a table the VPC no longer uses. With
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
use galactic_core::net::netlink::{Link, Netlink, RouteSpec};

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
            vpc: vpc.raw(),
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
    vpc: &'a str,
    table: u32,
    record: &'a VpcRoutes,
}

impl TableView<'_> {
    fn differences(
        &self,
        family: Family,
        terminations: &[&Termination],
    ) -> Result<Vec<String>, RouteError> {
        let routes = self.routes(family, terminations)?;
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
                State::Absent => problems.push(self.missing(&want, &shown)),
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

    /// The routes of the VPC table `differences` needs: the host interface's own when every
    /// termination is among them (a healthy attachment: as many routes as it owns, however
    /// large the table), else the whole table of the family, to name what holds a destination
    /// instead.
    fn routes(
        &self,
        family: Family,
        terminations: &[&Termination],
    ) -> Result<Vec<RouteSpec>, RouteError> {
        let own = self
            .nl
            .routes_via(family, self.table, self.host.index)
            .map_err(net("list the host interface's routes in the VPC table"))?;
        let present = |t: &&Termination| {
            let want = plan::route_for(t, self.table, self.host.index, &own);
            plan::classify(&want, &own) == State::Present
        };
        if terminations.iter().all(present) {
            return Ok(own);
        }
        self.nl
            .routes(family, self.table)
            .map_err(net("list the VPC table"))
    }

    /// A missing termination, and what restores it: a recorded route (in any table) is
    /// re-installed by convergence, one nobody recorded only by this attachment's ADD.
    fn missing(&self, want: &RouteSpec, shown: &str) -> String {
        let recorded = self
            .record
            .routes
            .iter()
            .any(|r| r.dst == want.dst && r.dev == self.host.name && r.gateway == want.gateway);
        match recorded {
            true => format!(
                "termination {shown} is missing: the next ADD of VPC {} on this node or CNI GC \
                 re-installs it",
                self.vpc
            ),
            false => format!(
                "termination {shown} is missing and not recorded: a retried ADD of this \
                 attachment installs it"
            ),
        }
    }
}
