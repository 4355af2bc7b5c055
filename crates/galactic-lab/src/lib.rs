//! The lab: what only `cargo xtask` runs. Benchmarks of the plugins as processes
//! ([`bench`]: the chain against the reference plugins, the IPAM against `host-local`,
//! galactic-route as its node grows, start-up cost) and the reliability campaigns
//! ([`campaign`]: crash and soak), and the tiers `cargo xtask test` runs after the native
//! suites ([`tier`]: Podman, the production kernel). It runs on the test kit's fixtures
//! (hosts, runtimes, the harness) and is never a dependency of a plugin or of a plugin's tests.

pub mod bench;
pub mod campaign;
mod stats;
pub mod tier;
