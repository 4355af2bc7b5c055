//! DEL for both masters: remove everything private to the attachment, release its addresses,
//! then, when it was the VPC's last attachment on the node, the VPC's routing domain
//! (`retire.rs`). Missing things are success.
//!
//! Teardown keeps going: every step runs whatever the one before it did, each failure is
//! collected, and the IPAM release runs even when a host step failed, so a kernel hiccup never
//! costs an address. The record stays when the host side could not be removed completely, so a
//! retried DEL or GC finishes from it.
//!
//! An address is released only once it is configured nowhere. Deleting a veth is the slow part
//! of DEL (the kernel waits for an RCU grace period, ≈ 15–30 ms), so everything else runs
//! alongside it: the IPAM delegate's DEL is started first and held (it starts up, then waits
//! for its configuration on stdin), the container interface's addresses are removed, the
//! delegate is fed and releases them while the kernel deletes the interface, and the host side's
//! rules and forward rules go meanwhile. Without a container interface to unconfigure (a tap,
//! whose VM keeps its address until the tap is gone, or a namespace already gone) the delegate is
//! fed after the teardown.

use super::conf::MasterConf;
use crate::delegate::{Delegate, Held, Running};
use crate::device::Device;
use crate::error::MasterError;
use crate::retire::{self, Retired};
use galactic_core::attachment::{Record, Records};
use galactic_core::cni::{Command, Request};
use galactic_core::config::NodeConfig;
use galactic_core::failpoint;
use galactic_core::ident::VpcId;
use galactic_core::lockfile::{LockError, LockGuard};
use galactic_core::log;
use galactic_core::net::domain::{self, Domains};
use galactic_core::net::firewall;
use galactic_core::net::netlink::{LinkWatch, Netlink, Watched};
use galactic_core::net::netns::Netns;
use galactic_core::net::nftables;
use serde_json::json;

pub fn del<D: Device>(req: &Request) -> Result<(), MasterError> {
    let records = Records::new(&req.node.state_dir);
    let mut failures = Vec::new();
    // 1. The attachment, locked, then its record read again: a concurrent ADD of the same VPC
    //    attachment finishes (or rolls back) first, and what it leaves is judged afresh.
    let found = find_or_adopt::<D>(req, &records, &mut failures);
    let _lock = lock(&records, found.as_ref(), &mut failures)?;
    let record = match found {
        Some(r) => records
            .get(&r.host_ifname)
            .map_err(MasterError::node("read the attachment record"))?
            .filter(|now| now.is_for(&req.conf.name, &r.container_id, &r.ifname)),
        None => None,
    };
    // 2. The teardown, with the IPAM release fed as early as it is safe (module comment),
    //    once the record is marked as being removed: no convergence of the VPC restores any
    //    of it from then on (`converge.rs`).
    let (host_removed, release, finishing) = match &record {
        Some(record) => {
            mark_removing(&records, record);
            tear_down::<D>(req, record, &mut failures)
        }
        None => (true, None, Finishing::default()),
    };
    // 3. The release awaited; without a record it is started from the config alone.
    let released = release
        .unwrap_or_else(|| start_release::<D>(req, record.as_ref()))
        .and_then(|running| running.map_or(Ok(()), |r| Ok(r.wait().map(drop)?)));
    let released = released.map_err(|e| failures.push(e)).is_ok();
    // 4. The record goes last, and only when everything it names is gone: a retried DEL (after
    //    a full disk or a busy store) still knows which delegate holds the addresses, even when
    //    the configuration has been edited since.
    let gone = match record.as_ref() {
        Some(record) if host_removed && released => match records.remove(&record.host_ifname) {
            Ok(()) => true,
            Err(e) => {
                failures.push(MasterError::node("remove the attachment record")(e));
                false
            }
        },
        Some(_) => false,
        None => true,
    };
    // 5. The VPC's domain, once no record of the VPC is left: never a failure of the DEL.
    if gone {
        retire_domain::<D>(req, record.as_ref());
    }
    // 6. The kernel's end of the veth pair's deletion, which steps 3–5 ran alongside.
    finishing.wait();
    match failures.is_empty() {
        true => Ok(()),
        false => Err(MasterError::Incomplete {
            what: "DEL could not remove everything",
            failures,
        }),
    }
}

/// Removes the VPC's routing domain when the attachment just removed was the VPC's last one on
/// the node ([`retire::if_unused`]); the VPC is the record's, or the config's without one (a
/// repeated DEL finishes what a first one could not). A failure is logged, never returned: the
/// attachment is gone, and the next DEL of the VPC or CNI GC removes the domain.
fn retire_domain<D: Device>(req: &Request, record: Option<&Record>) {
    let vpc = match record {
        Some(r) => VpcId::parse(&r.vpc).ok(),
        None => MasterConf::<D::Options>::parse(&req.conf.raw)
            .ok()
            .map(|c| c.ids.vpc),
    };
    let Some(vpc) = vpc else { return };
    let retired = Netlink::current()
        .and_then(|host| retire::if_unused(&host, &req.node.state_dir, &vpc, None));
    match retired {
        Ok(Retired::InUse | Retired::NotRecorded) => {}
        Ok(Retired::Removed { table }) => log::info(
            "DEL: the VPC's last attachment on this node is gone; its routing domain removed",
            json!({"vpc": vpc.raw(), "table": table}),
        ),
        Ok(Retired::LeftInPlace { table, enslaved }) => log::warn(
            "DEL: forgot the routing domain of the VPC's last attachment on this node but left \
             its VRF and table: interfaces without an attachment record (another chain's pods) \
             are enslaved to it",
            json!({"vpc": vpc.raw(), "table": table, "enslaved": enslaved}),
        ),
        Err(e) => {
            let fields = json!({"vpc": vpc.raw(), "err": e.to_string()});
            let msg = "DEL: could not remove the routing domain of the VPC's last attachment on \
                       this node; the DEL succeeds, and the next DEL of the VPC or CNI GC removes it";
            // A line of its own at warn, and an event of the DEL's closing line ("DEL: done"),
            // where an operator reads what the DEL did.
            log::warn(msg, fields.clone());
            log::info(msg, fields);
        }
    }
}

/// Marks the record as being removed ([`Records::mark_removing`]). DEL goes on when it cannot
/// (a full disk): it never fails on that, and only a convergence running at that very moment
/// could then restore a rule behind it, which GC's orphan sweep removes.
pub(crate) fn mark_removing(records: &Records, record: &Record) {
    if let Err(e) = records.mark_removing(record) {
        log::warn(
            "could not mark the attachment record as being removed",
            json!({"hostIfname": record.host_ifname, "err": e.to_string()}),
        );
    }
}

/// Our record of the attachment or, without one, the upstream chain's attachment adopted
/// (decision 0061); a failure to look is collected and the DEL goes on.
fn find_or_adopt<D: Device>(
    req: &Request,
    records: &Records,
    failures: &mut Vec<MasterError>,
) -> Option<Record> {
    let found = find_record::<D>(req, records).unwrap_or_else(|e| {
        failures.push(e);
        None
    });
    found.or_else(|| {
        super::legacy::adopt::<D>(req, records, false).unwrap_or_else(|e| {
            failures.push(e);
            None
        })
    })
}

/// The attachment's lock. Busy past the bound: the runtime retries (code 11). No lock file at
/// all (a full or read-only disk): tear down anyway, nothing else can.
fn lock(
    records: &Records,
    found: Option<&Record>,
    failures: &mut Vec<MasterError>,
) -> Result<Option<LockGuard>, MasterError> {
    match found.map(|r| records.lock(&r.host_ifname)) {
        Some(Ok(lock)) => Ok(Some(lock)),
        Some(Err(e @ LockError::Timeout { .. })) => Err(MasterError::Busy(e)),
        Some(Err(e)) => {
            failures.push(MasterError::Lock(e));
            Ok(None)
        }
        None => Ok(None),
    }
}

/// Removes the attachment's interfaces and rules; returns whether the host side is gone, the
/// IPAM release, fed once the container end holds no address, and the kernel's end of the veth
/// pair's deletion.
fn tear_down<D: Device>(
    req: &Request,
    record: &Record,
    failures: &mut Vec<MasterError>,
) -> (
    bool,
    Option<Result<Option<Running>, MasterError>>,
    Finishing,
) {
    let mut held = Some(start_release_held::<D>(req, Some(record)));
    let mut release = None;
    let guest = guest_netlink::<D>(req, record);
    // Only ever armed as `:pause` (a DEL goes on whatever happens): holds the DEL here so a
    // test can tell a release that came too early from one that came after.
    let _ = failpoint::hit("del-before-unconfigure");
    // The container side is unconfigured before the delegate reads its configuration, so the
    // address is never handed out while still configured.
    if guest
        .as_ref()
        .is_some_and(|nl| unconfigure_guest(nl, record))
    {
        release = held.take().map(|h| feed(h, req));
    }
    // A tap's Kata DAN file and RA record go before the tap they name, so no reader adopts a
    // device that is being deleted.
    let mut host_failures = D::release(&req.node, record);
    let (down, finishing) = take_down(req, guest, record);
    host_failures.extend(down);
    let host_removed = host_failures.is_empty();
    failures.extend(host_failures);
    if release.is_none() {
        release = held.map(|h| feed(h, req));
    }
    (host_removed, release, finishing)
}

/// The attachment's record: by host interface when the config still parses, else by scanning.
fn find_record<D: Device>(req: &Request, records: &Records) -> Result<Option<Record>, MasterError> {
    let container = req.env.container_id()?.to_string();
    let ifname = req.env.ifname()?.to_string();
    let by_config = MasterConf::<D::Options>::parse(&req.conf.raw)
        .ok()
        .map(|c| c.host_ifname());
    let found = match by_config {
        Some(host) => records
            .get(&host)
            .map_err(MasterError::node("read the attachment record"))?,
        None => None,
    };
    match found {
        Some(r) if r.is_for(&req.conf.name, &container, &ifname) => Ok(Some(r)),
        _ => records
            .find(&req.conf.name, &container, &ifname)
            .map_err(MasterError::node("find the attachment record")),
    }
}

/// A netlink socket in the container's namespace, if the attachment has an interface there (a
/// veth: a tap master creates nothing in it) and the namespace still exists.
fn guest_netlink<D: Device>(req: &Request, record: &Record) -> Option<Netlink> {
    if D::CONTAINER.is_none() || record.kind != D::KIND {
        return None;
    }
    let ns = Netns::open(req.env.netns.as_ref()?).ok()?;
    Netlink::in_netns(&ns).ok()
}

/// Removes the container interface's addresses; whether none is left configured there.
fn unconfigure_guest(nl: &Netlink, record: &Record) -> bool {
    let flushed = nl
        .link(&record.ifname)
        .and_then(|link| link.map_or(Ok(()), |l| nl.flush_global_addresses(l.index)));
    match flushed {
        Ok(()) => true,
        Err(e) => {
            log::warn(
                "DEL: could not remove the container interface's addresses; releasing them after the interface is gone",
                json!({"err": e.to_string()}),
            );
            false
        }
    }
}

/// Deletes the container interface and the host side; the failures (none when everything is
/// gone), and the deletion's end in the kernel. The veth pair is deleted on a thread of its own
/// while this one removes the host side's rules, forward rules and eBPF registration; once the
/// deletion is announced (both ends are gone and it cannot fail any more) this one goes on and
/// the thread is left to wait for the kernel's RCU barrier ([`Finishing`]). The host interface
/// itself is deleted (or found gone with its peer) after that.
fn take_down(
    req: &Request,
    guest: Option<Netlink>,
    record: &Record,
) -> (Vec<MasterError>, Finishing) {
    // Subscribed before the deletion starts, so its announcement cannot be missed. Without one
    // (it could not be opened) the thread is joined, as when the announcement is lost.
    let watch = guest.as_ref().and_then(|_| LinkWatch::new().ok());
    let deleting = guest.map(|nl| {
        let ifname = record.ifname.clone();
        std::thread::spawn(move || remove_guest(&nl, &ifname))
    });
    // The netfilter sockets of the map element's deletion and the forward rules' close only
    // after the veth pair's teardown: closed during it, the first would hold the commit mutex
    // the teardown needs through an RCU grace period (`galactic_core::net::nftables::hold_closes`).
    let held = nftables::hold_closes();
    galactic_core::bpf::unregister_or_defer(&req.node.state_dir, &record.host_ifname);
    let host = Netlink::current();
    let mut failures = match &host {
        Ok(host) => leave_host(host, &Domains::new(&req.node.state_dir), record),
        Err(_) => Vec::new(),
    };
    // Only ever armed as `:pause`: holds the host interface in place after its rules are
    // gone, so a test can race a convergence of the VPC against it.
    let _ = failpoint::hit("del-after-leave");
    let finishing = Finishing::after_announcement(deleting, watch.as_ref(), &record.host_ifname);
    drop(held);
    match host {
        Ok(host) => failures.extend(delete_host_interface(&host, record)),
        Err(e) => failures.push(MasterError::node("open the host netlink socket")(e)),
    }
    (failures, finishing)
}

/// A veth pair's deletion whose request has not returned yet: the pair is gone from both
/// namespaces, and the deleting thread waits for the kernel to free it. Waited for before the
/// DEL answers (the process could not exit before it anyway).
#[derive(Default)]
struct Finishing(Option<std::thread::JoinHandle<()>>);

impl Finishing {
    /// Waits until `deleting` (deleting a veth pair whose host end is `host_ifname`) either
    /// finished or had its deletion announced on `watch`; in the second case the thread is
    /// returned unjoined.
    fn after_announcement(
        deleting: Option<std::thread::JoinHandle<()>>,
        watch: Option<&LinkWatch>,
        host_ifname: &str,
    ) -> Self {
        let Some(thread) = deleting else {
            return Self(None);
        };
        let announced = watch.is_some_and(|w| {
            w.wait_deleted(host_ifname, || thread.is_finished()) == Watched::Deleted
        });
        let finishing = Self(Some(thread));
        if !announced {
            finishing.wait();
            return Self(None);
        }
        finishing
    }

    /// Joins the deleting thread.
    fn wait(self) {
        if let Some(thread) = self.0 {
            // The thread only logs; a panic in it is a bug, and DEL has done its part.
            let _ = thread.join();
        }
    }
}

/// Deletes the guest interface `ifname` inside the container.
fn remove_guest(nl: &Netlink, ifname: &str) {
    if let Err(e) = nl.delete_link(ifname) {
        log::warn(
            "DEL: could not remove the container interface; its host end goes anyway",
            json!({"err": e.to_string()}),
        );
    }
}

/// Removes the kind's published state, the host interface, its forward rules and its
/// routing-domain membership. Every step runs; the failures are returned (none when everything
/// is gone).
pub fn teardown_host<D: Device>(
    node: &NodeConfig,
    host: &Netlink,
    domains: &Domains,
    record: &Record,
) -> Vec<MasterError> {
    let mut failures = D::release(node, record);
    // As in `take_down`: the element's socket closes after the interface is gone.
    let held = nftables::hold_closes();
    failures.extend(leave_host(host, domains, record));
    failures.extend(delete_host_interface(host, record));
    drop(held);
    failures
}

/// Removes the host interface's routing-domain membership and forward rules (neither needs the
/// interface: they name it). Both steps run; the failures are returned.
fn leave_host(host: &Netlink, domains: &Domains, record: &Record) -> Vec<MasterError> {
    let mut failures = Vec::new();
    // Rules first: they outlive the interface.
    if let Ok(vpc) = VpcId::parse(&record.vpc) {
        let detached = domains
            .get(&vpc)
            .and_then(|d| d.map_or(Ok(()), |d| domain::detach(host, &d, &record.host_ifname)));
        if let Err(e) = detached {
            failures.push(MasterError::node("leave the routing domain")(e));
        }
    }
    if let Err(e) = firewall::remove(&record.host_ifname) {
        failures.push(MasterError::node("remove the forward rules")(e));
    }
    failures
}

/// Deletes the host interface (a missing one is success).
fn delete_host_interface(host: &Netlink, record: &Record) -> Option<MasterError> {
    host.delete_link(&record.host_ifname)
        .err()
        .map(MasterError::node("delete the host interface"))
}

/// Starts the IPAM delegate's DEL with the caller's stdin (`None` without IPAM).
fn start_release<D: Device>(
    req: &Request,
    record: Option<&Record>,
) -> Result<Option<Running>, MasterError> {
    feed(start_release_held::<D>(req, record), req)
}

/// Starts the IPAM delegate's DEL, held: it does nothing until [`feed`] gives it the caller's
/// stdin (`None` without IPAM). The delegate comes from the config, or from the record when the
/// config no longer says.
fn start_release_held<D: Device>(
    req: &Request,
    record: Option<&Record>,
) -> Result<Option<Held>, MasterError> {
    let from_config = MasterConf::<D::Options>::parse(&req.conf.raw)
        .ok()
        .and_then(|c| c.ipam_type);
    let plugin_type = from_config.or_else(|| record.and_then(|r| r.ipam_type.clone()));
    let Some(plugin_type) = plugin_type else {
        return Ok(None);
    };
    let held = Delegate::new(&plugin_type, &req.env.path).start_held(Command::Del)?;
    Ok(Some(held))
}

/// Lets a held release act: it reads the caller's stdin.
fn feed(
    held: Result<Option<Held>, MasterError>,
    req: &Request,
) -> Result<Option<Running>, MasterError> {
    held.map(|h| h.map(|h| h.feed(&req.stdin)))
}
