//! ADD's IPAM steps: the delegate started at once, its answer collected where the addresses are
//! needed, and its undo.

use super::Add;
use crate::addressing;
use crate::delegate::{Delegate, DelegateError, Running};
use crate::device::Device;
use crate::error::MasterError;
use galactic_core::cni::Command;
use galactic_core::ip::Assignment;
use galactic_core::log;
use galactic_core::rollback::Rollback;
use serde_json::json;

/// The IPAM delegate's ADD, as far as this ADD knows it.
pub(super) enum Ipam {
    /// Not started (no IPAM, or not yet).
    Idle,
    /// Started, outcome not collected yet.
    Running(Running),
    /// It may hold addresses for this attachment: it answered with them, or its outcome is
    /// unknown (stopped at the bound, or it could not be waited for).
    Allocated,
    /// It answered with its own error: it holds nothing for this call.
    Refused,
}

impl Ipam {
    /// The state after `outcome`.
    fn after<T>(outcome: &Result<T, DelegateError>) -> Self {
        match outcome {
            Err(DelegateError::Failed(_)) => Self::Refused,
            _ => Self::Allocated,
        }
    }
}

impl<'a, D: Device> Add<'a, D> {
    /// Starts the IPAM delegate's ADD and pushes its undo: wait for it if it is still running,
    /// then its DEL unless it refused (as when it ran first: a delegate that answered with an
    /// error holds nothing, and a retried ADD's refusal must not release a live allocation).
    pub(super) fn start_ipam(&'a self, rb: &mut Rollback<'a>) -> Result<(), MasterError> {
        let Some(plugin_type) = self.conf.ipam_type.as_deref() else {
            return Ok(());
        };
        let delegate = Delegate::new(plugin_type, &self.req.env.path);
        let running = delegate.start(Command::Add, &self.req.stdin)?;
        *self.ipam.borrow_mut() = Ipam::Running(running);
        rb.push("IPAM allocation", move || {
            let state = self.ipam.replace(Ipam::Idle);
            let state = match state {
                Ipam::Running(running) => Ipam::after(&running.wait()),
                other => other,
            };
            match state {
                Ipam::Refused | Ipam::Idle => Ok(()),
                _ => Delegate::new(plugin_type, &self.req.env.path)
                    .call(Command::Del, &self.req.stdin),
            }
        });
        Ok(())
    }

    /// The addresses the IPAM delegate allocated (none without IPAM).
    pub(super) fn ipam_result(&self) -> Result<Vec<Assignment>, MasterError> {
        let (Some(plugin_type), Ipam::Running(running)) = (
            self.conf.ipam_type.as_deref(),
            self.ipam.replace(Ipam::Idle),
        ) else {
            return Ok(Vec::new());
        };
        let result = running.result();
        *self.ipam.borrow_mut() = Ipam::after(&result);
        let result = result?;
        let assigned = addressing::from_result(&result);
        if assigned.is_empty() {
            return Err(MasterError::NoAddresses {
                plugin: plugin_type.to_owned(),
            });
        }
        log::debug(
            "ADD: IPAM allocated",
            json!({"ips": result.ips.iter().map(|i| i.address.to_string()).collect::<Vec<_>>()}),
        );
        Ok(assigned)
    }
}
