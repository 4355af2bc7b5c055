//! The netlink layer against real kernel objects in throwaway namespaces, by subject: the
//! kernel objects it writes and reads (`objects`), the firewall and the VPC-mark map
//! (`firewall`), and the reads the kernel filters (`filtered`).

mod filtered;
mod firewall;
mod objects;

use super::netlink::Netlink;
use super::netns::Netns;
use galactic_testns::privileged::TestNetns;

fn open(ns: &TestNetns) -> (Netns, Netlink) {
    let netns = Netns::open(&ns.path()).unwrap();
    let nl = Netlink::in_netns(&netns).unwrap();
    (netns, nl)
}
