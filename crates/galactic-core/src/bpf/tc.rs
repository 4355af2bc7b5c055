//! The tc ingress attachment of the pinned `usid_egress` program on a host interface: what the
//! pod sends enters the host at that interface's ingress, where the program encapsulates it.
//!
//! One fixed slot per interface — clsact qdisc, parent ingress, priority (node-config key
//! `ebpf_filter_priority`, default 1), handle
//! 0:1, all protocols, direct action — so a repeated ADD replaces the filter in place instead of
//! stacking copies.

use super::maps::USID_EGRESS_PROG;
use super::BpfError;
use aya::programs::tc::{self, NlOptions, SchedClassifierLink, TcAttachOptions, TcError, TcHandle};
use aya::programs::{ProgramError, SchedClassifier, TcAttachType};
use std::path::Path;

/// Default filter priority (node-config key `ebpf_filter_priority`).
pub const DEFAULT_FILTER_PRIORITY: u16 = crate::config::DEFAULT_EBPF_FILTER_PRIORITY;
/// The filter handle (0:1).
pub const FILTER_HANDLE: TcHandle = TcHandle::new(0, 1);

/// What [`attach_egress`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachOutcome {
    /// The program is not pinned (datapath loader not run, or without egress): nothing to do.
    NotPinned,
    /// A filter existed in the slot and now runs the pinned program.
    Replaced,
    /// The filter was created.
    Created,
}

/// Attaches `<pin_dir>/usid_egress_prog` to `ifname`'s ingress at `priority`, handle 0:1.
pub fn attach_egress(
    pin_dir: &Path,
    ifname: &str,
    priority: u16,
) -> Result<AttachOutcome, BpfError> {
    let path = pin_dir.join(USID_EGRESS_PROG);
    if !path.exists() {
        return Ok(AttachOutcome::NotPinned);
    }
    let fail = |source: ProgramError| BpfError::Attach {
        program: path.display().to_string(),
        ifname: ifname.to_owned(),
        source: Box::new(source),
    };
    let mut prog = SchedClassifier::from_pin(&path).map_err(fail)?;
    match tc::qdisc_add_clsact(ifname) {
        Ok(()) => {}
        Err(TcError::NetlinkError(e)) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(fail(e.into())),
    }
    let slot =
        SchedClassifierLink::attached(ifname, TcAttachType::Ingress, priority, FILTER_HANDLE, None)
            .map_err(|e| fail(TcError::IoError(e).into()))?;
    // Replace first (no NLM_F_CREATE): it fails with ENOENT when the slot is empty, and then
    // the filter is created exclusively.
    let (id, outcome) = match prog.attach_to_link(slot) {
        Ok(id) => (id, AttachOutcome::Replaced),
        Err(_) => {
            let options = TcAttachOptions::Netlink(NlOptions {
                priority,
                handle: FILTER_HANDLE,
                classid: None,
            });
            let id = prog
                .attach_with_options(ifname, TcAttachType::Ingress, options)
                .map_err(fail)?;
            (id, AttachOutcome::Created)
        }
    };
    let link = prog.take_link(id).map_err(fail)?;
    // A link handle detaches its filter when dropped; the filter must outlive this process
    // (the interface's deletion removes it), so the handle is deliberately leaked.
    std::mem::forget(link);
    Ok(outcome)
}
