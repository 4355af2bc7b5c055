//! galactic-bgp's integration tests, one binary (`cargo test -p galactic-bgp --test it`)
//! with one module per topic (`-- datapath::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

// Fixtures the test modules share: `cluster` for the publication tests (the loopback API
// server or the local backend), `common` for the datapath tests (a node with pinned maps).
mod cluster;
mod common;

mod adopted;
mod datapath;
mod deferred_removal;
mod export;
mod fuzz;
mod installer;
mod names;
mod nat66;
mod node_identity;
mod node_reads;
mod protocol;
mod publish;
mod refusals;
mod repair;
mod requests;
mod retract;
mod teardown_orders;
mod temporaries;
