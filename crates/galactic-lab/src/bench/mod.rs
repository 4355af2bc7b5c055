//! Benchmarks of the plugins as processes, the way a runtime runs them: the full chain against
//! the reference plugins ([`chain`]), the master's ADD and DEL with and without a VPC's routing
//! domain to create or remove ([`domain`]), the IPAM against `host-local` at several occupancies
//! ([`ipam`]), galactic-route as its VPC and node grow ([`route`]), a probe pod's verbs as the
//! node fills with live attachments and VPCs ([`fill`]), the start-up cost of every binary
//! against the spawn floor ([`startup`]), what table mode's VPC selection costs on the packet
//! path ([`rules`]), and galactic-bgp's Kubernetes publisher against an API server with a round
//! trip ([`kube`]).
//!
//! The caller builds what is measured (xtask builds static release plugins and the `rss-probe`
//! launcher, and installs the reference plugins) and passes its paths in; each bench returns
//! its figures and renders its table.

pub mod chain;
pub mod domain;
pub mod fill;
pub mod ipam;
pub mod kube;
pub mod route;
pub mod rules;
pub mod startup;

use galactic_testkit::harness::{io, Result};
use serde_json::Value;
use std::path::Path;

/// Writes `config` as the node config at `path` (benches that must not inherit the test
/// node's defaults, e.g. its debug log level or its local publisher).
fn write_node_config(path: &Path, config: &Value) -> Result<()> {
    std::fs::write(path, config.to_string()).map_err(io(format!("write {}", path.display())))
}
