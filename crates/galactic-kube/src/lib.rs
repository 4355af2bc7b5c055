//! Kubernetes: the client built from the node's kubeconfig, the custom resource types galactic
//! reads and writes, transient-error retry, and the NetworkAttachmentDefinition helpers the masters
//! call.
//!
//! Every plugin process is short-lived and synchronous, so [`KubeClient`] owns a current-thread
//! Tokio runtime and exposes blocking calls; each call has its own timeout and is retried with
//! exponential backoff when the failure is transient (5xx, 429, timeouts, refused or dropped
//! connections). Permanent failures (validation, 403, 404, 409) are returned at once: a 409 is
//! resolved by the caller re-reading and re-applying, never by blind retry. So are a server
//! certificate the kubeconfig's CA refuses and a 401 for its token ([`KubeError::is_refused`]):
//! the same kubeconfig would be refused again.
//!
//! The test kit (`galactic-testkit`) serves a loopback API server over HTTPS, with a CA and a
//! bearer token, for tests.

mod client;
mod crd;
mod error;
mod nad;
mod node;
mod patch;
mod retry;
mod transport;

pub use client::{ClientOptions, KubeClient, Together, TogetherFuture};
pub use crd::{
    crds, upstream_shape, AddressFamily, Afi, BGPAdvertisement, BGPAdvertisementSpec,
    BGPAdvertisementStatus, BGPRouter, BGPRouterSpec, BGPRouterStatus, BGPVRFInstance,
    BGPVRFInstanceSpec, BGPVRFInstanceStatus, Condition, ConditionStatus, Conditions,
    EgressAddressFamily, EgressShardClaim, EgressShardClaimSpec, EgressShardClaimStatus,
    LabelSelector, LabelSelectorRequirement, NameRef, NetworkAttachmentDefinition,
    NetworkAttachmentDefinitionSpec, Nptv6, OriginType, OriginateFrom, PeerSummary,
    RedistributeSource, ResolvedConfig, RouteTarget, RouterStatus, SRv6Function, Safi, ShardRef,
    SpecPresence, TargetRef, GROUP, VERSION,
};
pub use error::{ChainError, KubeError};
pub use nad::{
    annotate_nad_host_interface, check_chain, verify_chain_complete, HOST_INTERFACE_ANNOTATION,
};
pub use node::{detect_node_name, local_addresses, match_node, verify_node_identity};
pub use patch::merge_patch;
pub use retry::{classify, refused_certificate, ErrorClass, RetryPolicy};
