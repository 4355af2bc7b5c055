//! The egress kind of a VPC's `vrf_table` row when tap and veth attachments share it.
//!
//! The row is per VPC (Block, Argument), the kind per interface: the datapath at c4c2d06 reads
//! the row's kind to pick the redirect into the host interface, and a tap redirected as a veth
//! (into a peer it does not have) drops every packet. A plain redirect into a veth's host end
//! still reaches the pod (the veth forwards to its peer), so tap is the kind that serves both:
//! the row says tap while any tap attachment of the VPC is registered on the node, and veth
//! again once the last one goes. Upstream's last-writer-wins let one more veth pod cut a VM
//! off. (Upstream's newest datapath reads a per-interface `ifindex_egress_kind_table` and
//! keeps the row's kind only for older datapaths; this choice serves both.)

use super::peers::Peers;
use super::records::*;
use super::*;

/// The kind the row of `(block, argument)` must hold, from every registration record of the
/// node (the caller's included) under the registration lock. A record of an older release
/// (no kind recorded) may be a tap: it keeps `current` when that is tap.
pub(super) fn vpc_egress_kind(
    records: &[AttachmentRecord],
    block: u64,
    argument: u16,
    current: u32,
) -> u32 {
    let mut vpc = records
        .iter()
        .filter(|r| r.block == block && r.argument == argument);
    let tap = vpc.any(|r| match r.egress_kind {
        Some(kind) => kind == EGRESS_KIND_TAP,
        None => current == EGRESS_KIND_TAP,
    });
    if tap {
        EGRESS_KIND_TAP
    } else {
        EGRESS_KIND_VETH
    }
}

/// The kind a registration writes into its VRF's row, `old` (absent when the VRF has none):
/// what [`vpc_egress_kind`] would find in the VPC's records, read only when the row cannot tell
/// (`peers.rs`). The row holds the VPC's kind before this registration (every registration and
/// removal writes it under the lock), so a tap makes it tap and a veth leaves a veth row veth;
/// a tap row meeting a veth, or no row, asks the records.
pub(super) fn registered_kind(
    r: &Registration<'_>,
    old: Option<&VrfValue>,
    peers: &mut Peers<'_>,
) -> Result<u32, BpfError> {
    match old {
        _ if r.egress_kind == EGRESS_KIND_TAP => Ok(EGRESS_KIND_TAP),
        Some(row) if row.egress_kind == EGRESS_KIND_VETH => Ok(EGRESS_KIND_VETH),
        _ => Ok(vpc_egress_kind(
            peers.all()?,
            r.usid.block.value(),
            r.usid.argument.get(),
            old.map_or(EGRESS_KIND_VETH, |row| row.egress_kind),
        )),
    }
}

/// After `removed` left: the VPC's row flips back to veth when no tap attachment of the VPC
/// remains (its other attachments are still served; the row itself stays, the datapath's GC
/// owns it). Nothing to do when no attachment of the VPC remains or the row is gone.
pub(super) fn settle_after_removal(
    removed: &AttachmentRecord,
    others: &[AttachmentRecord],
) -> Result<(), BpfError> {
    if !others
        .iter()
        .any(|o| o.block == removed.block && o.argument == removed.argument)
    {
        return Ok(());
    }
    let mut vrf: VrfTable = maps::open_typed(&removed.pin_dir, maps::VRF_TABLE)?;
    let key = super::super::usid::vrf_key(removed.block, removed.argument);
    let Some(old) = absent_ok(vrf.get(&key, 0)).map_err(map_err(maps::VRF_TABLE, "read"))? else {
        return Ok(());
    };
    let kind = vpc_egress_kind(others, removed.block, removed.argument, old.egress_kind);
    if kind == old.egress_kind {
        return Ok(());
    }
    let value = VrfValue {
        egress_kind: kind,
        ..old
    };
    vrf.insert(key, value, 0)
        .map_err(map_err(maps::VRF_TABLE, "insert"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, argument: u16, kind: Option<u32>) -> AttachmentRecord {
        AttachmentRecord {
            host_ifname: name.into(),
            ifindex: 1,
            block: 0x2001_0db8_ff03,
            argument,
            vrf_table_id: 100,
            prefixes: Vec::new(),
            pin_dir: PathBuf::new(),
            egress_kind: kind,
        }
    }

    #[test]
    fn any_tap_of_the_vpc_makes_the_row_tap() {
        let veth = record("a", 1, Some(EGRESS_KIND_VETH));
        let tap = record("b", 1, Some(EGRESS_KIND_TAP));
        let other_vpc_tap = record("c", 2, Some(EGRESS_KIND_TAP));
        let block = veth.block;
        let kind = |rs: &[AttachmentRecord], current| vpc_egress_kind(rs, block, 1, current);
        assert_eq!(
            kind(std::slice::from_ref(&veth), EGRESS_KIND_TAP),
            EGRESS_KIND_VETH
        );
        assert_eq!(
            kind(&[veth.clone(), tap.clone()], EGRESS_KIND_VETH),
            EGRESS_KIND_TAP
        );
        assert_eq!(
            kind(&[tap, veth.clone()], EGRESS_KIND_VETH),
            EGRESS_KIND_TAP
        );
        assert_eq!(
            kind(&[veth.clone(), other_vpc_tap], EGRESS_KIND_TAP),
            EGRESS_KIND_VETH
        );
        // An older record says nothing: the row's tap is kept, a veth row stays veth.
        let unknown = record("d", 1, None);
        assert_eq!(
            kind(&[veth.clone(), unknown.clone()], EGRESS_KIND_TAP),
            EGRESS_KIND_TAP
        );
        assert_eq!(kind(&[veth, unknown], EGRESS_KIND_VETH), EGRESS_KIND_VETH);
    }
}
