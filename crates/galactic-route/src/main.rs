//! `galactic-route`: a chained CNI plugin that installs an attachment's *termination* routes in
//! its VPC's routing table. A termination is a network the VPC reaches through this attachment
//! (a router, VPN or NAT pod or VM): `{"network": CIDR, "via"?: IP}` becomes a route to the
//! network in the VPC table out of the attachment's host interface `G{vpc:9}{att:3}H`, through the
//! next hop when `via` is given. It must follow a master plugin (`galactic-cni` or
//! `galactic-tap-cni`), which creates the routing domain and the host interface; it passes the
//! master's result (`prevResult`) on unchanged.
//!
//! - ADD ([`add`]): idempotent (a retry finds its routes and changes nothing), never overwrites a
//!   route it did not install (a conflict is code 7), and on failure removes only what it added.
//! - CHECK ([`check`]): every termination of both families, compared canonically.
//! - DEL: leaves the routes. They are VPC-wide routing state: every attachment of the VPC on the
//!   node sends its traffic for the terminated network through them, so they are not private to
//!   the container whose chain is being torn down, and DEL only releases what is private. Nor can
//!   they outlive what they point at: each goes out of this attachment's host interface, and when
//!   the master's DEL (next in the reversed chain) deletes that interface, the kernel removes every
//!   route through it at the same instant. Deleting them here first would change nothing but
//!   the order, and would make DEL depend on a configuration that may have been edited since ADD.
//!   DEL therefore parses nothing and never fails.
//! - GC ([`gc`]): removes recorded routes whose routing domain no longer exists.
//! - STATUS: ready when netlink works and the state directory is writable.
//!
//! The binary uses `galactic-core` with its `net` feature only: no Kubernetes client.

mod add;
mod chain;
mod check;
mod conf;
mod error;
mod gc;
mod plan;
mod record;

use error::RouteError;
use galactic_core::cni::{run, CniResult, Plugin, Request};
use galactic_core::log;
use serde_json::json;
use std::process::ExitCode;

/// The plugin.
struct Route;

impl Plugin for Route {
    type Error = RouteError;

    fn name(&self) -> &'static str {
        galactic_core::plugins::ROUTE
    }

    fn add(&self, req: &Request) -> Result<CniResult, RouteError> {
        add::add(req)
    }

    fn del(&self, _req: &Request) -> Result<(), RouteError> {
        log::info(
            "DEL: termination routes stay (VPC-wide; removed with the host interface by the master's DEL, or by GC)",
            json!({}),
        );
        Ok(())
    }

    fn check(&self, req: &Request) -> Result<(), RouteError> {
        check::check(req)
    }

    /// Ready when netlink answers and the state directory takes a file (ADD records its
    /// routes there).
    fn status(&self, req: &Request) -> Result<(), RouteError> {
        Ok(galactic_core::net::readiness(&req.node.state_dir)?)
    }

    fn gc(&self, req: &Request) -> Result<(), RouteError> {
        gc::gc(req)
    }
}

fn main() -> ExitCode {
    run(&Route)
}
