//! galactic-ipam's integration tests, one binary (`cargo test -p galactic-ipam --test it`)
//! with one module per topic (`-- lifecycle::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

// Fixtures the test modules share (`use crate::common::...`).
mod common;

mod concurrency;
mod fuzz;
mod legacy;
mod lifecycle;
mod protocol;
mod requests;
mod rollback;
mod store_api;
mod store_failures;
