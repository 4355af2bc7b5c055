//! The deployment tier's stand-in for a node the Go chain served: a pod and a VM it attached.

use crate::tier::Result;
use galactic_testkit::privileged::TestNetns;

/// A pod and a VM the Go chain attached and that live across the switch: the pod's veth host
/// end in the node's namespace under the Go chain's name, its addresses and routes as the Go
/// veth plugin sets them (the pod's /96 address and an on-link default route to the gateway;
/// the gateway as a /128 on the host end and a host route to the pod), in a namespace of its
/// own; the VM's tap with the gateway and a host route to the VM.
pub(super) struct GoPod {
    netns: TestNetns,
}

/// The Go chain's host-end name for VPC `U`, attachment `1` (`G{vpc:9}{att:3}H`).
const GO_HOST_END: &str = "G00000000U001H";
/// The Go chain's tap of a VM on attachment `2` of the same VPC.
const GO_TAP: &str = "G00000000U002H";
const GO_VM: &str = "fd20:99::200:0";
const GO_POD: &str = "fd20:99::100:0";
const GO_GATEWAY: &str = "fd20:99::1";

impl GoPod {
    /// Creates the pod and the VM as the Go chain left them.
    pub(super) fn attach(node: &TestNetns) -> Result<Self> {
        let netns = TestNetns::new("deploy-gopod");
        let pod = netns.name().to_owned();
        let on_node = [
            format!("link add {GO_HOST_END} type veth peer name eth0 netns {pod}"),
            format!("addr add {GO_GATEWAY}/128 dev {GO_HOST_END} nodad"),
            format!("link set {GO_HOST_END} up"),
            format!("route add {GO_POD}/128 dev {GO_HOST_END}"),
            // A VM's tap (its VMM holds the fd; here nobody does, so it has no carrier).
            format!("tuntap add dev {GO_TAP} mode tap"),
            format!("addr add {GO_GATEWAY}/128 dev {GO_TAP} nodad"),
            format!("link set {GO_TAP} up"),
            format!("route add {GO_VM}/128 dev {GO_TAP}"),
        ];
        let in_pod = [
            format!("addr add {GO_POD}/96 dev eth0 nodad"),
            "link set eth0 up".to_owned(),
            format!("route add default via {GO_GATEWAY} dev eth0 onlink"),
        ];
        for (ns, command) in on_node
            .iter()
            .map(|c| (node, c))
            .chain(in_pod.iter().map(|c| (&netns, c)))
        {
            let args: Vec<&str> = command.split_whitespace().collect();
            let (ok, out) = ns.try_ip(&args);
            if !ok {
                fail!("set up the Go pod (ip {command}): {out}");
            }
        }
        Ok(Self { netns })
    }

    /// Its interfaces' global addresses and its routes on both sides, as `ip` lists them (the
    /// kernel's link-local addresses and routes come and go on their own after the link is up).
    pub(super) fn state(&self, node: &TestNetns) -> Result<Vec<String>> {
        let mut state = Vec::new();
        for (ns, args) in [
            (
                node,
                &[
                    "-6",
                    "-o",
                    "addr",
                    "show",
                    "dev",
                    GO_HOST_END,
                    "scope",
                    "global",
                ][..],
            ),
            (node, &["-6", "route", "show", "dev", GO_HOST_END]),
            (
                &self.netns,
                &["-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"],
            ),
            (&self.netns, &["-6", "route", "show"]),
            (
                node,
                &["-6", "-o", "addr", "show", "dev", GO_TAP, "scope", "global"],
            ),
            (node, &["-6", "route", "show", "dev", GO_TAP]),
            (node, &["-o", "link", "show", "dev", GO_TAP]),
        ] {
            let (ok, out) = ns.try_ip(args);
            if !ok {
                fail!("read the Go pod (ip {}): {out}", args.join(" "));
            }
            let lines = out.lines().filter(|l| !l.starts_with("fe80::"));
            state.extend(lines.map(str::to_owned));
        }
        Ok(state)
    }

    pub(super) fn reaches_gateway(&self) -> Result<()> {
        let out = self
            .netns
            .exec(&["ping", "-6", "-c", "1", "-W", "2", GO_GATEWAY]);
        if !out.status.success() {
            fail!(
                "the live Go pod no longer reaches its gateway: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok(())
    }
}
