//! The kernel's share of an attachment: creating a veth pair with its peer inside a pod
//! namespace and deleting it again, over netlink from this process (no plugin, no exec). Both
//! chains pay it on every ADD and DEL; what a chain costs beyond it is its own.

use galactic_core::net::netlink::Netlink;
use galactic_core::net::netns::Netns;
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use std::time::{Duration, Instant};

/// Wall times of the kernel operations, one sample per iteration.
#[derive(Debug, Default)]
pub struct Floor {
    /// `RTM_NEWLINK` of a veth pair, the peer created in the pod namespace.
    pub create: Vec<Duration>,
    /// `RTM_DELLINK` of the pod's end (which takes its peer with it).
    pub delete: Vec<Duration>,
}

impl Floor {
    /// One create and one delete in a fresh pod namespace (in the caller's namespace: the
    /// bench's throwaway host).
    pub fn measure_once(&mut self) -> Result<()> {
        let pod = TestNetns::new("gbench-floor");
        let ns = Netns::open(&pod.path()).map_err(kernel("open the pod namespace"))?;
        let host = Netlink::current().map_err(kernel("open netlink"))?;
        let in_pod = Netlink::in_netns(&ns).map_err(kernel("open netlink in the pod"))?;
        let started = Instant::now();
        host.create_veth("gbenchfloor0", "eth0", &ns, None)
            .map_err(kernel("create the veth pair"))?;
        self.create.push(started.elapsed());
        // As the masters' DEL does it: look the pod's end up by name, delete it.
        let started = Instant::now();
        in_pod
            .delete_link("eth0")
            .map_err(kernel("delete the veth pair"))?;
        self.delete.push(started.elapsed());
        Ok(())
    }
}

fn kernel(what: &'static str) -> impl FnOnce(galactic_core::net::NetError) -> Error {
    move |source| Error::Kernel { what, source }
}
