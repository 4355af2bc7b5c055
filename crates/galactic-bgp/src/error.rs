//! galactic-bgp's errors, and their CNI codes (decided here, nowhere else).

use crate::store::StoreError;
use galactic_core::bpf::BpfError;
use galactic_core::cni::{CniError, Code, ErrorCode};
use galactic_core::failpoint::Injected;
use galactic_core::ident::IdentError;
use galactic_core::lockfile::LockError;
use galactic_kube::KubeError;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BgpError {
    /// `vpc` or `vpcattachment` of the stanza is invalid (code 7).
    #[error(transparent)]
    Stanza(#[from] IdentError),
    /// The stanza's `egress` block is not one galactic-bgp accepts (code 7).
    #[error(transparent)]
    Egress(#[from] crate::conf::EgressStanzaError),
    /// The stanza names another attachment than this chain's master created (code 7).
    #[error(transparent)]
    Chain(#[from] galactic_core::attachment::ChainMismatch),
    /// `prevResult` is absent or inconsistent (code 6).
    #[error("infer from prevResult: {0}")]
    PrevResult(#[from] PrevResultError),
    /// The request as the protocol layer judged it (a missing variable: its own code).
    #[error(transparent)]
    Protocol(#[from] CniError),
    /// The runtime did not say which pod this is, and the step needs it (code 4).
    #[error("{step}: CNI_ARGS has no K8S_POD_NAME/K8S_POD_NAMESPACE")]
    NoPod {
        /// What needed the pod.
        step: &'static str,
    },
    /// The node's name is unknown and could not be detected (code 4).
    #[error("node name is required (set node_name in the node config or NODE_NAME): {0}")]
    NodeName(#[source] NodeNameError),
    /// The publication backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A Kubernetes call outside the publication backend (the NAD steps).
    #[error(transparent)]
    Kube(#[from] KubeError),
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
    /// A BGPRouter document of the local backend does not parse (code 7).
    #[error("invalid BGPRouter document: {0}")]
    BadRouter(#[source] StoreError),
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
    /// The eBPF datapath refused (code 11 when its lock is busy or no egress shard SID resolves
    /// yet, else 999).
    #[error("{what}: {source}")]
    Datapath {
        /// What was being done.
        what: &'static str,
        /// The datapath's error.
        #[source]
        source: BpfError,
    },
    /// The network opted in to internet egress and the node config names no egress shard
    /// (code 7).
    #[error("this network opts in to internet egress (egress.internet.mode Enabled), but this node names no egress shard: set egress_shard_sids in the node config or GALACTIC_CNI_EGRESS_SHARD_SIDS")]
    NoEgressShard,
    /// A configured egress shard SID cannot carry a tenant Argument (code 7).
    #[error("egress shard SID of egress_shard_sids: {0}")]
    EgressSid(#[source] galactic_core::bpf::usid::UsidError),
    /// The VPC has no routing domain on this node: the master's ADD did not run here (code 999).
    #[error(
        "VPC {0} has no routing domain on this node; galactic-bgp must be chained after a master"
    )]
    NoDomain(String),
    /// A kernel lookup failed (code 999).
    #[error(transparent)]
    Net(#[from] galactic_core::net::NetError),
    /// CHECK found a difference (code 999), described.
    #[error("CHECK: {0}")]
    Check(String),
    /// STATUS: a CRD galactic-bgp needs is not installed (code 50 through [`BgpError::NotReady`]).
    #[error(
        "the CRD {0} is not installed (install the Galactic API's network.datumapis.com CRDs)"
    )]
    CrdMissing(String),
    /// STATUS: an installed CRD lacks a property or enum value galactic-bgp reads or writes (code
    /// 50 through [`BgpError::NotReady`]).
    #[error(
        "the installed CRD {crd} lacks {} (galactic-bgp reads or writes it; install the Galactic API's v1alpha1 CRDs)",
        .lacking.join(", ")
    )]
    CrdLacks {
        /// The CRD's name.
        crd: String,
        /// What it lacks, worded for a person.
        lacking: Vec<String>,
    },
    /// STATUS: the publication backend is not ready (code 50).
    #[error("publication backend not ready: {0}")]
    NotReady(#[source] Box<BgpError>),
    /// A failure point armed by a test (debug builds only; code 999).
    #[error(transparent)]
    Injected(#[from] Injected),
}

/// What is wrong with `prevResult`.
#[derive(Debug, thiserror::Error)]
pub enum PrevResultError {
    /// The runtime sent none.
    #[error("no prevResult: galactic-bgp must be chained after a master plugin")]
    Missing,
    /// It does not decode.
    #[error("{}", .0.msg)]
    Decode(CniError),
    /// It lists no interface.
    #[error("prevResult has no interfaces")]
    NoInterfaces,
    /// More than one sandboxed interface.
    #[error("prevResult declares {0} interfaces with a non-empty sandbox, want 0 (tap master) or 1 (veth master)")]
    Sandboxes(usize),
    /// No interface outside a sandbox.
    #[error("prevResult has no host-side interface")]
    NoHostInterface,
    /// An `ips` entry names an interface that is not listed.
    #[error("ips entry {address} names interface {index}, but there are {count} interfaces")]
    InterfaceIndex {
        /// The address of the entry.
        address: String,
        /// Its interface index.
        index: usize,
        /// How many interfaces there are.
        count: usize,
    },
    /// A published prefix does not parse.
    #[error("prefix {0:?} does not parse")]
    Prefix(String),
}

/// Why the node's name could not be detected.
#[derive(Debug, thiserror::Error)]
pub enum NodeNameError {
    /// Listing this host's addresses failed.
    #[error("cannot list this host's addresses: {0}")]
    LocalAddresses(#[source] std::io::Error),
    /// No Node's InternalIP is one of this host's addresses (or the API failed).
    #[error(transparent)]
    Detect(KubeError),
    /// The local backend uses the host name, and there is none.
    #[error("no host name")]
    NoHostName,
    /// The name cannot be part of the CRD names.
    #[error(transparent)]
    Invalid(galactic_core::ident::NodeNameInvalid),
}

impl ErrorCode for BgpError {
    fn code(&self) -> Code {
        match self {
            Self::Stanza(_)
            | Self::Egress(_)
            | Self::Chain(_)
            | Self::NoRouter { .. }
            | Self::AmbiguousRouter { .. }
            | Self::BadRouter(_)
            | Self::Usid(_)
            | Self::NoEgressShard
            | Self::EgressSid(_) => Code::INVALID_CONFIG,
            Self::PrevResult(_) => Code::DECODE,
            Self::Protocol(e) => e.code,
            Self::NoPod { .. } | Self::NodeName(_) => Code::INVALID_ENVIRONMENT,
            Self::Contended { .. } => Code::TRY_AGAIN_LATER,
            Self::Store(e) => store_code(e),
            Self::Kube(e) => kube_code(e),
            // A busy lock, or no shard SID resolvable yet (decision 0031): the runtime's retry
            // can succeed once the lock is free or the fabric route and neighbour exist.
            Self::Datapath {
                source: BpfError::Busy(_) | BpfError::NoShardSidResolvable { .. },
                ..
            } => Code::TRY_AGAIN_LATER,
            Self::NotReady(_) | Self::CrdMissing(_) | Self::CrdLacks { .. } => Code::NOT_AVAILABLE,
            Self::VrfIdsExhausted { .. }
            | Self::NotOwned { .. }
            | Self::Check(_)
            | Self::Injected(_)
            | Self::Datapath { .. }
            | Self::NoDomain(_)
            | Self::Net(_) => Code::INTERNAL,
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Protocol(e) => e.msg.clone(),
            other => other.to_string(),
        }
    }
}

/// Transient and contended failures are code 11 (the runtime retries), invalid objects and
/// kubeconfigs code 7, local I/O code 5.
fn store_code(err: &StoreError) -> Code {
    match err {
        StoreError::Kube(e) => kube_code(e),
        StoreError::Lock(LockError::Timeout { .. }) | StoreError::Conflict { .. } => {
            Code::TRY_AGAIN_LATER
        }
        // Nothing could be recorded: a DEL must be retried, not forgotten.
        StoreError::State(e) if e.is_disk_full() => Code::TRY_AGAIN_LATER,
        StoreError::Io { source, .. } if is_disk_full(source) => Code::TRY_AGAIN_LATER,
        StoreError::Io { .. } | StoreError::Lock(_) | StoreError::State(_) => Code::IO,
        _ => Code::INTERNAL,
    }
}

fn is_disk_full(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{QuotaExceeded, StorageFull};
    matches!(e.kind(), StorageFull | QuotaExceeded)
}

/// Transient failures that outlived the retries are code 11; configuration problems code 7
/// (or 4 for a node that cannot be found); everything else 999. A refused server certificate or
/// token is the kubeconfig's problem (code 7), not code 11: it does not clear up by itself, and
/// code 11 on DEL would hold the pod in Terminating until someone rewrites the kubeconfig.
fn kube_code(err: &KubeError) -> Code {
    match err {
        KubeError::Kubeconfig { .. } | KubeError::ChainIncomplete { .. } => Code::INVALID_CONFIG,
        e if e.is_refused() => Code::INVALID_CONFIG,
        KubeError::NodeNotDetected(_) | KubeError::NodeIdentity { .. } => Code::INVALID_ENVIRONMENT,
        e if e.is_transient() => Code::TRY_AGAIN_LATER,
        e if e.is_invalid() => Code::INVALID_CONFIG,
        _ => Code::INTERNAL,
    }
}

impl BgpError {
    /// Wraps a datapath error with what was being done.
    pub fn datapath(what: &'static str) -> impl FnOnce(BpfError) -> Self {
        move |source| Self::Datapath { what, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn kubernetes_failures_get_their_codes_here() {
        let transient = KubeError::Timeout {
            what: "get".into(),
            timeout: Duration::from_secs(1),
            attempts: 4,
        };
        assert_eq!(BgpError::Kube(transient).code(), Code::TRY_AGAIN_LATER);
        let incomplete = KubeError::ChainIncomplete {
            namespace: "pods".into(),
            name: "n".into(),
            source: galactic_kube::ChainError::MissingBgp,
        };
        assert_eq!(BgpError::Kube(incomplete).code(), Code::INVALID_CONFIG);
        let resolve = KubeError::Resolve {
            host: "h".into(),
            why: "no address".into(),
        };
        assert_eq!(
            BgpError::Store(StoreError::Kube(resolve)).code(),
            Code::TRY_AGAIN_LATER
        );
        let untrusted = KubeError::Untrusted {
            what: "list BGPRouter".into(),
            kubeconfig: "/var/lib/galactic/kubeconfig".into(),
            why: rustls::CertificateError::UnknownIssuer,
        };
        assert_eq!(
            BgpError::Store(StoreError::Kube(untrusted)).code(),
            Code::INVALID_CONFIG
        );
        let unauthenticated = KubeError::Unauthenticated {
            what: "list BGPRouter".into(),
            kubeconfig: "/var/lib/galactic/kubeconfig".into(),
        };
        assert_eq!(BgpError::Kube(unauthenticated).code(), Code::INVALID_CONFIG);
        let busy = StoreError::Conflict { what: "w".into() };
        assert_eq!(BgpError::Store(busy).code(), Code::TRY_AGAIN_LATER);
    }
}
