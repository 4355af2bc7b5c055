//! `bench-route`: galactic-route's ADD, CHECK and DEL as its VPC and node grow (a fresh VPC,
//! thousands of attachments that came and went, thousands of live routes in the VPC table,
//! thousands of routes in other tables), each call a fresh release process, next to the spawn
//! floor. The harness is `galactic_lab::bench::route`; this command builds what it measures.

use anyhow::Result;
use galactic_lab::bench::route::{self, Paths, Shape};

/// `cargo xtask bench-route [--iterations N] [--size N]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ADD/CHECK/DEL rounds per row
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub iterations: usize,
    /// Historical attachments, live VPC-table routes and unrelated routes of the grown rows
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub size: usize,
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let plugins = crate::stage::build_release()?;
    let shapes = [
        Shape::Fresh,
        Shape::History(args.size),
        Shape::LiveRoutes(args.size),
        Shape::Unrelated(args.size),
    ];
    let rows = route::run(&Paths { plugins: &plugins }, &shapes, args.iterations)?;
    print!("{}", route::table(&rows, args.iterations));
    Ok(())
}
