//! The lowest layer of the test fixtures: throwaway network namespaces and the privileged-test
//! marker ([`privileged`]), private bpffs mounts and an uplink ([`bpffs`]). It depends on no crate
//! of the workspace, so galactic-core's own kernel tests use it without a dependency cycle;
//! galactic-testkit re-exports it for every other crate's tests.

pub mod bpffs;
pub mod privileged;
