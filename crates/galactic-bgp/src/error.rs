//! galactic-bgp's errors and their CNI codes.

use crate::store::StoreError;
use galactic_core::cni::{CniError, Code};

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BgpError {
    /// The stanza is invalid (code 7).
    #[error("{0}")]
    Config(String),
    /// `prevResult` is absent or inconsistent (code 6).
    #[error("infer from prevResult: {0}")]
    PrevResult(String),
    /// A required environment value is missing (code 4).
    #[error("{0}")]
    Env(String),
    /// The publication backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No BGPRouter targets this node (code 7).
    #[error("no BGPRouter found for node {node} in namespace {namespace}")]
    NoRouter {
        /// Node name.
        node: String,
        /// Namespace searched.
        namespace: String,
    },
    /// More than one BGPRouter targets this node (code 7).
    #[error(
        "ambiguous BGP config: {count} BGPRouters target node {node} in namespace {namespace}"
    )]
    AmbiguousRouter {
        /// How many.
        count: usize,
        /// Node name.
        node: String,
        /// Namespace.
        namespace: String,
    },
    /// Every VRF id of the router is taken (code 999).
    #[error("router {router} has no free VRF id in 1..4095 (all {used} in use)")]
    VrfIdsExhausted {
        /// The router.
        router: String,
        /// Ids in use.
        used: usize,
    },
    /// Concurrent writers kept winning (code 11: the runtime retries the ADD).
    #[error("{what}: still contended after {attempts} attempts")]
    Contended {
        /// What was being written.
        what: String,
        /// Attempts made.
        attempts: u32,
    },
    /// An EndpointSlice of that name exists and is not ours (code 999).
    #[error("EndpointSlice {namespace}/{name} already exists without a galactic.datum.net/tenant-id label; refusing to overwrite an object this plugin does not own")]
    NotOwned {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The router's SRv6 settings cannot give a uSID (code 7).
    #[error("compute SRv6 uSID: {0}")]
    Usid(#[from] galactic_core::bpf::usid::UsidError),
    /// The eBPF datapath refused (code 11 when its lock is busy or no NAT66 shard SID resolves
    /// yet, else 999).
    #[error("{what}: {source}")]
    Datapath {
        /// What was being done.
        what: &'static str,
        /// The datapath's error.
        #[source]
        source: galactic_core::bpf::BpfError,
    },
    /// The VPC has no routing domain on this node: the master's ADD did not run here (code 999).
    #[error(
        "VPC {0} has no routing domain on this node; galactic-bgp must be chained after a master"
    )]
    NoDomain(String),
    /// A kernel lookup failed (code 999).
    #[error(transparent)]
    Net(#[from] galactic_core::net::NetError),
    /// CHECK found a difference (code 999).
    #[error("CHECK: {0}")]
    Check(String),
    /// A failure point armed by a test (debug builds only; code 999).
    #[error("{0}")]
    Injected(String),
}

impl From<BgpError> for CniError {
    fn from(err: BgpError) -> Self {
        let code = match &err {
            BgpError::Config(_)
            | BgpError::NoRouter { .. }
            | BgpError::AmbiguousRouter { .. }
            | BgpError::Usid(_) => Code::INVALID_CONFIG,
            BgpError::PrevResult(_) => Code::DECODE,
            BgpError::Env(_) => Code::INVALID_ENVIRONMENT,
            BgpError::Contended { .. } => Code::TRY_AGAIN_LATER,
            BgpError::Store(e) => return e.to_cni(),
            // A busy lock, or no shard SID resolvable yet (decision 0031): the runtime's retry
            // can succeed once the lock is free or the fabric route and neighbour exist.
            BgpError::Datapath {
                source:
                    galactic_core::bpf::BpfError::Busy(_)
                    | galactic_core::bpf::BpfError::NoShardSidResolvable { .. },
                ..
            } => Code::TRY_AGAIN_LATER,
            BgpError::VrfIdsExhausted { .. }
            | BgpError::NotOwned { .. }
            | BgpError::Check(_)
            | BgpError::Injected(_)
            | BgpError::Datapath { .. }
            | BgpError::NoDomain(_)
            | BgpError::Net(_) => Code::INTERNAL,
        };
        CniError::new(code, err.to_string())
    }
}

impl BgpError {
    /// Wraps a datapath error with what was being done.
    pub fn datapath(what: &'static str) -> impl FnOnce(galactic_core::bpf::BpfError) -> Self {
        move |source| Self::Datapath { what, source }
    }
}
