//! xtask's integration tests, one binary (`cargo test -p xtask --test it`)
//! with one module per topic (`-- cli::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

mod cli;
mod stage;
