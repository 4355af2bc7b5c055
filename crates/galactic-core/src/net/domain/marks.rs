//! Table mode's selection of a VPC's traffic by firewall mark: policy rules grow with VPCs, not
//! attachments (`docs/decisions/0076`).
//!
//! - node-wide, once: the prerouting chain `inet galactic vpc_marks` sets a packet's mark from
//!   the map `iifname : mark` ([`firewall::mark_vpc_traffic`]);
//! - per VPC: a mark within the node's `table_mark_mask`, recorded with the domain (stable
//!   across restarts, unique among the node's domains), and one rule per family
//!   `fwmark <mark>/<mask> lookup T` at [`super::table::ATTACH_PRIORITY`];
//! - per host interface: one map element `<H> : <mark>`, written over netlink on ADD and removed
//!   on DEL.
//!
//! A packet's mark is set only by that chain from the interface it came in on (marks do not
//! cross a veth between namespaces, nor a tap), so a pod cannot choose another VPC's table.

use super::super::firewall::{self, OWN_TABLE, VPC_MARKS};
use super::super::nftables::map::{self, Change, Element, MapRef};
use super::super::nftables::FAMILY_INET;
use super::super::NetError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A VPC's mark: `value` within `mask` (the node's `table_mark_mask` when it was allocated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The mark its interfaces' packets get.
    pub value: u32,
    /// The bits the VPC's rule compares.
    pub mask: u32,
}

impl Mark {
    /// `0x…/0x…`, as `ip rule` shows it.
    pub fn label(&self) -> String {
        format!("{:#x}/{:#x}", self.value, self.mask)
    }
}

/// The node's map.
const MAP: MapRef<'static> = MapRef {
    family: FAMILY_INET,
    table: OWN_TABLE,
    name: VPC_MARKS,
};

/// The lowest mark within `mask` that none of `taken` (marks of any mask, compared within
/// `mask`) uses; `None` when every one is taken. Mark values are the numbers 1.. shifted into
/// the mask (0 is an unmarked packet).
pub fn allocate(mask: u32, taken: &BTreeSet<u32>) -> Option<Mark> {
    let shift = mask.trailing_zeros();
    let last = mask.checked_shr(shift)?;
    let used: BTreeSet<u32> = taken.iter().map(|t| t & mask).collect();
    (1..=last)
        .map(|n| n << shift)
        .find(|v| !used.contains(v))
        .map(|value| Mark { value, mask })
}

/// Node-wide: the chain and map exist. Returns whether they had to be created.
pub fn prepare_node() -> Result<bool, NetError> {
    firewall::mark_vpc_traffic()
}

/// Whether the node's chain is missing, with what restores it.
pub fn node_problem(restores: &str) -> Result<Option<String>, NetError> {
    let present = super::super::nftables::has_chain(FAMILY_INET, OWN_TABLE, VPC_MARKS)?;
    Ok((!present).then(|| {
        format!(
            "nftables chain 'inet {OWN_TABLE} {VPC_MARKS}' (the VPC marks of table-mode routing \
             domains) is missing; {restores}"
        )
    }))
}

/// Every element of the node's map (none before the first table-mode ADD).
pub fn elements() -> Result<Vec<Element>, NetError> {
    map::elements(MAP)
}

/// The element of `ifname` in the node's map, if it has one: one request, whatever the size of
/// the map (what a VPC's convergence reads for each of its interfaces).
pub fn element(ifname: &str) -> Result<Option<Element>, NetError> {
    map::element(MAP, ifname)
}

/// Gives `ifname`'s packets `mark`, replacing another mark it had (in one batch: never without
/// one). `elements` is a dump of the map, or `ifname`'s own element ([`element`]).
pub fn select(elements: &[Element], ifname: &str, mark: Mark) -> Result<(), NetError> {
    let want = Element {
        ifname: ifname.to_owned(),
        mark: mark.value,
    };
    let mut changes = Vec::new();
    match elements.iter().find(|e| e.ifname == ifname) {
        Some(e) if *e == want => return Ok(()),
        Some(_) => changes.push(Change::Delete(ifname.to_owned())),
        None => {}
    }
    changes.push(Change::Add(want));
    map::apply(MAP, &changes)
}

/// Removes `ifname`'s element. A missing one (or a missing map) is success.
pub fn deselect(ifname: &str) -> Result<(), NetError> {
    if element(ifname)?.is_none() {
        return Ok(());
    }
    match map::apply(MAP, &[Change::Delete(ifname.to_owned())]) {
        // Removed in between (a concurrent GC of an element no record owns).
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

/// Removes every element of `names` that is in `elements` (one batch; one by one when one of
/// them went in between, e.g. by a concurrent DEL). Returns how many were listed.
pub fn deselect_all(elements: &[Element], names: &[String]) -> Result<usize, NetError> {
    let gone: Vec<&str> = elements
        .iter()
        .filter(|e| names.contains(&e.ifname))
        .map(|e| e.ifname.as_str())
        .collect();
    let changes: Vec<Change> = gone
        .iter()
        .map(|n| Change::Delete((*n).to_owned()))
        .collect();
    match map::apply(MAP, &changes) {
        Err(e) if e.is_not_found() => {
            for name in &gone {
                deselect(name)?;
            }
        }
        other => other?,
    }
    Ok(gone.len())
}

/// Whether `ifname` has `mark` in `elements`.
pub fn is_selected(elements: &[Element], ifname: &str, mark: Mark) -> bool {
    elements
        .iter()
        .any(|e| e.ifname == ifname && e.mark == mark.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_the_lowest_free_numbers_within_the_mask() {
        let mask = 0xff00_0000;
        let first = allocate(mask, &BTreeSet::new()).unwrap();
        assert_eq!(first.value, 0x0100_0000);
        let taken = [0x0100_0000, 0x0300_0000].into();
        assert_eq!(allocate(mask, &taken).unwrap().value, 0x0200_0000);
        // A mark outside the mask (another mask's) takes what it covers within this one.
        let taken = [0x0100_0010].into();
        assert_eq!(allocate(mask, &taken).unwrap().value, 0x0200_0000);
        let full: BTreeSet<u32> = (1..=3).map(|n| n << 4).collect();
        assert_eq!(allocate(0x30, &full), None, "two bits hold three VPCs");
        assert_eq!(
            allocate(0xc000_0000, &BTreeSet::new()).unwrap().value,
            0x4000_0000
        );
    }
}
