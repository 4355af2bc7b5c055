//! galactic-core's integration tests, one binary (`cargo test -p galactic-core --test it`)
//! with one module per topic (`-- prev_result_floats::` runs one). Layout and the privileged-test
//! marker: docs/testing.md.

mod prev_result_floats;
#[cfg(feature = "bpf")]
mod retable;
#[cfg(feature = "bpf")]
mod vrf_rows;
