//! Bringing a VPC's routing domain into agreement with its record and the kernel, on every ADD.
//!
//! | record | kernel (`vrf`: the device `G{vpc}V`) | what [`Domains::ensure`] does | [`Change`] |
//! |---|---|---|---|
//! | none | no device | allocates a free table, records it, creates the objects | `Created` |
//! | none | a VRF bound to table N (the Go chain's) | records N, readies the device (closing routes, sysctls, up; what it found is kept for the undo) | `Adopted` |
//! | held | as recorded | restores what was removed behind the record (closing routes, the local rule, table mode's VPC-mark chain, mark rules, gateway routes and rules), usually nothing | `Unchanged` / `Healed` |
//! | held, table mode without a mark (a previous release's record) or of another `table_mark_mask` | – | allocates the mark, records it, adds its rules (the attachments' convergence then moves them onto it) | `Healed` |
//! | held | no device | recreates it bound to the recorded table | `Healed` |
//! | held | a VRF bound to another table M | re-records M (the device is what galactic-router uses) and flushes the old table if nothing is bound to it | `Healed` |
//!
//! The record is written before any kernel object, so a crash at any point leaves a record the
//! next ADD completes, and a failure inside `ensure` undoes what this call did before returning.
//! A device of the VPC's name that is not a VRF, a VRF bound to main/local/default, or one whose
//! table another domain records is a conflict (code 7), never replaced.

use super::super::netlink::{Link, Netlink};
use super::super::NetError;
use super::{table, vrf, Backend, Domain, Domains};
use crate::failpoint;
use crate::ident::{vrf_name, VpcId};
use crate::ip::Family;
use crate::log;
use serde_json::json;
use std::collections::BTreeSet;

/// What [`Domains::ensure`] changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Recorded, and every object was in place.
    Unchanged,
    /// Recorded; objects missing behind the record were restored (each named). Not undone by
    /// a rollback: the record says they belong there.
    Healed(Vec<String>),
    /// Created by this call: undone by removing the domain.
    Created,
    /// An existing VRF device was adopted with its table by this call: undone by
    /// [`Domains::undo_adoption`], which leaves the device as it was found.
    Adopted {
        /// Families whose table had no default route (this call added `unreachable default`).
        opened: Vec<Family>,
        /// The device's sysctls and link state as found, before this call readied it.
        found: vrf::Found,
    },
}

/// The VPC's domain after [`Domains::ensure`], and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The domain as now recorded.
    pub domain: Domain,
    /// What this call changed.
    pub change: Change,
}

impl Domains {
    /// Returns the VPC's domain after bringing it into agreement with its record and the kernel
    /// (see the module's table); `backend` is used only when the VPC has no record yet. Call
    /// with the lock held.
    pub fn ensure(&self, nl: &Netlink, vpc: &VpcId, backend: Backend) -> Result<Ensured, NetError> {
        match self.get(vpc)? {
            Some(domain) => self.heal(nl, vpc, domain),
            None if backend == Backend::Vrf => match vrf::device(nl, vpc)? {
                Some(device) => self.adopt(nl, vpc, &device),
                None => self.create(nl, vpc, backend),
            },
            None => self.create(nl, vpc, backend),
        }
    }

    fn create(&self, nl: &Netlink, vpc: &VpcId, backend: Backend) -> Result<Ensured, NetError> {
        let mut domain = Domain {
            vpc: vpc.raw().to_owned(),
            backend,
            table: self.free_table(nl)?,
            gateways: BTreeSet::new(),
            mark: None,
        };
        if backend == Backend::Table {
            self.assign_mark(nl, &mut domain)?;
        }
        // Intent first: from here on, a crash leaves a record the next ADD completes.
        self.save(vpc, &domain)?;
        let built = failpoint::hit("after-domain-record")
            .map_err(NetError::from)
            .and_then(|()| match backend {
                Backend::Vrf => vrf::create(nl, vpc, domain.table),
                Backend::Table => table::ensure(nl, &domain).map(|_| ()),
            });
        if let Err(e) = built {
            // The record stays if this fails too: the next ADD then completes the domain.
            if let Err(undo) = self.remove(nl, vpc) {
                log::warn(
                    "routing domain: could not remove a half-created domain; the next ADD of the VPC completes it",
                    json!({"vpc": domain.vpc, "table": domain.table, "err": undo.to_string()}),
                );
            }
            return Err(e);
        }
        Ok(Ensured {
            domain,
            change: Change::Created,
        })
    }

    fn adopt(&self, nl: &Netlink, vpc: &VpcId, device: &Link) -> Result<Ensured, NetError> {
        let table = vrf::adoptable_table(device)?;
        self.refuse_recorded_table(vpc, device, table)?;
        let domain = Domain {
            vpc: vpc.raw().to_owned(),
            backend: Backend::Vrf,
            table,
            gateways: BTreeSet::new(),
            mark: None,
        };
        let opened = table::open_families(nl, table)?;
        let found = vrf::observe(nl, vpc)?;
        self.save(vpc, &domain)?;
        let readied = failpoint::hit("after-domain-record")
            .map_err(NetError::from)
            .and_then(|()| vrf::ready(nl, vpc, table));
        if let Err(e) = readied {
            if let Err(undo) = self.undo_adoption(nl, vpc, &opened, &found) {
                log::warn(
                    "routing domain: could not undo a failed adoption",
                    json!({"vpc": domain.vpc, "table": table, "err": undo.to_string()}),
                );
            }
            return Err(e);
        }
        Ok(Ensured {
            domain,
            change: Change::Adopted { opened, found },
        })
    }

    /// Forgets an adopted domain, removes the closing routes the adoption added and puts the
    /// device's sysctls and link state back as `found`: the device and its table are left as
    /// they were found (the `local` rule, node-wide, stays after the l3mdev rule).
    pub fn undo_adoption(
        &self,
        nl: &Netlink,
        vpc: &VpcId,
        opened: &[Family],
        found: &vrf::Found,
    ) -> Result<(), NetError> {
        if let Some(domain) = self.get(vpc)? {
            for family in opened {
                table::reopen(nl, domain.table, *family)?;
            }
        }
        vrf::restore(nl, vpc, found)?;
        self.forget(vpc)
    }

    fn heal(&self, nl: &Netlink, vpc: &VpcId, mut domain: Domain) -> Result<Ensured, NetError> {
        let mut healed = Vec::new();
        match domain.backend {
            Backend::Table => {
                // A record of a release before the marks (or of another mask) gets its mark
                // first: the rules `ensure` adds follow it.
                if let Some(assigned) = self.assign_mark(nl, &mut domain)? {
                    self.save(vpc, &domain)?;
                    healed.push(assigned);
                }
                healed.extend(table::ensure(nl, &domain)?);
            }
            Backend::Vrf => {
                healed.extend(self.heal_device(nl, vpc, &mut domain)?);
                healed.extend(vrf::ready(nl, vpc, domain.table)?);
            }
        }
        let change = match healed.is_empty() {
            true => Change::Unchanged,
            false => Change::Healed(healed),
        };
        Ok(Ensured { domain, change })
    }

    /// The recorded VRF device exists again, bound to the table the record (now) says.
    fn heal_device(
        &self,
        nl: &Netlink,
        vpc: &VpcId,
        domain: &mut Domain,
    ) -> Result<Vec<String>, NetError> {
        let name = vrf_name(vpc);
        let Some(device) = vrf::device(nl, vpc)? else {
            if let Some(holder) = nl
                .links()?
                .into_iter()
                .find(|l| l.vrf_table == Some(domain.table))
            {
                return Err(NetError::Conflict(format!(
                    "VRF {name} of VPC {vpc} was removed behind this node's record and its table {} \
                     is now bound to {}; remove that device, or remove the VPC's attachments and run \
                     GC so the domain is created afresh",
                    domain.table, holder.name
                )));
            }
            nl.create_vrf(&name, domain.table)?;
            return Ok(vec![format!(
                "recreated VRF {name} bound to table {}",
                domain.table
            )]);
        };
        if device.vrf_table == Some(domain.table) {
            return Ok(Vec::new());
        }
        let table = vrf::adoptable_table(&device)?;
        self.refuse_recorded_table(vpc, &device, table)?;
        let old = domain.table;
        domain.table = table;
        self.save(vpc, domain)?;
        // The old table is ours (recorded) and, with no device bound to it, routes nothing.
        if !vrf::tables_in_use(nl)?.contains(&old) {
            for family in Family::ALL {
                for route in nl.routes(family, old)? {
                    nl.delete_route(&route)?;
                }
            }
        }
        Ok(vec![format!(
            "VRF {name} is bound to table {table}, not the recorded {old}: adopted table {table}"
        )])
    }

    /// Two domains never share a table: a device bound to another domain's table is refused.
    fn refuse_recorded_table(
        &self,
        vpc: &VpcId,
        device: &Link,
        table: u32,
    ) -> Result<(), NetError> {
        match self
            .all()?
            .into_iter()
            .find(|d| d.table == table && d.vpc != vpc.raw())
        {
            Some(other) => Err(NetError::Conflict(format!(
                "VRF {} is bound to table {table}, which this node's routing domain of VPC {} \
                 already uses; remove the device (ip link del {}) and add the attachment again",
                device.name, other.vpc, device.name
            ))),
            None => Ok(()),
        }
    }
}
