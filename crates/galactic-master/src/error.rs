//! The masters' errors, and their CNI codes (decided here, nowhere else).

use crate::conf::StanzaError;
use crate::delegate::DelegateError;
use galactic_core::cni::{CniError, Code, ErrorCode};
use galactic_core::failpoint::Injected;
use galactic_core::lockfile::LockError;
use galactic_core::net::{NetError, NodeNotReady};
use std::path::PathBuf;

/// Why a master operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// The stanza is invalid (code 7).
    #[error(transparent)]
    Stanza(#[from] StanzaError),
    /// ADD was given a `prevResult`: a master must be first in the chain (code 7).
    #[error(
        "a master plugin must be first in the chain, but the configuration carries a prevResult"
    )]
    NotFirst,
    /// The master was started as another plugin's delegate (code 7).
    #[error("a master plugin cannot run as a delegate (it was started with {}); check the ipam.type of the network configuration", crate::delegate::DEPTH_ENV)]
    Delegated,
    /// CHECK without the ADD's result (code 7).
    #[error("CHECK needs the prevResult of the ADD (the runtime's cached result)")]
    NoPrevResult,
    /// The MAC the runtime asked for is not usable (code 7).
    #[error(transparent)]
    Mac(#[from] crate::mac::MacError),
    /// The request as the protocol layer judged it: a missing variable, an undecodable
    /// `prevResult` or GC list (its own code).
    #[error(transparent)]
    Protocol(#[from] CniError),
    /// `CNI_NETNS` cannot be opened (code 4).
    #[error("CNI_NETNS: {source}")]
    Netns {
        /// The path the runtime gave.
        path: PathBuf,
        /// Why it cannot be used.
        #[source]
        source: NetError,
    },
    /// A kernel or state-file step failed: `step` says what was being done. A busy node lock
    /// is code 11, a node state this attachment cannot proceed from code 7, the rest code 5.
    #[error("{step}: {source}")]
    Node {
        /// What was being done.
        step: &'static str,
        /// The failure.
        #[source]
        source: NetError,
    },
    /// IPv6 would not be forwarded for the pod: the kernel has no `force_forwarding` (before
    /// 6.17) and the node's `net.ipv6.conf.all.forwarding` is 0 (code 5).
    #[error("IPv6 forwarding is off for pods: this kernel has no net.ipv6.conf.*.force_forwarding (it arrived in 6.17) and net.ipv6.conf.all.forwarding is 0 in the plugins' network namespace; set net.ipv6.conf.all.forwarding=1 on this node (e.g. in /etc/sysctl.d/)")]
    Ipv6ForwardingOff,
    /// The IPAM delegate or the NAD helper failed (its code, passed through).
    #[error(transparent)]
    Delegate(#[from] DelegateError),
    /// The NAD helper (galactic-bgp) is not in `CNI_PATH` while the node publishes to
    /// Kubernetes (code 7).
    #[error("{source}; with the kubernetes publisher the master needs {helper} to verify and annotate the pod's NetworkAttachmentDefinition")]
    NadHelperMissing {
        /// The helper's name.
        helper: &'static str,
        /// The lookup failure.
        #[source]
        source: DelegateError,
    },
    /// Another live container holds this VPC attachment on the node (code 7).
    #[error("VPC attachment {attachment} of VPC {vpc} is already attached on this node by container {holder} ({netns}); an attachment id can be attached once per node")]
    Claimed {
        /// The attachment id.
        attachment: String,
        /// The VPC id.
        vpc: String,
        /// The holder's container id.
        holder: String,
        /// The holder's netns, or "no netns".
        netns: String,
    },
    /// The host interface exists with no record of this node: the upstream chain's attachment
    /// of another pod or VM, or someone else's device (code 7, like [`Self::Claimed`]).
    #[error("VPC attachment {attachment} of VPC {vpc} is already attached on this node: host interface {name} exists with no attachment record, so it belongs to a pod or VM the upstream Go chain attached (or to someone else) and is left alone; an attachment id can be attached once per node. DEL that attachment first (its DEL adopts and removes it), or delete {name} if nothing uses it")]
    Unrecorded {
        /// The host interface.
        name: String,
        /// The attachment id.
        attachment: String,
        /// The VPC id.
        vpc: String,
    },
    /// `CNI_IFNAME` already exists inside the container (code 7).
    #[error("interface {0} already exists in the container")]
    GuestExists(String),
    /// The host interface exists and is not of the kind this master creates (code 7).
    #[error("{name} exists but is a {found} device, not {expected}; it is not ours to replace")]
    ForeignDevice {
        /// The interface.
        name: String,
        /// Its kind.
        found: String,
        /// The kind this master creates.
        expected: &'static str,
    },
    /// The IPAM delegate's result has no address (code 6).
    #[error("IPAM plugin {plugin:?} returned no addresses")]
    NoAddresses {
        /// The delegate.
        plugin: String,
    },
    /// CHECK found differences (code 100), each named.
    #[error("CHECK failed: {}", .0.join("; "))]
    CheckFailed(Vec<String>),
    /// STATUS: the plugin cannot service ADD (code 50).
    #[error(transparent)]
    NotReady(#[from] NotReady),
    /// A teardown (DEL, GC, a stale attachment's removal) did not remove everything; each
    /// failure named. Code 11 when one of them is worth a retry, else 5.
    #[error("{what}: {}", failures.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; "))]
    Incomplete {
        /// What could not finish, e.g. "DEL could not remove everything".
        what: &'static str,
        /// What failed.
        failures: Vec<MasterError>,
    },
    /// GC's convergence of a VPC could not restore everything (code 5); each failure named.
    #[error("VPC {vpc}: could not restore {}", failed.join("; "))]
    Converge {
        /// The VPC as recorded.
        vpc: String,
        /// What could not be restored, each with why.
        failed: Vec<String>,
    },
    /// One named part of a teardown failed (GC: an attachment, the datapath rows, …).
    #[error("{part}: {source}")]
    Part {
        /// What it was.
        part: String,
        /// The failure.
        #[source]
        source: Box<MasterError>,
    },
    /// The eBPF datapath's rows of this node could not be swept (code 11 when its lock is busy,
    /// else 5).
    #[error("eBPF datapath rows: {source}")]
    Datapath {
        /// The datapath's error.
        #[source]
        source: galactic_core::bpf::BpfError,
    },
    /// The attachment's lock stayed taken: another ADD, DEL or GC of the same VPC attachment is
    /// running (code 11: the runtime retries).
    #[error("the attachment is busy (another ADD, DEL or GC of it is running): {0}")]
    Busy(#[source] LockError),
    /// The attachment's lock file could not be used at all (code 5).
    #[error("cannot lock the attachment record: {0}")]
    Lock(#[source] LockError),
    /// A failure point armed by a test (debug builds only; code 999).
    #[error(transparent)]
    Injected(#[from] Injected),
    /// The device kind refuses the request as configured (code 7): its own typed error, e.g. a
    /// tap's `dan` without addresses.
    #[error("{0}")]
    Refused(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why STATUS says the plugin cannot service ADD.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// Netlink or the state directory.
    #[error(transparent)]
    Node(#[from] NodeNotReady),
    /// The tap master needs the tun device.
    #[error("/dev/net/tun is missing: taps cannot be created")]
    NoTun,
    /// The IPAM delegate is not installed.
    #[error("{}", .0.message())]
    Delegate(#[source] DelegateError),
    /// No routing domain backend works as the node config says (or its probe failed).
    #[error("routing domains: {0}")]
    RoutingDomain(#[source] NetError),
}

impl MasterError {
    /// Wraps a kernel or state-file failure of `step`.
    pub fn node<E: Into<NetError>>(step: &'static str) -> impl Fn(E) -> Self {
        move |source| Self::Node {
            step,
            source: source.into(),
        }
    }

    /// A failure to take an attachment's lock: busy when the wait ran out, I/O otherwise.
    pub fn lock(err: LockError) -> Self {
        match err {
            LockError::Timeout { .. } => Self::Busy(err),
            _ => Self::Lock(err),
        }
    }

    /// This failure as the named `part` of a larger teardown.
    pub fn part(self, part: impl Into<String>) -> Self {
        Self::Part {
            part: part.into(),
            source: Box::new(self),
        }
    }
}

impl ErrorCode for MasterError {
    fn code(&self) -> Code {
        match self {
            Self::Stanza(_)
            | Self::Mac(_)
            | Self::NotFirst
            | Self::Delegated
            | Self::NoPrevResult
            | Self::NadHelperMissing { .. }
            | Self::Claimed { .. }
            | Self::Unrecorded { .. }
            | Self::GuestExists(_)
            | Self::ForeignDevice { .. }
            | Self::Refused(_) => Code::INVALID_CONFIG,
            Self::Protocol(e) => e.code,
            Self::Netns { .. } => Code::INVALID_ENVIRONMENT,
            Self::Node { source, .. } => node_code(source),
            Self::Delegate(e) => e.code(),
            Self::NoAddresses { .. } => Code::DECODE,
            Self::Ipv6ForwardingOff => Code::IO,
            Self::CheckFailed(_) => Code::CHECK_FAILED,
            Self::NotReady(_) => Code::NOT_AVAILABLE,
            Self::Incomplete { failures, .. } => {
                if failures.iter().any(|f| f.code() == Code::TRY_AGAIN_LATER) {
                    Code::TRY_AGAIN_LATER
                } else {
                    Code::IO
                }
            }
            Self::Part { source, .. } => source.code(),
            Self::Converge { .. } => Code::IO,
            Self::Datapath {
                source: galactic_core::bpf::BpfError::Busy(_),
            } => Code::TRY_AGAIN_LATER,
            Self::Datapath { .. } => Code::IO,
            Self::Busy(_) => Code::TRY_AGAIN_LATER,
            Self::Lock(_) => Code::IO,
            Self::Injected(_) => Code::INTERNAL,
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Protocol(e) => e.msg.clone(),
            Self::Delegate(e) => e.message(),
            other => other.to_string(),
        }
    }

    fn details(&self) -> Option<String> {
        match self {
            Self::Protocol(e) => e.details.clone(),
            Self::Delegate(e) => e.details(),
            _ => None,
        }
    }
}

/// The code of a kernel or state-file failure: a busy lock is worth a retry.
fn node_code(err: &NetError) -> Code {
    match err {
        NetError::Busy(_) => Code::TRY_AGAIN_LATER,
        e if e.is_disk_full() => Code::TRY_AGAIN_LATER,
        NetError::Conflict(_) | NetError::Refused(_) => Code::INVALID_CONFIG,
        NetError::Injected(_) => Code::INTERNAL,
        _ => Code::IO,
    }
}
