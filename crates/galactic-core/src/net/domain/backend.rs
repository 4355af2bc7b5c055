//! Which backend this node's routing domains use, and why: the node config's `routing_domain`,
//! the kernel's VRF support (probed once, remembered in `routing/backend`) and the publisher.
//!
//! With the Kubernetes publisher a fallback to `table` is never silent: galactic-router installs
//! its SRv6 routes only through a VPC's VRF device `G{vpc}V`, so a `table`-mode domain attaches
//! pods that never reach other nodes. `auto` without VRF is therefore refused there (and so is
//! `vrf` without VRF, everywhere); only an explicit `routing_domain: table` accepts table mode.

use super::super::NetError;
use super::{vrf, Backend};
use crate::config::{Publisher, RoutingDomainMode, DEFAULT_NODE_CONFIG, NODE_CONFIG_ENV};
use crate::state::{read_json, write_json};
use std::fmt;
use std::path::Path;

/// The backend in force, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The backend new domains get.
    pub backend: Backend,
    /// Why.
    pub reason: Reason,
    /// Whether the kernel was probed for this answer (nothing remembered yet, or a remembered
    /// "no VRF" that would refuse): [`remember`] then keeps it.
    pub probed: bool,
}

/// Why a backend is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `routing_domain: table`.
    ConfiguredTable,
    /// `routing_domain: vrf`, and the kernel can create VRF devices.
    ConfiguredVrf,
    /// `auto`, and the kernel can create VRF devices.
    AutoFoundVrf,
    /// `auto`, the kernel cannot create VRF devices, and the local publisher needs none.
    AutoWithoutVrfLocal,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ConfiguredTable => "routing_domain is table",
            Self::ConfiguredVrf => "routing_domain is vrf and this kernel can create VRF devices",
            Self::AutoFoundVrf => "routing_domain is auto and this kernel can create VRF devices",
            Self::AutoWithoutVrfLocal => {
                "routing_domain is auto, this kernel cannot create VRF devices (no CONFIG_NET_VRF), \
                 and the local publisher does not need them"
            }
        })
    }
}

/// Why no backend can be used as configured (code 7 for ADD, 50 for STATUS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `auto` with the Kubernetes publisher on a kernel without VRF.
    KubernetesWithoutVrf,
    /// `vrf` on a kernel without VRF.
    VrfWithoutVrf,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let no_vrf = "this kernel cannot create VRF devices (no CONFIG_NET_VRF, module 'vrf')";
        let node_config = format!(
            "the node config ({DEFAULT_NODE_CONFIG}, or the file ${NODE_CONFIG_ENV} names)"
        );
        match self {
            Self::KubernetesWithoutVrf => write!(
                f,
                "routing_domain is auto and {no_vrf}, so routing domains would fall back to table \
                 mode; with the Kubernetes publisher (publisher: kubernetes) that is refused: \
                 galactic-router installs its SRv6 routes only through a VPC's VRF device, so pods \
                 would attach but never reach other nodes. Load the vrf module or boot a kernel \
                 with CONFIG_NET_VRF; or, to accept table mode, set routing_domain to table in \
                 {node_config} or GALACTIC_CNI_ROUTING_DOMAIN=table"
            ),
            Self::VrfWithoutVrf => write!(
                f,
                "routing_domain is vrf but {no_vrf}: load the vrf module or boot a kernel with \
                 CONFIG_NET_VRF, or set routing_domain to table (or auto) in {node_config} or \
                 GALACTIC_CNI_ROUTING_DOMAIN"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The backend for `mode` and `publisher` on this kernel. The kernel's VRF support is probed
/// (creating a VRF in a scratch network namespace: [`vrf::supported`]) unless `cache` remembers it; a remembered "no VRF" is
/// probed again whenever it would refuse, so loading the module is enough to recover. Nothing
/// is written: a refused or failing ADD, and STATUS, leave the node as they found it; the ADD
/// that creates a domain keeps the answer ([`remember`]). No lock is needed: the probe's
/// namespace is the process's own.
pub fn choose(
    cache: &Path,
    mode: RoutingDomainMode,
    publisher: Publisher,
) -> Result<Choice, NetError> {
    let refusal = match (mode, publisher) {
        (RoutingDomainMode::Table, _) => {
            return Ok(Choice {
                backend: Backend::Table,
                reason: Reason::ConfiguredTable,
                probed: false,
            })
        }
        (RoutingDomainMode::Vrf, _) => Some(Refusal::VrfWithoutVrf),
        (RoutingDomainMode::Auto, Publisher::Kubernetes) => Some(Refusal::KubernetesWithoutVrf),
        (RoutingDomainMode::Auto, Publisher::Local) => None,
    };
    let (has_vrf, probed) = match read_json::<Backend>(cache)? {
        Some(Backend::Vrf) => (true, false),
        Some(Backend::Table) if refusal.is_none() => (false, false),
        _ => (probe()?, true),
    };
    let (backend, reason) = match (has_vrf, mode, refusal) {
        (true, RoutingDomainMode::Vrf, _) => (Backend::Vrf, Reason::ConfiguredVrf),
        (true, _, _) => (Backend::Vrf, Reason::AutoFoundVrf),
        (false, _, Some(refusal)) => return Err(NetError::Refused(refusal)),
        (false, _, None) => (Backend::Table, Reason::AutoWithoutVrfLocal),
    };
    Ok(Choice {
        backend,
        reason,
        probed,
    })
}

/// Keeps a probed answer in `cache` ("vrf" or "table", the file's historical values): every
/// answer [`choose`] gives without refusing says whether the kernel has VRF by its backend.
pub fn remember(cache: &Path, choice: &Choice) -> Result<(), NetError> {
    if choice.probed {
        write_json(cache, &choice.backend)?;
    }
    Ok(())
}

/// Whether the kernel can create VRF devices, logged.
fn probe() -> Result<bool, NetError> {
    let has_vrf = vrf::supported()?;
    crate::log::info(
        "routing domain: probed the kernel's VRF support",
        serde_json::json!({"vrf": has_vrf}),
    );
    Ok(has_vrf)
}
