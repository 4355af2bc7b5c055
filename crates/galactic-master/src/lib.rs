//! The flow both master plugins run, `galactic-cni` (veth, containers) and `galactic-tap-cni`
//! (tap, VM workloads): the routing domain, IPAM delegation by exec, the host gateway, the
//! attachment records, rollback, and CHECK, DEL, GC and STATUS. The two differ only in the
//! interface they attach a workload with; each crate implements [`Device`] for its own and runs
//! [`Master`] of it. ADD's phases are described in `add.rs`.
//!
//! Why a library of its own rather than galactic-core: galactic-core holds what every plugin
//! shares, and nothing here is used by galactic-ipam, galactic-route or galactic-bgp
//! (docs/decisions/0074-one-crate-per-owner.md).

mod add;
mod addressing;
mod check;
pub mod conf;
mod converge;
mod del;
pub mod delegate;
pub mod device;
mod error;
mod gateway;
mod gc;
mod legacy;
mod mac;
mod nad;
mod retire;
mod status;

/// The other attachments an ADD converges in a VPC that has more (`converge::rotation`).
pub use converge::rotation::WINDOW as CONVERGENCE_WINDOW;

pub use device::{Attached, Container, Device, NewInterface};
pub use error::{MasterError, NotReady};
use galactic_core::cni::{CniResult, Plugin, Request};
use std::marker::PhantomData;

/// The master plugin of device kind `D`.
pub struct Master<D>(PhantomData<D>);

impl<D: Device> Master<D> {
    /// The plugin.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<D: Device> Default for Master<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Device> Plugin for Master<D> {
    type Error = MasterError;

    fn name(&self) -> &'static str {
        D::NAME
    }
    fn add(&self, req: &Request) -> Result<CniResult, MasterError> {
        add::add::<D>(req)
    }
    fn del(&self, req: &Request) -> Result<(), MasterError> {
        del::del::<D>(req)
    }
    fn check(&self, req: &Request) -> Result<(), MasterError> {
        check::check::<D>(req)
    }
    fn status(&self, req: &Request) -> Result<(), MasterError> {
        status::status::<D>(req)
    }
    fn gc(&self, req: &Request) -> Result<(), MasterError> {
        gc::gc::<D>(req)
    }
}
