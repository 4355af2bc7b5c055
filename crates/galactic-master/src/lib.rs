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
mod gateway;
mod gc;
mod guest;
mod nad;
pub mod record;

use galactic_core::cni::{CniError, CniResult, Plugin, Request};
use galactic_core::net::NetError;
pub use record::Kind;

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
        name: "galactic-cni",
    };
    /// The tap master (`galactic-tap-cni`).
    pub const TAP: Master = Master {
        kind: Kind::Tap,
        name: "galactic-tap-cni",
    };
}

impl Plugin for Master {
    fn name(&self) -> &'static str {
        self.name
    }
    fn add(&self, req: &Request) -> Result<CniResult, CniError> {
        add::add(self.kind, req)
    }
    fn del(&self, req: &Request) -> Result<(), CniError> {
        del::del(req)
    }
    fn check(&self, req: &Request) -> Result<(), CniError> {
        check::check(self.kind, req)
    }
    fn status(&self, req: &Request) -> Result<(), CniError> {
        gc::status(self.kind, req)
    }
    fn gc(&self, req: &Request) -> Result<(), CniError> {
        gc::gc(req)
    }
}

/// Maps a kernel-layer error to its CNI code: busy locks are 11, node conflicts 7, the rest 5.
pub(crate) fn cni_error(context: &str) -> impl Fn(NetError) -> CniError + '_ {
    move |e| {
        let msg = format!("{context}: {e}");
        match e {
            NetError::Busy(_) => CniError::try_again_later(msg),
            NetError::Conflict(_) => CniError::invalid_config(msg),
            _ => CniError::io(msg),
        }
    }
}
