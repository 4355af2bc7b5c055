//! ADD for both masters, as four phases (each step pushes its undo right after it succeeds; a
//! failure unwinds everything, the IPAM delegate's DEL included):
//!
//! 0. Validate, before anything changes: the stanza, the delegate present, the NAD's chain, the
//!    routing domain backend; then lock and claim the attachment (a retry converges).
//! 1. [`Add::start_ipam`]: the IPAM delegate is a process of its own, started first so that it
//!    allocates while phase 2 runs (a full attachment's ADD is shorter by most of the delegate's
//!    run time). Its undo is pushed before anything else, so it runs last: it waits for the
//!    delegate if it is still running and calls its DEL unless the delegate refused, so an
//!    allocation is never left behind by a failed host step.
//! 2. [`Add::build`]: what needs no address: the attachment record (intent), the host interface
//!    and the container end (read, MAC), sysctls, forward rules; and, when the VPC's routing
//!    domain is recorded, joining it (that changes nothing node-wide).
//! 3. [`Add::addresses`]: the delegate's answer; then, for a VPC's first attachment, the routing
//!    domain created or adopted ([`routing`]) and joined: an ADD the delegate refuses leaves the
//!    node as it found it.
//! 4. [`Add::configure`]: the container end's addresses and routes, the VPC gateways in the
//!    domain, the host gateway (gateway address, pod route in the VPC table, permanent
//!    neighbour); [`Add::publish`]: the kind's own node state for other components (a tap's
//!    Kata DAN file and router-advertisement record); [`Add::complete`]: the record made live,
//!    with what its host side holds; then the result.
//!
//! The record is written in stage `adding` (phase 2) and made `live` last: only then does the
//! VPC's convergence (`converge.rs`), which joining the domain runs for the VPC's other
//! attachments under the VPC's lock, restore this attachment's host side too.

mod ipam;
mod routing;

use super::conf::MasterConf;
use super::mac::{self, Mac};
use super::nad::Nad;
use crate::delegate::{self, Delegate};
use crate::device::{Attached, Device, NewInterface};
use crate::error::MasterError;
use crate::gateway;
use galactic_core::attachment::{Address, Configured, Record, Records, Stage};
use galactic_core::cni::{CniResult, Interface, Request};
use galactic_core::failpoint;
use galactic_core::ip::Assignment;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::{self, Change, Choice, Domain, Domains};
use galactic_core::net::firewall;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::netns::Netns;
use galactic_core::net::sysctl;
use galactic_core::rollback::Rollback;
use ipam::Ipam;
use serde_json::json;
use std::cell::{OnceCell, RefCell};
use std::marker::PhantomData;

/// Everything one ADD works with.
struct Add<'a, D: Device> {
    req: &'a Request,
    conf: MasterConf<D::Options>,
    /// The MAC the runtime asked for: the container end's, or the host interface's for a kind
    /// without one (a tap).
    mac: Option<Mac>,
    host_ifname: String,
    host: Netlink,
    /// The container's namespace (a kind with a container side), opened first: a runtime's
    /// bad path fails the ADD before anything is done.
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
    device: PhantomData<D>,
}

/// The attachment's interfaces once phase 2 has built them.
struct Built {
    host: Link,
    /// The container end, for a kind with a container side.
    container: Option<Link>,
    /// The routing domain, when it was recorded and so joined while the delegate ran.
    joined: Option<Domain>,
}

pub fn add<D: Device>(req: &Request) -> Result<CniResult, MasterError> {
    // A master started as someone's delegate is a chain recursing into itself: refuse before
    // anything, so no depth of nesting ever touches the node.
    if delegate::is_delegated() {
        return Err(MasterError::Delegated);
    }
    let conf = MasterConf::<D::Options>::parse(&req.conf.raw)?;
    D::validate(&req.node, &conf)?;
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
    Add::<D>::open(conf, req, nad)?.run()
}

impl<'a, D: Device> Add<'a, D> {
    fn open(
        conf: MasterConf<D::Options>,
        req: &'a Request,
        nad: Option<Nad<'a>>,
    ) -> Result<Self, MasterError> {
        let pod = match D::CONTAINER {
            Some(_) => {
                let path = req.env.netns_path()?;
                let ns = Netns::open(path).map_err(|source| MasterError::Netns {
                    path: path.clone(),
                    source,
                })?;
                Some(ns)
            }
            None => None,
        };
        Ok(Self {
            host_ifname: conf.host_ifname(),
            host: Netlink::current().map_err(MasterError::node("open the host netlink socket"))?,
            records: Records::new(&req.node.state_dir),
            domains: Domains::for_node(&req.node),
            req,
            conf,
            mac: mac::requested(&req.env.args, &req.conf.raw)?,
            pod,
            pod_nl: OnceCell::new(),
            nad,
            ipam: RefCell::new(Ipam::Idle),
            made: RefCell::new(None),
            device: PhantomData,
        })
    }

    fn run(&self) -> Result<CniResult, MasterError> {
        let record = self.conf.record(self.req, D::KIND)?;
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
        match self.phases(&record, choice, retried, &mut rb) {
            Ok(out) => {
                rb.commit();
                Ok(out)
            }
            Err(e) => Err(rb.unwind(e)),
        }
    }

    /// Phases 1 to 4 (see the module comment).
    fn phases(
        &'a self,
        record: &Record,
        choice: Choice,
        retried: bool,
        rb: &mut Rollback<'a>,
    ) -> Result<CniResult, MasterError> {
        self.start_ipam(rb)?;
        // A retried ADD converges an attachment that is there: the delegate is heard first, so
        // its refusal (a busy store, say) leaves that attachment as it is.
        let early = match retried {
            true => Some(self.ipam_result()?),
            false => None,
        };
        let built = self.build(record, choice, rb)?;
        let (assigned, domain) = self.addresses(early, choice, &built, rb)?;
        self.configure(&built, &domain, &assigned, rb)?;
        self.publish(record, &built, &assigned, rb)?;
        self.complete(record, &built, &assigned)?;
        log::debug(
            "ADD: attachment configured",
            json!({"hostIfname": self.host_ifname, "table": domain.table}),
        );
        Ok(self.result(&built, &assigned))
    }

    /// Phase 2: everything that needs no address.
    fn build(
        &'a self,
        record: &Record,
        choice: Choice,
        rb: &mut Rollback<'a>,
    ) -> Result<Built, MasterError> {
        let adding = Record {
            stage: Stage::Adding,
            ..record.clone()
        };
        self.records
            .put(&adding)
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
        let container = self.container_end()?;
        failpoint::hit("after-interface")?;

        self.host_sysctls()?;
        firewall::allow(&self.host_ifname).map_err(MasterError::node("allow forwarding"))?;
        rb.push("forward rules", move || firewall::remove(&self.host_ifname));
        failpoint::hit("after-firewall")?;

        // Joining a VPC whose domain is recorded (every attachment of it but the first) changes
        // nothing node-wide, so it runs while the delegate allocates. Creating the domain (a
        // VPC's first attachment; the node's first domain also moves the local rule and adds the
        // host-service filter) waits for the addresses, in phase 3.
        let recorded = self
            .domains
            .get(&self.conf.ids.vpc)
            .map_err(MasterError::node("read the VPC's routing domain"))?
            .is_some();
        let joined = match recorded {
            true => Some(self.join_domain(choice, &host, rb)?),
            false => None,
        };
        Ok(Built {
            host,
            container,
            joined,
        })
    }

    /// Phase 3: the delegate's addresses, and the routing domain joined if phase 2 did not.
    fn addresses(
        &'a self,
        early: Option<Vec<Assignment>>,
        choice: Choice,
        built: &Built,
        rb: &mut Rollback<'a>,
    ) -> Result<(Vec<Assignment>, Domain), MasterError> {
        let assigned = match early {
            Some(assigned) => assigned,
            None => self.ipam_result()?,
        };
        failpoint::hit("after-ipam")?;
        let domain = match &built.joined {
            Some(domain) => domain.clone(),
            None => self.join_domain(choice, &built.host, rb)?,
        };
        Ok((assigned, domain))
    }

    /// Phase 4: the addresses configured on both ends and in the VPC's domain.
    fn configure(
        &'a self,
        built: &Built,
        domain: &Domain,
        assigned: &[Assignment],
        rb: &mut Rollback<'a>,
    ) -> Result<(), MasterError> {
        if let (Some(side), Some(pod_nl), Some(end)) =
            (D::CONTAINER, self.pod_nl.get(), &built.container)
        {
            side.configure(pod_nl, end, assigned)
                .map_err(MasterError::node("configure the container interface"))?;
        }
        failpoint::hit("after-guest")?;

        self.add_gateways(assigned, rb)?;
        failpoint::hit("after-gateways")?;

        let container_mac = built.container.as_ref().and_then(|c| c.mac.as_deref());
        gateway::configure(
            &self.host,
            D::V4_GATEWAY_PREFIX,
            &built.host,
            domain.table,
            assigned,
            container_mac,
        )
        .map_err(MasterError::node("configure the host gateway"))?;
        failpoint::hit("after-host-gateway")?;
        Ok(())
    }

    /// Phase 4, last: the kind's own node state ([`Device::publish`]). Its undo is pushed
    /// first, so a write that fails halfway is removed too.
    fn publish(
        &'a self,
        record: &Record,
        built: &Built,
        assigned: &[Assignment],
        rb: &mut Rollback<'a>,
    ) -> Result<(), MasterError> {
        let owned = record.clone();
        rb.push("published state", move || {
            let failures = D::release(&self.req.node, &owned);
            match failures.is_empty() {
                true => Ok(()),
                false => Err(MasterError::Incomplete {
                    what: "remove the published state",
                    failures,
                }),
            }
        });
        let addresses: Vec<Assignment> = assigned
            .iter()
            .map(|a| Assignment {
                address: D::reported(a),
                gateway: a.gateway,
            })
            .collect();
        D::publish(&Attached {
            node: &self.req.node,
            container_id: &record.container_id,
            host: &built.host,
            addresses: &addresses,
            options: &self.conf.options,
        })?;
        failpoint::hit("after-publish")?;
        Ok(())
    }

    /// The record made live, with what the host side now holds (the VPC's convergence
    /// restores it from there). Nothing fails after it: the rollback never has to undo a
    /// record another ADD's convergence may already act on.
    fn complete(
        &self,
        record: &Record,
        built: &Built,
        assigned: &[Assignment],
    ) -> Result<(), MasterError> {
        let live = Record {
            stage: Stage::Live,
            configured: Some(Configured {
                addresses: assigned.iter().map(Address::from).collect(),
                v4_gateway_prefix: D::V4_GATEWAY_PREFIX,
                guest_mac: built.container.as_ref().and_then(|c| c.mac.clone()),
            }),
            ..record.clone()
        };
        self.records
            .put(&live)
            .map_err(MasterError::node("write the attachment record"))
    }

    /// The VPC's routing domain, created, adopted or repaired, with the host interface in it
    /// and up; then the VPC's other attachments converged on it.
    fn join_domain(
        &'a self,
        choice: Choice,
        host: &Link,
        rb: &mut Rollback<'a>,
    ) -> Result<Domain, MasterError> {
        let (domain, changed) = self.ensure_domain(choice)?;
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
        self.converge_others(&domain, changed);
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
                super::del::mark_removing(&self.records, &stale);
                let failures = super::del::teardown_host::<D>(
                    &self.req.node,
                    &self.host,
                    &self.domains,
                    &stale,
                );
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
            None => self.refuse_unrecorded(ours).map(|()| false),
        }
    }

    /// Without a record, a host interface of this name is not this ADD's to reuse: the upstream
    /// chain's attachment (its veth's peer in another pod, its tap served to another VM) or a
    /// device of someone else. Reusing it would break its owner, and this ADD's rollback would
    /// delete it; so the ADD refuses before anything changes.
    fn refuse_unrecorded(&self, ours: &Record) -> Result<(), MasterError> {
        let Some(link) = self
            .host
            .link(&self.host_ifname)
            .map_err(MasterError::node("look up the host interface"))?
        else {
            return Ok(());
        };
        self.verify_kind(&link)?;
        Err(MasterError::Unrecorded {
            name: link.name,
            attachment: ours.attachment.clone(),
            vpc: ours.vpc.clone(),
        })
    }

    fn create_host_interface(&self) -> Result<Link, MasterError> {
        if let Some(link) = self
            .host
            .link(&self.host_ifname)
            .map_err(MasterError::node("look up the host interface"))?
        {
            // Only a retried ADD gets here (`claim` refused an unrecorded interface): the
            // interface is the one its first attempt created.
            self.verify_kind(&link)?;
            return self.host_mac(link);
        }
        D::create(&NewInterface {
            host: &self.host,
            name: &self.host_ifname,
            container: self.pod_netlink()?,
            ifname: self.req.env.ifname()?.as_str(),
            mtu: self.conf.mtu,
            options: &self.conf.options,
        })?;
        let link = self
            .host
            .require_link(&self.host_ifname)
            .map_err(MasterError::node("read the host interface"))?;
        self.host_mac(link)
    }

    /// The container's namespace and a netlink socket in it (a kind with a container side), the
    /// socket opened on first use.
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

    /// A kind without a container end (a tap) carries the requested MAC on its host interface.
    fn host_mac(&self, link: Link) -> Result<Link, MasterError> {
        match (D::CONTAINER, self.mac) {
            (None, Some(mac)) => mac::apply(&self.host, &link, mac)
                .map_err(MasterError::node("set the host interface's MAC")),
            _ => Ok(link),
        }
    }

    /// An existing host interface must be of the kind this master creates.
    fn verify_kind(&self, link: &Link) -> Result<(), MasterError> {
        if link.kind.as_deref() != Some(D::LINK_KIND) {
            return Err(MasterError::ForeignDevice {
                name: link.name.clone(),
                found: link.kind.clone().unwrap_or_else(|| "kind-less".into()),
                expected: D::LINK_KIND,
            });
        }
        Ok(())
    }

    /// The host interface's sysctls ([`host_sysctls`]).
    fn host_sysctls(&self) -> Result<(), MasterError> {
        host_sysctls::<D>(&self.host_ifname)
    }

    /// The container end, with the requested MAC: read while the IPAM delegate runs, as the
    /// host gateway needs its MAC and the result its MAC and MTU, which configuring its
    /// addresses does not change.
    fn container_end(&self) -> Result<Option<Link>, MasterError> {
        let Some((_, pod_nl)) = self.pod_netlink()? else {
            return Ok(None);
        };
        let ifname = self.req.env.ifname()?.as_str();
        let end = pod_nl
            .require_link(ifname)
            .map_err(MasterError::node("find the container interface"))?;
        match self.mac {
            Some(mac) => mac::apply(pod_nl, &end, mac)
                .map(Some)
                .map_err(MasterError::node("set the container interface's MAC")),
            None => Ok(Some(end)),
        }
    }

    fn result(&self, built: &Built, assigned: &[Assignment]) -> CniResult {
        let mut interfaces = vec![Interface {
            name: built.host.name.clone(),
            mac: built.host.mac.clone(),
            mtu: Some(built.host.mtu),
            ..Default::default()
        }];
        if let Some(end) = &built.container {
            interfaces.push(Interface {
                name: end.name.clone(),
                mac: end.mac.clone(),
                mtu: Some(end.mtu),
                sandbox: self.req.env.netns.as_ref().map(|p| p.display().to_string()),
                ..Default::default()
            });
        }
        let index = interfaces.len() - 1;
        let ips = assigned
            .iter()
            .map(|a| galactic_core::cni::IpConfig {
                address: D::reported(a),
                gateway: a.gateway,
                interface: Some(index),
                extra: Default::default(),
            })
            .collect();
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
}

/// Whether the owner of a record is still there: its netns path exists.
fn owner_alive(record: &Record) -> bool {
    record
        .netns
        .as_deref()
        .is_some_and(|p| std::path::Path::new(p).exists())
}

/// Forwarding on, reverse-path filter off, and IPv6 `force_forwarding` where the kernel has
/// it (per-interface `forwarding` alone does not forward IPv6 while `all.forwarding` is 0).
/// A container end reaches its gateway through the host end, which answers for it (proxy
/// ARP/NDP, as upstream); a VM has its gateway address on the tap itself.
pub(crate) fn host_sysctls<D: Device>(name: &str) -> Result<(), MasterError> {
    let set = |family, key| {
        sysctl::set_interface(family, name, key, "1")
            .map_err(MasterError::node("set host interface sysctls"))
    };
    set(Family::V4, "forwarding")?;
    sysctl::set_interface(Family::V4, name, "rp_filter", "0")
        .map_err(MasterError::node("set host interface sysctls"))?;
    set(Family::V6, "forwarding")?;
    if D::CONTAINER.is_some() {
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
