//! ADD for both masters.
//!
//! Order: validate (stanza, delegate present, NAD chain, routing domain backend) → IPAM delegate
//! ADD started → attachment record → [the container's netlink socket opened] host interface and
//! container interface (read, MAC) → sysctls → forward rules → [a recorded routing domain
//! joined] → IPAM result → [a new routing domain created, adopted: [`routing`], and joined] →
//! guest addresses and routes → VPC gateways → host gateway.
//!
//! The IPAM delegate is a process of its own: it allocates while this one builds the
//! attachment's own interface, which needs no address (a full attachment's ADD is shorter by
//! most of the delegate's run time). Its undo is pushed before anything else, so it runs last:
//! it waits for the delegate if it is still running and then calls its DEL unless the delegate
//! refused, so an allocation is never left behind by a failed host step.

mod ipam;
mod routing;

use super::conf::MasterConf;
use super::mac::{self, Mac};
use super::nad::Nad;
use super::{gateway, guest};
use crate::error::MasterError;
use galactic_core::attachment::{Kind, Record, Records};
use galactic_core::cni::delegate::{self, Delegate};
use galactic_core::cni::{CniResult, Interface, Request};
use galactic_core::failpoint;
use galactic_core::ip::Assignment;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::{self, Change, Choice, Domain, Domains};
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;
use galactic_core::net::sysctl;
use galactic_core::net::{firewall, tap};
use galactic_core::rollback::Rollback;
use ipam::Ipam;
use serde_json::json;
use std::cell::{OnceCell, RefCell};

/// Everything one ADD works with.
struct Add<'a> {
    req: &'a Request,
    kind: Kind,
    conf: MasterConf,
    /// The MAC the runtime asked for: the container interface's (veth) or the tap's.
    mac: Option<Mac>,
    host_ifname: String,
    host: Netlink,
    /// The container's namespace (veth only), opened first: a runtime's bad path fails the ADD
    /// before anything is done.
    pod: Option<Netns>,
    /// A netlink socket in it, opened when first needed: opening one takes a thread that
    /// enters the namespace (≈ 0.25 ms), which the ADD spends while its IPAM delegate runs.
    pod_nl: OnceCell<Netlink>,
    records: Records,
    domains: Domains,
    nad: Option<Nad<'a>>,
    /// Where the IPAM delegate's ADD stands.
    ipam: RefCell<Ipam>,
    /// What this ADD did to the VPC's routing domain that its rollback must undo (created or
    /// adopted it).
    made: RefCell<Option<Change>>,
}

pub fn add(kind: Kind, req: &Request) -> Result<CniResult, MasterError> {
    // A master started as someone's delegate is a chain recursing into itself: refuse before
    // anything, so no depth of nesting ever touches the node.
    if delegate::is_delegated() {
        return Err(MasterError::Delegated);
    }
    let conf = MasterConf::parse(&req.conf.raw)?;
    if req.conf.raw.get("prevResult").is_some_and(|v| !v.is_null()) {
        return Err(MasterError::NotFirst);
    }
    // Before any state exists: a NAD without galactic-bgp would attach with no path to its VPC.
    if let Some(plugin_type) = conf.ipam_type.as_deref() {
        Delegate::new(plugin_type, &req.env.path).find()?;
    }
    let nad = Nad::of(req)?;
    if let Some(nad) = &nad {
        nad.verify_chain()?;
    }
    let add = Add::open(kind, conf, req, nad)?;
    add.run()
}

impl<'a> Add<'a> {
    fn open(
        kind: Kind,
        conf: MasterConf,
        req: &'a Request,
        nad: Option<Nad<'a>>,
    ) -> Result<Self, MasterError> {
        let pod = match kind {
            Kind::Veth => {
                let path = req.env.netns_path()?;
                let ns = Netns::open(path).map_err(|source| MasterError::Netns {
                    path: path.clone(),
                    source,
                })?;
                Some(ns)
            }
            Kind::Tap => None,
        };
        Ok(Self {
            host_ifname: conf.host_ifname(),
            host: Netlink::current().map_err(MasterError::node("open the host netlink socket"))?,
            records: Records::new(&req.node.state_dir),
            domains: Domains::new(&req.node.state_dir),
            req,
            kind,
            conf,
            mac: mac::requested(&req.env.args, &req.conf.raw)?,
            pod,
            pod_nl: OnceCell::new(),
            nad,
            ipam: RefCell::new(Ipam::Idle),
            made: RefCell::new(None),
        })
    }

    fn record(&self) -> Result<Record, MasterError> {
        Ok(Record {
            network: self.req.conf.name.clone(),
            container_id: self.req.env.container_id()?.to_string(),
            ifname: self.req.env.ifname()?.to_string(),
            netns: self.req.env.netns.as_ref().map(|p| p.display().to_string()),
            kind: self.kind,
            vpc: self.conf.ids.vpc.raw().to_owned(),
            attachment: self.conf.ids.att.raw().to_owned(),
            host_ifname: self.host_ifname.clone(),
            ipam_type: self.conf.ipam_type.clone(),
        })
    }

    fn run(&self) -> Result<CniResult, MasterError> {
        let record = self.record()?;
        // Held until the ADD (or its rollback) is over: two containers racing for one VPC
        // attachment are serialised, and the second one's claim sees the first one's record.
        let _lock = self
            .records
            .lock(&self.host_ifname)
            .map_err(MasterError::lock)?;
        // A node config whose routing domains cannot work here refuses before anything changes.
        let choice = self.choose_backend()?;
        let retried = self.claim(&record)?;
        let mut rb = Rollback::new();
        let result = self.steps(&record, choice, retried, &mut rb);
        match result {
            Ok(out) => {
                rb.commit();
                Ok(out)
            }
            Err(e) => Err(rb.unwind(e)),
        }
    }

    /// Every step, each pushing its undo onto `rb` right after it succeeds.
    fn steps(
        &'a self,
        record: &Record,
        choice: Choice,
        retried: bool,
        rb: &mut Rollback<'a>,
    ) -> Result<CniResult, MasterError> {
        // IPAM starts first and its undo goes first (so it runs last); its result is needed
        // only once the container interface is configured.
        self.start_ipam(rb)?;
        // A retried ADD converges an attachment that is there: the delegate is heard first, so
        // its refusal (a busy store, say) leaves that attachment as it is.
        let mut early = None;
        if retried {
            early = Some(self.ipam_result()?);
        }

        self.records
            .put(record)
            .map_err(MasterError::node("write the attachment record"))?;
        rb.push("attachment record", move || {
            self.records.remove(&self.host_ifname)
        });
        self.push_domain_undo(rb);
        failpoint::hit("after-record")?;

        let host = self.create_host_interface()?;
        rb.push("host interface", move || {
            self.host.delete_link(&self.host_ifname)
        });
        if let Some(nad) = &self.nad {
            nad.annotate(&self.host_ifname)?;
        }
        let guest = self.guest_interface()?;
        failpoint::hit("after-interface")?;

        self.host_sysctls()?;
        firewall::allow(&self.host_ifname).map_err(MasterError::node("allow forwarding"))?;
        rb.push("forward rules", move || firewall::remove(&self.host_ifname));
        failpoint::hit("after-firewall")?;

        // Joining a VPC whose domain is recorded (every attachment of it but the first) changes
        // nothing node-wide, so it runs while the delegate allocates. Creating the domain (a
        // VPC's first attachment; the node's first domain also moves the local rule and adds the
        // host-service filter) waits for the addresses: an ADD the IPAM delegate refuses leaves
        // the node as it found it.
        let recorded = self
            .domains
            .get(&self.conf.ids.vpc)
            .map_err(MasterError::node("read the VPC's routing domain"))?
            .is_some();
        let mut joined = None;
        if recorded {
            joined = Some(self.join_domain(choice, &host, rb)?);
        }
        let assigned = match early {
            Some(assigned) => assigned,
            None => self.ipam_result()?,
        };
        failpoint::hit("after-ipam")?;
        let domain = match joined {
            Some(domain) => domain,
            None => self.join_domain(choice, &host, rb)?,
        };

        if let (Some(pod_nl), Some(guest)) = (self.pod_nl.get(), &guest) {
            guest::configure(pod_nl, guest, &assigned)
                .map_err(MasterError::node("configure the container interface"))?;
        }
        failpoint::hit("after-guest")?;

        self.add_gateways(&assigned, rb)?;
        failpoint::hit("after-gateways")?;

        let guest_mac = guest.as_ref().and_then(|g| g.mac.as_deref());
        gateway::configure(
            &self.host,
            self.kind,
            &host,
            domain.table,
            &assigned,
            guest_mac,
        )
        .map_err(MasterError::node("configure the host gateway"))?;
        failpoint::hit("after-host-gateway")?;

        log::debug(
            "ADD: attachment configured",
            json!({"hostIfname": self.host_ifname, "table": domain.table}),
        );
        Ok(self.result(&host, guest.as_ref(), &assigned))
    }

    /// The VPC's routing domain, created, adopted or repaired, with the host interface in it
    /// and up.
    fn join_domain(
        &'a self,
        choice: Choice,
        host: &Link,
        rb: &mut Rollback<'a>,
    ) -> Result<Domain, MasterError> {
        let domain = self.ensure_domain(choice)?;
        failpoint::hit("after-domain")?;
        domain::attach(&self.host, &domain, &self.conf.ids.vpc, host)
            .map_err(MasterError::node("join the routing domain"))?;
        let attached = domain.clone();
        rb.push("routing domain membership", move || {
            domain::detach(&self.host, &attached, &self.host_ifname)
        });
        self.host
            .set_up(host.index)
            .map_err(MasterError::node("set the host interface up"))?;
        failpoint::hit("after-attach")?;
        Ok(domain)
    }

    /// Decides what to do when the host interface or its record already exists; whether this
    /// ADD is a retry for an attachment this container already has.
    fn claim(&self, ours: &Record) -> Result<bool, MasterError> {
        let existing = self
            .records
            .get(&self.host_ifname)
            .map_err(MasterError::node("read the attachment record"))?;
        match existing {
            Some(r) if r.is_for(&ours.network, &ours.container_id, &ours.ifname) => {
                log::info(
                    "ADD: retried for an existing attachment; converging",
                    json!({"hostIfname": self.host_ifname}),
                );
                Ok(true)
            }
            Some(r) if owner_alive(&r) => Err(MasterError::Claimed {
                attachment: ours.attachment.clone(),
                vpc: ours.vpc.clone(),
                netns: r.netns.clone().unwrap_or_else(|| "no netns".into()),
                holder: r.container_id,
            }),
            Some(stale) => {
                log::warn(
                    "ADD: removing a stale attachment whose namespace is gone",
                    json!({"hostIfname": self.host_ifname, "staleContainerID": stale.container_id}),
                );
                let failures = super::del::teardown_host(&self.host, &self.domains, &stale);
                if !failures.is_empty() {
                    return Err(MasterError::Incomplete {
                        what: "remove the stale attachment",
                        failures,
                    });
                }
                self.records
                    .remove(&stale.host_ifname)
                    .map_err(MasterError::node("remove the stale record"))?;
                Ok(false)
            }
            None => Ok(false),
        }
    }

    fn create_host_interface(&self) -> Result<Link, MasterError> {
        if let Some(link) = self
            .host
            .link(&self.host_ifname)
            .map_err(MasterError::node("look up the host interface"))?
        {
            self.verify_existing(&link)?;
            return self.tap_mac(link);
        }
        let name = &self.host_ifname;
        match (self.pod_netlink()?, self.kind) {
            (Some((ns, pod_nl)), Kind::Veth) => {
                let ifname = self.req.env.ifname()?.as_str();
                if pod_nl
                    .link(ifname)
                    .map_err(MasterError::node("look up the container interface"))?
                    .is_some()
                {
                    return Err(MasterError::GuestExists(ifname.to_owned()));
                }
                self.host
                    .create_veth(name, ifname, ns, self.conf.mtu)
                    .map_err(MasterError::node("create the veth pair"))?;
            }
            _ => {
                tap::create(name, &self.conf.tap).map_err(MasterError::node("create the tap"))?;
                if let Some(mtu) = self.conf.mtu {
                    let link = self
                        .host
                        .require_link(name)
                        .map_err(MasterError::node("read the tap"))?;
                    self.host
                        .set_mtu(link.index, mtu)
                        .map_err(MasterError::node("set the tap MTU"))?;
                }
            }
        }
        let link = self
            .host
            .require_link(name)
            .map_err(MasterError::node("read the host interface"))?;
        self.tap_mac(link)
    }

    /// The container's namespace and a netlink socket in it (veth), the socket opened on first use.
    fn pod_netlink(&self) -> Result<Option<(&Netns, &Netlink)>, MasterError> {
        let Some(ns) = &self.pod else {
            return Ok(None);
        };
        if let Some(nl) = self.pod_nl.get() {
            return Ok(Some((ns, nl)));
        }
        let nl = Netlink::in_netns(ns)
            .map_err(MasterError::node("open the container's netlink socket"))?;
        Ok(Some((ns, self.pod_nl.get_or_init(|| nl))))
    }

    /// The tap carries the requested MAC (a veth's goes to its container end).
    fn tap_mac(&self, link: Link) -> Result<Link, MasterError> {
        match (self.kind, self.mac) {
            (Kind::Tap, Some(mac)) => {
                mac::apply(&self.host, &link, mac).map_err(MasterError::node("set the tap's MAC"))
            }
            _ => Ok(link),
        }
    }

    /// A retried ADD finds its own interface; it must be of the right kind.
    fn verify_existing(&self, link: &Link) -> Result<(), MasterError> {
        let expected = match self.kind {
            Kind::Veth => "veth",
            Kind::Tap => "tun",
        };
        if link.kind.as_deref() != Some(expected) {
            return Err(MasterError::ForeignDevice {
                name: link.name.clone(),
                found: link.kind.clone().unwrap_or_else(|| "kind-less".into()),
                expected,
            });
        }
        Ok(())
    }

    /// Forwarding on, reverse-path filter off, proxy ARP/NDP on (as upstream), and IPv6
    /// `force_forwarding` where the kernel has it (per-interface `forwarding` alone does not
    /// forward IPv6 while `all.forwarding` is 0).
    fn host_sysctls(&self) -> Result<(), MasterError> {
        let name = &self.host_ifname;
        let set = |family, key| {
            sysctl::set_interface(family, name, key, "1")
                .map_err(MasterError::node("set host interface sysctls"))
        };
        set(Family::V4, "forwarding")?;
        sysctl::set_interface(Family::V4, name, "rp_filter", "0")
            .map_err(MasterError::node("set host interface sysctls"))?;
        set(Family::V6, "forwarding")?;
        if self.kind == Kind::Veth {
            set(Family::V4, "proxy_arp")?;
            set(Family::V6, "proxy_ndp")?;
        }
        if sysctl::interface_key_exists(Family::V6, "force_forwarding") {
            return set(Family::V6, "force_forwarding");
        }
        let all = sysctl::get_global("ipv6.conf.all.forwarding")
            .map_err(MasterError::node("read net.ipv6.conf.all.forwarding"))?;
        match all.as_str() {
            "1" => Ok(()),
            _ => Err(MasterError::Ipv6ForwardingOff),
        }
    }

    /// The container end of a veth, with the requested MAC: read while the IPAM delegate
    /// runs, as the host gateway needs its MAC and the result its MAC and MTU, which
    /// configuring its addresses does not change.
    fn guest_interface(&self) -> Result<Option<Link>, MasterError> {
        let Some((_, pod_nl)) = self.pod_netlink()? else {
            return Ok(None);
        };
        let ifname = self.req.env.ifname()?.as_str();
        let guest = pod_nl
            .require_link(ifname)
            .map_err(MasterError::node("find the container interface"))?;
        match self.mac {
            Some(mac) => mac::apply(pod_nl, &guest, mac)
                .map(Some)
                .map_err(MasterError::node("set the container interface's MAC")),
            None => Ok(Some(guest)),
        }
    }

    fn result(&self, host: &Link, guest: Option<&Link>, assigned: &[Assignment]) -> CniResult {
        let mut interfaces = vec![Interface {
            name: host.name.clone(),
            mac: host.mac.clone(),
            mtu: Some(host.mtu),
            ..Default::default()
        }];
        if let Some(guest) = guest {
            interfaces.push(Interface {
                name: guest.name.clone(),
                mac: guest.mac.clone(),
                mtu: Some(guest.mtu),
                sandbox: self.req.env.netns.as_ref().map(|p| p.display().to_string()),
                ..Default::default()
            });
        }
        let index = interfaces.len() - 1;
        let ips = assigned.iter().map(|a| self.result_ip(a, index)).collect();
        let routes = assigned
            .iter()
            .filter(|a| a.gateway.is_some())
            .map(|a| galactic_core::cni::Route::to(a.family().default_route()))
            .collect();
        CniResult {
            interfaces,
            ips,
            routes,
            ..Default::default()
        }
    }

    fn result_ip(&self, a: &Assignment, interface: usize) -> galactic_core::cni::IpConfig {
        // A VM on a tap learns its on-link IPv4 subnet (holding the gateway) from the result.
        let address = match (self.kind, a.address) {
            (Kind::Tap, ipnetwork::IpNetwork::V4(v4))
                if v4.prefix() == 32 && a.gateway.is_some() =>
            {
                ipnetwork::IpNetwork::new(v4.ip().into(), 25).unwrap_or(a.address)
            }
            _ => a.address,
        };
        galactic_core::cni::IpConfig {
            address,
            gateway: a.gateway,
            interface: Some(interface),
            extra: Default::default(),
        }
    }
}

/// Whether the owner of a record is still there: its netns path exists.
fn owner_alive(record: &Record) -> bool {
    record
        .netns
        .as_deref()
        .is_some_and(|p| std::path::Path::new(p).exists())
}
