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
//! - DEL ([`del`]): removes this attachment's record entries (found by what ADD recorded for this
//!   container, so an edited configuration still cleans up); the routes go with the host
//!   interface in the master's DEL. The per-VPC record holds only live attachments' entries. A
//!   record it cannot rewrite (full disk) or a busy lock is code 11; nothing else fails a DEL.
//! - GC ([`gc`]): removes recorded routes whose routing domain no longer exists.
//! - STATUS: ready when netlink works and the state directory is writable.
//!
//! The binary uses `galactic-core` with its `net` feature only: no Kubernetes client.

mod add;
mod chain;
mod check;
mod conf;
mod converge;
#[cfg(test)]
mod cost;
mod del;
mod error;
mod gc;
mod plan;
mod record;

use error::RouteError;
use galactic_core::cni::{run, CniResult, Plugin, Request};
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

    fn del(&self, req: &Request) -> Result<(), RouteError> {
        del::del(req)
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
    galactic_core::cni::version_flag(galactic_core::plugins::ROUTE).unwrap_or_else(|| run(&Route))
}

/// musl's allocator returns freed memory to the kernel eagerly; dlmalloc keeps it for reuse
/// (decision 0071). Test and debug builds (glibc) keep the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
