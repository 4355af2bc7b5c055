//! A VPC's routing domain on this node: its own routing table, shared by every attachment of the
//! VPC, created on first use.
//!
//! Two backends give each VPC its own table:
//! - `vrf`: a VRF device `G{vpc:9}V` bound to the table; host interfaces are enslaved to it.
//! - `table`: the table plus policy rules (`fwmark <VPC mark> lookup T` at 1000, the mark set
//!   from the host interface by the node's nftables map ([`marks`]); `iif lo from <gw> lookup T`
//!   at 1001), with the node's `local` rule moved after them (see [`table`]). For kernels without
//!   VRF; its weaker isolation is documented in `docs/routing-domains.md`.
//!
//! State (under `<state_dir>/routing/`, all changes under the node-wide `lock`):
//! ```text
//! routing/
//!   lock                 flock: serialises domain creation, table allocation, teardown
//!   backend              "vrf" | "table": whether the kernel can create VRF devices (probed once)
//!   vpc-<hex>.json       {"vpc","backend","table","gateways":[...],"mark"}: one per domain we hold
//!                        ("mark": {"value","mask"}, table mode: the VPC's firewall mark)
//! ```
//! A table id is only ever taken from ids no route, rule or VRF on the node uses, or adopted with
//! the VPC's existing VRF device; only a table recorded here is ever flushed. The record is
//! written before the kernel objects, and every ADD and every GC brings the objects back into
//! agreement with it ([`Domains::ensure`], in [`converge`]), so a crash, a reboot or a device
//! removed behind the record is repaired by the next ADD of the VPC or the next CNI GC; the
//! VPC's attachments are then brought back into the domain by galactic-master's convergence.

pub mod backend;
mod converge;
pub mod marks;
pub mod table;
mod vrf;

pub use backend::{Choice, Reason, Refusal};
pub use converge::{Change, Ensured};
pub use vrf::{Found, Removal};

use super::netlink::{Link, Netlink};
use super::NetError;
use crate::config::{NodeConfig, Publisher, RoutingDomainMode, DEFAULT_TABLE_MARK_MASK};
use crate::ident::VpcId;
use crate::lockfile::{self, LockGuard};
use crate::state::{self, read_json, write_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Lowest table id handed out: keeps clear of the small ids administrators and tools use.
pub const FIRST_TABLE: u32 = 1000;
/// Highest table id handed out.
pub const LAST_TABLE: u32 = 0x7fff_ffff;
/// Bound on waiting for the node-wide routing lock.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The backend of a routing domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// VRF device.
    Vrf,
    /// Table plus policy rules.
    Table,
}

/// A routing domain as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    /// The VPC id as configured.
    pub vpc: String,
    /// Backend.
    pub backend: Backend,
    /// The VPC's routing table.
    pub table: u32,
    /// Gateway addresses of the VPC on this node (table mode routes and rules follow them).
    pub gateways: BTreeSet<IpAddr>,
    /// Table mode: the mark selecting the VPC's traffic (none in a record of a release before
    /// the marks, or of a VRF domain; `Domains::ensure` allocates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<marks::Mark>,
}

/// The node's routing-domain state directory.
#[derive(Debug, Clone)]
pub struct Domains {
    dir: PathBuf,
    /// The node's `table_mark_mask`: table-mode marks are allocated within it.
    mark_mask: u32,
}

impl Domains {
    /// The state under `<state_dir>/routing`, allocating marks within the default mask (for
    /// readers of the records; what creates or repairs domains uses [`Domains::for_node`]).
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("routing"),
            mark_mask: DEFAULT_TABLE_MARK_MASK,
        }
    }

    /// The node's state, allocating marks within its `table_mark_mask`.
    pub fn for_node(node: &NodeConfig) -> Self {
        Self {
            mark_mask: node.table_mark_mask,
            ..Self::new(&node.state_dir)
        }
    }

    /// Takes the node-wide routing lock.
    pub fn lock(&self) -> Result<LockGuard, NetError> {
        lockfile::acquire(&self.dir.join("lock"), LOCK_TIMEOUT).map_err(|e| match e {
            lockfile::LockError::Timeout { .. } => NetError::Busy(e.to_string()),
            lockfile::LockError::Io { path, source } => NetError::Io {
                what: format!("lock {}", path.display()),
                source,
            },
        })
    }

    fn record_path(&self, vpc: &VpcId) -> PathBuf {
        self.dir.join(format!("vpc-{}.json", vpc.hex()))
    }

    /// The domain of `vpc`, if one was created. The record's temporaries whose writers are gone
    /// go too, also when the record exists: an ADD killed while it rewrote the VPC's record (a
    /// new gateway, a re-bound table) leaves one that the DEL of its attachment, which reads the
    /// record but never rewrites it, must not leave behind (`crate::state`). The directory
    /// holds one file per VPC of the node, so the listing stays small.
    pub fn get(&self, vpc: &VpcId) -> Result<Option<Domain>, NetError> {
        let path = self.record_path(vpc);
        let domain = read_json(&path)?;
        if domain.is_some() {
            // Best effort: the next write of the record or GC takes what is left.
            let _ = state::remove_dead_temporaries(&path);
        }
        Ok(domain)
    }

    /// Every recorded domain.
    pub fn all(&self) -> Result<Vec<Domain>, NetError> {
        let mut out = Vec::new();
        for path in state::json_files(&self.dir, "vpc-")? {
            out.extend(read_json::<Domain>(&path)?);
        }
        Ok(out)
    }

    /// Removes what writers killed mid-write left behind (GC).
    pub fn sweep_temporaries(&self) -> Result<usize, NetError> {
        Ok(state::sweep_temporaries(&self.dir)?)
    }

    fn save(&self, vpc: &VpcId, domain: &Domain) -> Result<(), NetError> {
        Ok(write_json(&self.record_path(vpc), domain)?)
    }

    fn forget(&self, vpc: &VpcId) -> Result<(), NetError> {
        Ok(state::remove(&self.record_path(vpc))?)
    }

    /// The backend new domains of this node get, and why ([`backend::choose`]).
    pub fn choose(
        &self,
        mode: RoutingDomainMode,
        publisher: Publisher,
    ) -> Result<Choice, NetError> {
        backend::choose(&self.dir.join("backend"), mode, publisher)
    }

    /// Keeps the kernel's VRF support, if `choice` probed it ([`backend::remember`]). Call
    /// with the lock held, once the choice is in use.
    pub fn remember(&self, choice: &Choice) -> Result<(), NetError> {
        backend::remember(&self.dir.join("backend"), choice)
    }

    /// Adds `gateways` to the VPC's domain (table mode: local routes and reply rules). Refuses a
    /// gateway another VPC on this node already uses: without per-VPC marks, table mode cannot
    /// tell the two apart. Returns the gateways this call added. Call with the lock held.
    pub fn add_gateways(
        &self,
        nl: &Netlink,
        vpc: &VpcId,
        gateways: &[IpAddr],
    ) -> Result<Vec<IpAddr>, NetError> {
        let Some(mut domain) = self.get(vpc)? else {
            return Err(NetError::NotFound {
                what: format!("routing domain of VPC {vpc}"),
            });
        };
        let new: Vec<IpAddr> = gateways
            .iter()
            .copied()
            .filter(|g| !domain.gateways.contains(g))
            .collect();
        if new.is_empty() {
            // Recorded ones are already restored by `ensure` when missing.
            return Ok(Vec::new());
        }
        if domain.backend == Backend::Table {
            self.refuse_shared_gateways(vpc, &new)?;
            for gw in &new {
                table::add_gateway(nl, domain.table, *gw)?;
            }
        }
        domain.gateways.extend(new.iter().copied());
        self.save(vpc, &domain)?;
        Ok(new)
    }

    fn refuse_shared_gateways(&self, vpc: &VpcId, new: &[IpAddr]) -> Result<(), NetError> {
        for other in self.all()?.into_iter().filter(|d| d.vpc != vpc.raw()) {
            if let Some(gw) = new.iter().find(|g| other.gateways.contains(g)) {
                return Err(NetError::Conflict(format!(
                    "gateway {gw} is already used by VPC {} on this node; table-mode routing domains need \
                     node-unique gateway addresses per VPC",
                    other.vpc
                )));
            }
        }
        Ok(())
    }

    /// Removes `gateways` from the domain (rollback of an ADD that added them).
    pub fn remove_gateways(
        &self,
        nl: &Netlink,
        vpc: &VpcId,
        gateways: &[IpAddr],
    ) -> Result<(), NetError> {
        let Some(mut domain) = self.get(vpc)? else {
            return Ok(());
        };
        for gw in gateways {
            if domain.backend == Backend::Table {
                table::remove_gateway(nl, domain.table, *gw)?;
            }
            domain.gateways.remove(gw);
        }
        self.save(vpc, &domain)
    }

    /// Tears the VPC's domain down: its table, rules, VRF and record. Only for a domain with no
    /// attachment left (the caller checks, under the lock). A VRF that interfaces of someone
    /// else are still enslaved to stays, with its table; the record goes either way.
    pub fn remove(&self, nl: &Netlink, vpc: &VpcId) -> Result<Removal, NetError> {
        let Some(domain) = self.get(vpc)? else {
            return Ok(Removal::Removed);
        };
        let removal = match domain.backend {
            Backend::Vrf => vrf::remove(nl, vpc, domain.table)?,
            Backend::Table => {
                table::remove(nl, &domain)?;
                Removal::Removed
            }
        };
        self.forget(vpc)?;
        Ok(removal)
    }

    /// The domain's mark, allocated when it has none or one of another mask than the node's
    /// (the mask changed): the lowest mark within the mask no other record, rule or map element
    /// uses. Returns what changed (for the log); the caller saves the record.
    fn assign_mark(&self, nl: &Netlink, domain: &mut Domain) -> Result<Option<String>, NetError> {
        if domain.mark.is_some_and(|m| m.mask == self.mark_mask) {
            return Ok(None);
        }
        let mut taken: BTreeSet<u32> = self
            .all()?
            .into_iter()
            .filter(|d| d.vpc != domain.vpc)
            .filter_map(|d| d.mark.map(|m| m.value))
            .collect();
        taken.extend(table::marks_in_use(nl)?);
        let mark = marks::allocate(self.mark_mask, &taken).ok_or_else(|| {
            NetError::Conflict(format!(
                "no free firewall mark within table_mark_mask {:#x} for another table-mode \
                 routing domain on this node: every mark is taken by a VPC of this node or a \
                 rule; widen table_mark_mask in the node config",
                self.mark_mask
            ))
        })?;
        let was = domain.mark.replace(mark);
        Ok(Some(match was {
            None => format!("firewall mark {} allocated", mark.label()),
            Some(old) => format!(
                "firewall mark {} allocated in place of {} (table_mark_mask changed)",
                mark.label(),
                old.label()
            ),
        }))
    }

    /// Lowest table id in [`FIRST_TABLE`, `LAST_TABLE`] that no route, rule, VRF or record uses.
    fn free_table(&self, nl: &Netlink) -> Result<u32, NetError> {
        let mut used: BTreeSet<u32> = self.all()?.iter().map(|d| d.table).collect();
        used.extend(table::tables_in_use(nl)?);
        used.extend(vrf::tables_in_use(nl)?);
        (FIRST_TABLE..=LAST_TABLE)
            .find(|t| !used.contains(t))
            .ok_or_else(|| NetError::Conflict("no free routing table id on this node".into()))
    }
}

/// Attaches a host interface to the domain.
pub fn attach(nl: &Netlink, domain: &Domain, vpc: &VpcId, host: &Link) -> Result<(), NetError> {
    match domain.backend {
        Backend::Vrf => vrf::attach(nl, vpc, host),
        Backend::Table => table::attach(domain, &host.name),
    }
}

/// Detaches a host interface (its map element and any rule of a previous release; a VRF slave
/// leaves with its link). Missing is success.
pub fn detach(nl: &Netlink, domain: &Domain, host_ifname: &str) -> Result<(), NetError> {
    match domain.backend {
        Backend::Vrf => Ok(()),
        Backend::Table => table::detach(nl, domain.table, host_ifname),
    }
}

/// How the domain's kernel objects differ from its record (the device and its table, the table's
/// closing routes, table mode's gateway routes and rules); empty when they agree. Each message
/// says what restores it.
pub fn problems(nl: &Netlink, domain: &Domain, vpc: &VpcId) -> Result<Vec<String>, NetError> {
    match domain.backend {
        Backend::Vrf => vrf::problems(nl, vpc, domain.table),
        Backend::Table => table::problems(nl, domain, vpc),
    }
}

/// What is wrong with the domain ([`problems`]) and the host interface's membership; empty
/// when healthy.
pub fn check(
    nl: &Netlink,
    domain: &Domain,
    vpc: &VpcId,
    host: &Link,
) -> Result<Vec<String>, NetError> {
    let mut found = problems(nl, domain, vpc)?;
    found.extend(match domain.backend {
        Backend::Vrf => vrf::membership(nl, vpc, host)?,
        Backend::Table => table::membership(domain, vpc, host)?,
    });
    Ok(found)
}

/// What restores an attachment's host side removed behind its record: the VPC's convergence,
/// which every CNI GC runs over the whole VPC and every ADD of the VPC over the whole VPC or
/// over the next few of its attachments (galactic-master's `converge/rotation.rs`): "the next
/// ADDs", since in a large VPC it may take more than one.
pub fn restored_by(vpc: &VpcId) -> String {
    format!("CNI GC or the next ADDs of VPC {vpc} on this node restore it")
}
