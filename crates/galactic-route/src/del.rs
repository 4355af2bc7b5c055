//! DEL: removes this attachment's entries from the VPC's route record.
//!
//! The routes themselves stay until the master's DEL, next in the reversed chain, deletes the host
//! interface they go out of (the kernel drops them with it, decision 0020); their record entries
//! go now, so a VPC's record only ever lists live attachments and ADD's work stays bounded however
//! long the node lives. What to remove comes from the record (what ADD installed for this
//! container, interface and network), never from today's stanza: an edited or broken
//! configuration still cleans up. The stanza only narrows the search to its VPC when its ids
//! parse; otherwise every VPC's record is searched. A record that cannot be rewritten (a full
//! disk) or a lock that stays busy is code 11, so the runtime retries instead of forgetting.
//! The temporaries a killed ADD of the VPC left go too (under the lock), so no temporary
//! outlives the runtime's recovery of that ADD.

use crate::error::RouteError;
use crate::record::{Ledger, Owned};
use galactic_core::cni::Request;
use galactic_core::ident::{ChainIds, VpcId};
use galactic_core::log;
use serde_json::json;

/// DEL of the attachment of `req`.
pub fn del(req: &Request) -> Result<(), RouteError> {
    let ledger = Ledger::new(&req.node.state_dir);
    // Without both ids nothing this plugin recorded can be named: nothing to remove.
    let (Ok(container_id), Ok(ifname)) = (req.env.container_id(), req.env.ifname()) else {
        log::info(
            "DEL: no container id or interface name, nothing to remove",
            json!({}),
        );
        return Ok(());
    };
    let owner = Owner {
        network: &req.conf.name,
        container_id: container_id.as_str(),
        ifname: ifname.as_str(),
    };
    let vpcs: Vec<VpcId> = match ChainIds::of(&req.conf.raw) {
        Ok(ids) => vec![ids.vpc],
        // The listing also removes what dead writers left (`state::json_files`).
        Err(_) => ledger.vpcs()?.into_iter().filter_map(Result::ok).collect(),
    };
    let mut removed = 0;
    for vpc in vpcs {
        removed += remove_owned(&ledger, &vpc, &owner)?;
    }
    log::info(
        "DEL: route record entries removed (the routes go with the host interface)",
        json!({"entries": removed}),
    );
    Ok(())
}

/// Who installed an entry.
struct Owner<'a> {
    network: &'a str,
    container_id: &'a str,
    ifname: &'a str,
}

impl Owner<'_> {
    fn owns(&self, entry: &Owned) -> bool {
        entry.network == self.network
            && entry.container_id == self.container_id
            && entry.ifname == self.ifname
    }
}

/// Removes `owner`'s entries of `vpc` under the VPC's lock; returns how many there were. The
/// record is read once and written at most once: its size is the VPC's live attachments'.
fn remove_owned(ledger: &Ledger, vpc: &VpcId, owner: &Owner<'_>) -> Result<usize, RouteError> {
    let _lock = ledger.lock(vpc)?;
    // An ADD killed between writing the record and its rename left a temporary, and its entries
    // never reached the record: nothing below rewrites it, so the leftover goes here.
    ledger.remove_stale_temp(vpc);
    let mut record = ledger.get(vpc)?;
    let held = record.routes.len();
    // One entry per route (Ledger::add): the owner's entries are exactly its routes' entries.
    record.routes.retain(|e| !owner.owns(e));
    let removed = held - record.routes.len();
    if removed > 0 {
        ledger.put(vpc, &record)?;
    }
    Ok(removed)
}
