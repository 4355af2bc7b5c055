//! A VPC's routing domain goes with the VPC's last attachment record on the node: the one
//! decision DEL (once its attachment's record is gone), a rolled-back ADD and CNI GC make, by
//! the master's own attachment records, with the one removal GC always used
//! ([`Domains::remove`]: the table's routes and rules, the VRF unless interfaces of someone
//! else are still enslaved to it, the record).
//!
//! Races. The decision is taken under the VPC's lock and the node-wide routing lock (the
//! documented order: after an attachment's lock, which DEL and ADD hold), and every record of
//! the VPC counts, whatever its stage:
//! - an ADD of the VPC writes its record (`adding`) before it ensures the domain under the
//!   routing lock, so either that record is seen and the domain stays, or the ADD's ensure comes
//!   after the removal and creates the domain again. No ADD ever ends joined to a removed domain;
//! - a `removing` record is a teardown still running: it decides after its record is gone;
//! - GC's convergence of a VPC looks at the VPC's records again under the VPC's lock
//!   (`converge::recorded_domain`), so it never recreates a domain this removed;
//! - GC lists the node's records once for all its VPCs ([`if_unused_listed`]): a listed record
//!   still on the node keeps the domain (no lock is needed to keep it), and a VPC with none left
//!   is decided here as for DEL, under the locks with a fresh look.

use galactic_core::attachment::{Listing, Record, Records};
use galactic_core::failpoint;
use galactic_core::ident::VpcId;
use galactic_core::net::domain::{Domains, Removal};
use galactic_core::net::netlink::Netlink;
use galactic_core::net::NetError;
use std::path::Path;

/// What [`if_unused`] did with the VPC's domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retired {
    /// Another attachment record of the VPC is on the node: the domain stays.
    InUse,
    /// No domain was recorded.
    NotRecorded,
    /// The domain is gone (table `table`).
    Removed {
        /// The table the domain had.
        table: u32,
    },
    /// The record is gone, but the VRF and its table stay: interfaces without a record of
    /// ours (another chain's pods) are enslaved to it.
    LeftInPlace {
        /// The table the domain had.
        table: u32,
        /// The enslaved interfaces.
        enslaved: Vec<String>,
    },
}

/// Removes the VPC's routing domain when no attachment record of the VPC is left on the node
/// but `except`'s (a rolled-back ADD's own record, removed right after). Call with no lock but
/// an attachment's held.
pub fn if_unused(
    host: &Netlink,
    state_dir: &Path,
    vpc: &VpcId,
    except: Option<&str>,
) -> Result<Retired, NetError> {
    let records = Records::new(state_dir);
    let domains = Domains::new(state_dir);
    // Without a record there is nothing to remove, and nothing to lock for: a domain created
    // after this look belongs to an ADD whose record is already written. Most DELs of a VPC with
    // other attachments, and every DEL or failed ADD that never had a domain, stop here (no lock
    // file is created for them either).
    if domains.get(vpc)?.is_none() {
        return Ok(Retired::NotRecorded);
    }
    let _vpc = records
        .lock_vpc(vpc)
        .map_err(|e| NetError::Busy(e.to_string()))?;
    let _routing = domains.lock()?;
    if in_use(&records, vpc, except)? {
        return Ok(Retired::InUse);
    }
    let Some(domain) = domains.get(vpc)? else {
        return Ok(Retired::NotRecorded);
    };
    // Only ever armed as `:pause`: holds the removal after its decision, so a test can show an
    // ADD of the VPC waits for it (and creates the domain again) instead of joining it.
    let _ = failpoint::hit("retire-before-remove");
    // Before the domain: a teardown killed between the two leaves a domain without a rotation
    // (its next ADD converges it whole), never a rotation without a domain.
    crate::converge::rotation::remove(state_dir, vpc)?;
    Ok(match domains.remove(host, vpc)? {
        Removal::Removed => Retired::Removed {
            table: domain.table,
        },
        Removal::LeftInPlace(enslaved) => Retired::LeftInPlace {
            table: domain.table,
            enslaved,
        },
    })
}

/// [`if_unused`] for GC, which listed the node's records once for all its VPCs (`listing`): a
/// record of the VPC the listing names that is still on the node answers that the domain stays,
/// with no lock and no new listing (it is there, so every look under the locks would see it
/// too); only a VPC none of whose listed records is left is decided as [`if_unused`] decides.
pub fn if_unused_listed(
    host: &Netlink,
    state_dir: &Path,
    vpc: &VpcId,
    listing: &Listing,
) -> Result<Retired, NetError> {
    if !Records::new(state_dir).reread(listing, vpc).is_empty() {
        return Ok(Retired::InUse);
    }
    if_unused(host, state_dir, vpc, None)
}

/// Whether an attachment record of the VPC other than `except`'s is on the node, in any stage.
pub fn in_use(records: &Records, vpc: &VpcId, except: Option<&str>) -> Result<bool, NetError> {
    Ok(records.any_of_vpc(vpc, except)?)
}

/// The VPC's records on the node now, in any stage, for a caller holding the VPC's lock with
/// GC's `listing`: those the listing names, read again by their files; when none of them is
/// left, the directory listed again (a record written since the listing then counts too, as
/// [`in_use`] would count it). A record written since the listing beside listed ones that are
/// still there is not among them: it is an ADD's, which converges its VPC itself.
pub fn current(records: &Records, listing: &Listing, vpc: &VpcId) -> Result<Vec<Record>, NetError> {
    let again = records.reread(listing, vpc);
    if !again.is_empty() {
        return Ok(again);
    }
    Ok(records.of_vpc(vpc)?)
}
