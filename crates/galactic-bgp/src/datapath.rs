//! The eBPF uSID datapath registration of an attachment (upstream `registerEBPFDatapath`) and
//! its CHECK, over the pinned maps of `galactic_core::bpf`.
//!
//! Runs only when this node's BGPRouter has `srv6Locator` and `nodeID`. Order: the VPC's routing
//! table, the host interface and (when the network opted in to internet egress) its egress rows
//! are resolved first, every map is opened before the first write (a node without the
//! datapath, or without a resolvable shard SID, fails the ADD with an actionable error and no
//! partial state), then the rows are written and the pinned egress program attached. The node
//! rows (source address, public uplink) come last and fail open: a warning, never an error.

use crate::error::{BgpError, PrevResultError};
use crate::prev::{Facts, InterfaceKind};
use crate::store::local::LOCAL_LOCK_WAIT;
use galactic_core::bpf::abi::{TenantGwValue, EGRESS_KIND_TAP, EGRESS_KIND_VETH};
use galactic_core::bpf::registry::{self, AttachmentRecord, Expected, Registration};
use galactic_core::bpf::tc::{self, AttachOutcome};
use galactic_core::bpf::uplink;
use galactic_core::bpf::usid::{self, Usid};
use galactic_core::config::NodeConfig;
use galactic_core::ident::VpcId;
use galactic_core::log;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::{format_mac, Netlink};
use ipnetwork::{IpNetwork, Ipv6Network};
use serde_json::json;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

/// Where the attachment lives on this node.
struct Local {
    vrf_table_id: u32,
    host_ifindex: u32,
}

fn resolve(state_dir: &Path, vpc: &VpcId, host_ifname: &str) -> Result<Local, BgpError> {
    let domain = Domains::new(state_dir)
        .get(vpc)?
        .ok_or_else(|| BgpError::NoDomain(vpc.raw().to_owned()))?;
    let host = Netlink::current()?.require_link(host_ifname)?;
    Ok(Local {
        vrf_table_id: domain.table,
        host_ifindex: host.index,
    })
}

/// The attachment's local pass-through prefixes: its own prefixes and, as upstream's ADD and
/// its datapath repair have them, each gateway as a host prefix (the host interface's own
/// addresses, which the pod reaches directly).
fn local_prefixes(a: &Attachment<'_>) -> Result<Vec<IpNetwork>, BgpError> {
    let mut out: Vec<IpNetwork> = a
        .prefixes
        .iter()
        .map(|p| {
            p.parse()
                .map_err(|_| BgpError::from(PrevResultError::Prefix(p.clone())))
        })
        .collect::<Result<_, _>>()?;
    for gw in &a.facts.gateways {
        let host = IpNetwork::from(*gw);
        if !out.contains(&host) {
            out.push(host);
        }
    }
    Ok(out)
}

/// The `tenant_gw_table` row of the attachment, as upstream's ADD writes it: the first gateway
/// of each family (a family without one all zero); none without an IPAM result (no address).
fn tenant_gateways(f: &Facts) -> Option<TenantGwValue> {
    if f.v6.is_none() && f.v4.is_none() {
        return None;
    }
    let mut row = TenantGwValue::default();
    for gw in &f.gateways {
        match gw {
            IpAddr::V6(a) if row.gw6_be == [0; 16] => row.gw6_be = a.octets(),
            IpAddr::V4(a) if row.gw4_be == [0; 4] => row.gw4_be = a.octets(),
            _ => {}
        }
    }
    Some(row)
}

fn egress_kind(f: &Facts) -> u32 {
    match f.kind {
        InterfaceKind::Veth => EGRESS_KIND_VETH,
        InterfaceKind::Tap => EGRESS_KIND_TAP,
    }
}

/// What a registration is about.
pub struct Attachment<'a> {
    /// The node config: state directory, pin directory, filter priority, egress shard SIDs
    /// and NAT64 prefixes, eBPF interfaces.
    pub node: &'a NodeConfig,
    /// Whether the network opted in to internet egress (its stanza).
    pub internet_egress: bool,
    /// The VPC.
    pub vpc: &'a VpcId,
    /// The master's facts.
    pub facts: &'a Facts,
    /// The attachment's canonical prefixes.
    pub prefixes: &'a [String],
}

/// An opted-in VPC's egress: the prefixes its rows route (`::/0`, each NAT64 prefix) and the
/// tenant's shard SIDs (the node's, Argument set to the VRF id) in order of preference.
struct EgressPlan {
    prefixes: Vec<Ipv6Network>,
    sids: Vec<Ipv6Addr>,
}

/// `None` when the network did not opt in. Opted in on a node naming no shard is a node
/// misconfiguration the ADD reports rather than an attachment that silently has no internet.
fn egress_plan(a: &Attachment<'_>, usid: Usid) -> Result<Option<EgressPlan>, BgpError> {
    if !a.internet_egress {
        return Ok(None);
    }
    let node = &a.node.egress;
    if node.shard_sids.is_empty() {
        return Err(BgpError::NoEgressShard);
    }
    let sids = node
        .shard_sids
        .iter()
        .map(|sid| usid::with_argument(*sid, usid.argument))
        .collect::<Result<_, _>>()
        .map_err(BgpError::EgressSid)?;
    let prefixes = std::iter::once(registry::DEFAULT_ROUTE)
        .chain(node.nat64_prefixes.iter().copied())
        .collect();
    Ok(Some(EgressPlan { prefixes, sids }))
}

/// Registers the attachment (upstream §6.7 steps 6–13). Returns the record DEL removes by.
pub fn register(a: &Attachment<'_>, usid: Usid) -> Result<AttachmentRecord, BgpError> {
    let (state_dir, pin_dir) = (a.node.state_dir.as_path(), a.node.bpf_pin_dir.as_path());
    let local = resolve(state_dir, a.vpc, &a.facts.host_ifname)?;
    let prefixes = local_prefixes(a)?;
    // Resolved before anything is written: none resolvable fails the ADD with nothing changed.
    let egress: Vec<(Ipv6Network, _)> = match egress_plan(a, usid)? {
        None => Vec::new(),
        Some(plan) => {
            let value = uplink::resolve_nat66(&Netlink::current()?, &plan.sids)
                .map_err(BgpError::datapath("register the internet egress"))?;
            plan.prefixes.into_iter().map(|p| (p, value)).collect()
        }
    };
    let record = registry::register_attachment(&Registration {
        pin_dir,
        state_dir,
        usid,
        vrf_table_id: local.vrf_table_id,
        egress_kind: egress_kind(a.facts),
        host_ifname: &a.facts.host_ifname,
        host_ifindex: local.host_ifindex,
        prefixes: &prefixes,
        egress: &egress,
        gateways: tenant_gateways(a.facts),
    })
    .map_err(BgpError::datapath("register eBPF uSID datapath"))?;
    if let Err(e) = attach(pin_dir, &a.facts.host_ifname, a.node.ebpf_filter_priority) {
        // The rows just written serve no filter; take them back (the ADD fails either way).
        if let Err(undo) = registry::unregister_attachment(state_dir, &a.facts.host_ifname) {
            log::warn(
                "ADD: could not undo the eBPF registration after the attach failed; DEL or GC removes it",
                json!({"err": undo.to_string()}),
            );
        }
        return Err(e);
    }
    log::info(
        "ADD: eBPF uSID datapath registered",
        json!({"sid": usid.to_addr().to_string(), "vrfTable": local.vrf_table_id,
               "ifindex": local.host_ifindex, "prefixes": a.prefixes,
               "egress": egress.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>(),
               "egressSid": egress.first().map(|(_, v)| Ipv6Addr::from(v.sid_be).to_string()),
               "egressIfindex": egress.first().map(|(_, v)| v.link_ifindex)}),
    );
    register_node_rows(a.node, usid);
    Ok(record)
}

/// §6.7 steps 12–13: the node's SRv6 source address (its SID base, as upstream's newest ADD
/// and repair write it) and public uplink. They fail open: the datapath falls back to the
/// kernel's path without them, so a failure is a warning and each row is written when it can.
/// Both are rewritten by every ADD, as upstream's ADD does, so a changed uplink MAC or next hop
/// reaches the datapath with the next pod; the uplink at a cost independent of the node's size
/// ([`register_public_uplink`], decision 0079).
fn register_node_rows(node: &NodeConfig, usid: Usid) {
    let pin_dir = node.bpf_pin_dir.as_path();
    let base = usid.node_sid_base();
    match registry::write_node_src_addr(pin_dir, base) {
        Ok(()) => log::debug(
            "ADD: node SRv6 source address registered",
            json!({"addr": base.to_string()}),
        ),
        Err(e) => log::warn(
            "ADD: could not register this node's own SRv6 source address; egress routing will fail open until this succeeds",
            json!({"addr": base.to_string(), "err": e.to_string()}),
        ),
    }
    register_public_uplink(node);
}

/// The public uplink row of an ADD. A configured `ebpf_interfaces` is resolved by name (one
/// link request and that link's neighbours). Auto-detection reads every link and every IPv6
/// route of the node, so only the first ADD runs it and records the interface it chose
/// ([`DetectedUplink`]); later ADDs resolve that interface by name, and galactic-bgp's GC
/// detects again ([`refresh_public_uplink`]).
fn register_public_uplink(node: &NodeConfig) {
    if !node.ebpf_interfaces.is_empty() {
        write_public_uplink(node, "ADD", &node.ebpf_interfaces);
        return;
    }
    let detected = DetectedUplink::of(node);
    match detected.recorded() {
        Some(Some(interface)) => {
            write_public_uplink(node, "ADD", &[interface]);
        }
        Some(None) => log::debug(
            "ADD: no eBPF interface was detected on this node; galactic-bgp's GC detects again",
            json!({}),
        ),
        None => detected.record(write_public_uplink(node, "ADD", &[])),
    }
}

/// GC: the public uplink resolved again and rewritten on a node where an ADD registered
/// datapath rows, auto-detection included (an interface that changed its role is picked up
/// here). Fails open, as ADD's write.
pub fn refresh_public_uplink(node: &NodeConfig) {
    if !node.ebpf_datapath {
        return;
    }
    if !node.ebpf_interfaces.is_empty() {
        write_public_uplink(node, "GC", &node.ebpf_interfaces);
        return;
    }
    let detected = DetectedUplink::of(node);
    if detected.path.exists() {
        detected.record(write_public_uplink(node, "GC", &[]));
    }
}

/// `<state_dir>/bgp-attachments/uplink-detected`: the interface auto-detection chose for the
/// public uplink (a JSON string), or `null` when it found none. Written after the detection, so
/// a process killed before it leaves the next ADD to detect again.
struct DetectedUplink {
    path: std::path::PathBuf,
    /// Held by its writer (the atomic write's rule: one writer of a file at a time).
    lock: std::path::PathBuf,
}

impl DetectedUplink {
    fn of(node: &NodeConfig) -> Self {
        Self {
            path: node
                .state_dir
                .join(crate::publications::DIR)
                .join("uplink-detected"),
            lock: node.state_dir.join("locks").join("bgp-uplink"),
        }
    }

    /// What the last detection chose: `None` when none is recorded (or it cannot be read, and
    /// the caller detects again).
    fn recorded(&self) -> Option<Option<String>> {
        galactic_core::state::read_json::<Option<String>>(&self.path)
            .ok()
            .flatten()
    }

    /// Records a detection (best effort: without it the next ADD detects again).
    fn record(&self, interface: Option<String>) {
        let written = galactic_core::lockfile::acquire(&self.lock, LOCAL_LOCK_WAIT)
            .map_err(|e| e.to_string())
            .and_then(|_held| {
                galactic_core::state::write_json(&self.path, &interface).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            log::warn(
                "could not record the public uplink's detection; the next ADD detects again",
                json!({"err": e}),
            );
        }
    }
}

/// Resolves `public_uplink_table[0]` from the first of `interfaces` (auto-detected when
/// empty) and writes it; a failure is a warning of `verb`. Returns the interface it resolved
/// from, when one was found.
fn write_public_uplink(node: &NodeConfig, verb: &str, interfaces: &[String]) -> Option<String> {
    let pin_dir = node.bpf_pin_dir.as_path();
    let rows = match Netlink::current() {
        Ok(nl) => uplink::resolve_node_rows(&nl, interfaces),
        Err(e) => uplink::NodeRows {
            interface: None,
            uplink: Err(e.to_string()),
        },
    };
    let up = rows.uplink.and_then(|value| {
        registry::write_public_uplink(pin_dir, value)
            .map(|()| value)
            .map_err(|e| e.to_string())
    });
    match up {
        Ok(value) => log::debug(
            &format!("{verb}: node public uplink registered"),
            json!({"interface": rows.interface, "ifindex": value.link_ifindex,
                   "dmac": format_mac(&value.dmac), "smac": format_mac(&value.smac)}),
        ),
        Err(why) => log::warn(
            &format!("{verb}: could not register this node's own public uplink; public egress will fail open until this succeeds"),
            json!({"interface": rows.interface, "err": why}),
        ),
    }
    rows.interface
}

fn attach(pin_dir: &Path, ifname: &str, priority: u16) -> Result<(), BgpError> {
    match tc::attach_egress(pin_dir, ifname, priority)
        .map_err(BgpError::datapath("attach the uSID egress program"))?
    {
        AttachOutcome::NotPinned => log::debug(
            "ADD: no pinned usid_egress program; tc attachment skipped",
            json!({"pinDir": pin_dir.display().to_string()}),
        ),
        outcome => log::debug(
            "ADD: usid_egress attached",
            json!({
                "ifname": ifname,
                "priority": priority,
                "filter": if outcome == AttachOutcome::Replaced { "replaced" } else { "created" },
            }),
        ),
    }
    Ok(())
}

/// CHECK (upstream §6.9 step 5, plus this attachment's rows): every difference is reported.
pub fn check(a: &Attachment<'_>, usid: Usid) -> Result<(), BgpError> {
    let local = resolve(&a.node.state_dir, a.vpc, &a.facts.host_ifname)?;
    let prefixes = local_prefixes(a)?;
    let egress = egress_plan(a, usid)?;
    let problems = registry::verify(&Expected {
        pin_dir: &a.node.bpf_pin_dir,
        usid,
        vrf_table_id: local.vrf_table_id,
        host_ifindex: local.host_ifindex,
        prefixes: &prefixes,
        state_dir: &a.node.state_dir,
        egress: egress.as_ref().map(|e| registry::Egress {
            prefixes: &e.prefixes,
            sids: &e.sids,
        }),
        host_ifname: &a.facts.host_ifname,
        egress_kind: egress_kind(a.facts),
        gateways: tenant_gateways(a.facts),
    })
    .map_err(BgpError::datapath("check eBPF uSID datapath"))?;
    match problems.is_empty() {
        true => Ok(()),
        false => Err(BgpError::Check(format!(
            "eBPF uSID datapath: {}",
            problems.join("; ")
        ))),
    }
}
