//! What the flow's test files share: the masters' binaries, and the test kit's readers of the
//! node's state (`galactic_testkit::inspect`).

use galactic_testkit::host::Host;
pub use galactic_testkit::inspect::*;
use galactic_testkit::plugin_binary;
use galactic_testkit::runtime::Runtime;
use std::path::Path;

/// The veth master.
pub fn cni() -> &'static Path {
    plugin_binary("galactic-cni")
}

/// The host's runtime, with the veth master.
pub fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary("galactic-cni", cni())
}
