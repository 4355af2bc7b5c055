//! The master plugins' flow, shared by `galactic-cni` (veth) and `galactic-tap-cni` (tap): they
//! differ only in the host interface they create and whether a guest netns is configured.
//!
//! ADD: validate everything → IPAM delegate ADD (so what only the delegate can judge fails before
//! the node changes) → attachment record (intent) → routing domain → host interface → sysctls →
//! forward-accept rules → domain membership → guest addresses and default routes (veth) → VPC
//! gateways in the domain → host gateway (gateway address, pod route in the VPC table, permanent
//! neighbour) → result. Every step pushes its undo; a failure unwinds all
//! of it, including the delegate's DEL.

mod add;
mod addressing;
mod check;
pub mod conf;
mod del;
mod error;
mod gateway;
mod gc;
mod guest;
mod legacy;
mod mac;
mod nad;
mod status;

pub use error::MasterError;
pub use galactic_core::attachment::Kind;
use galactic_core::cni::{CniResult, Plugin, Request};
use galactic_core::plugins;

/// A master plugin of one kind.
#[derive(Debug, Clone, Copy)]
pub struct Master {
    kind: Kind,
    name: &'static str,
}

impl Master {
    /// The veth master (`galactic-cni`).
    pub const VETH: Master = Master {
        kind: Kind::Veth,
        name: plugins::VETH_MASTER,
    };
    /// The tap master (`galactic-tap-cni`).
    pub const TAP: Master = Master {
        kind: Kind::Tap,
        name: plugins::TAP_MASTER,
    };
}

impl Plugin for Master {
    type Error = MasterError;

    fn name(&self) -> &'static str {
        self.name
    }
    fn add(&self, req: &Request) -> Result<CniResult, MasterError> {
        add::add(self.kind, req)
    }
    fn del(&self, req: &Request) -> Result<(), MasterError> {
        del::del(req)
    }
    fn check(&self, req: &Request) -> Result<(), MasterError> {
        check::check(self.kind, req)
    }
    fn status(&self, req: &Request) -> Result<(), MasterError> {
        status::status(self.kind, req)
    }
    fn gc(&self, req: &Request) -> Result<(), MasterError> {
        gc::gc(req)
    }
}
