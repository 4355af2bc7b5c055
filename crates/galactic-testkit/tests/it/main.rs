//! galactic-testkit's integration tests, one binary (`cargo test -p galactic-testkit --test it`)
//! with one module per topic (`-- runtime::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

mod apiserver;
mod crds;
mod runtime;
