//! galactic-route's integration tests, one binary (`cargo test -p galactic-route --test it`)
//! with one module per topic (`-- terminations::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

// Fixtures the test modules share (`use crate::common::...`).
mod common;

mod chain;
mod converge;
mod fuzz;
mod lifetime;
mod ownership;
mod protocol;
mod sweep;
mod terminations;
