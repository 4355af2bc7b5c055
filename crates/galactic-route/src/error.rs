//! The plugin's error type, mapped to CNI codes only at the edge ([`RouteError::into_cni`]).

use crate::conf::StanzaError;
use galactic_core::cni::{CniError, Code, ErrorCode};
use galactic_core::failpoint::Injected;
use galactic_core::lockfile::LockError;
use galactic_core::net::NetError;
use galactic_core::state::StateError;

/// Everything that can stop an operation of this plugin.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The stanza is invalid (code 7).
    #[error(transparent)]
    Stanza(#[from] StanzaError),
    /// A protocol-level error that already carries its code (a malformed `prevResult`).
    #[error(transparent)]
    Cni(#[from] CniError),
    /// STATUS: the node cannot service ADD (code 50).
    #[error(transparent)]
    NotReady(#[from] galactic_core::net::NodeNotReady),
    /// A failure point armed by a test (debug builds only; code 999).
    #[error(transparent)]
    Injected(#[from] Injected),
    /// ADD/CHECK without `prevResult` (code 6).
    #[error(
        "no prevResult: galactic-route must follow a master plugin (galactic-cni or \
         galactic-tap-cni) in the chain, whose result names the host interface"
    )]
    NoPrevResult,
    /// The stanza names another attachment than this chain's master created (code 7).
    #[error(transparent)]
    Chain(#[from] galactic_core::attachment::ChainMismatch),
    /// The VPC has no routing domain on this node (code 7).
    #[error(
        "VPC {vpc} has no routing domain on this node: galactic-route must follow the VPC's \
         master plugin (galactic-cni or galactic-tap-cni), which creates it"
    )]
    NoDomain {
        /// The VPC as configured.
        vpc: String,
    },
    /// The host interface does not exist (code 7).
    #[error(
        "host interface {name} does not exist: galactic-route must follow the master plugin \
         that creates it"
    )]
    NoHostInterface {
        /// `G{vpc:9}{att:3}H`.
        name: String,
    },
    /// The VPC table already routes a termination's destination elsewhere (code 7).
    #[error(
        "termination {route} conflicts with {existing} already in the VPC table; galactic-route \
         never replaces a route it did not install"
    )]
    Conflict {
        /// The route this plugin wanted.
        route: String,
        /// What the table holds for the destination.
        existing: String,
    },
    /// The kernel refused to install a termination (code 7 when it judged the route invalid,
    /// e.g. `via` is a local address; 5 otherwise).
    #[error("install termination {route}: {source}")]
    Install {
        /// The route.
        route: String,
        /// The kernel's answer.
        #[source]
        source: NetError,
    },
    /// Another kernel operation failed (code 5; 11 for a busy node lock).
    #[error("{what}: {source}")]
    Net {
        /// What was being done.
        what: &'static str,
        /// The failure.
        #[source]
        source: NetError,
    },
    /// The ownership record cannot be read or written (code 5).
    #[error(transparent)]
    Record(#[from] StateError),
    /// The per-VPC lock of the route records (code 11 on timeout, else 5).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// CHECK found differences (code 100), each naming the route.
    #[error("CHECK failed: {}", .0.join("; "))]
    CheckFailed(Vec<String>),
    /// GC could not clean every VPC (code 5); what it could clean is cleaned.
    #[error("GC could not remove everything: {}", .0.join("; "))]
    GcIncomplete(Vec<String>),
}

/// Wraps a kernel error with what was being done.
pub fn net(what: &'static str) -> impl FnOnce(NetError) -> RouteError {
    move |source| RouteError::Net { what, source }
}

impl ErrorCode for RouteError {
    fn code(&self) -> Code {
        match self {
            Self::Stanza(_)
            | Self::Chain(_)
            | Self::NoDomain { .. }
            | Self::NoHostInterface { .. }
            | Self::Conflict { .. } => Code::INVALID_CONFIG,
            Self::Cni(e) => e.code,
            Self::NoPrevResult => Code::DECODE,
            Self::Install { source, .. } if kernel_judged_invalid(source) => Code::INVALID_CONFIG,
            Self::Net {
                source: NetError::Busy(_),
                ..
            }
            | Self::Lock(LockError::Timeout { .. }) => Code::TRY_AGAIN_LATER,
            Self::CheckFailed(_) => Code::CHECK_FAILED,
            Self::Install { .. }
            | Self::Net { .. }
            | Self::Record(_)
            | Self::Lock(_)
            | Self::GcIncomplete(_) => Code::IO,
            Self::NotReady(_) => Code::NOT_AVAILABLE,
            Self::Injected(_) => Code::INTERNAL,
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Cni(e) => e.msg.clone(),
            other => other.to_string(),
        }
    }

    fn details(&self) -> Option<String> {
        match self {
            Self::Cni(e) => e.details.clone(),
            _ => None,
        }
    }
}

/// `EINVAL`/`ENETUNREACH`/`EHOSTUNREACH` on a route add mean the kernel rejects the route itself
/// (its next hop is local, unreachable, …): a configuration problem, not an I/O one.
fn kernel_judged_invalid(source: &NetError) -> bool {
    matches!(source, NetError::Kernel { source, .. }
        if matches!(source.raw_os_error(), Some(libc::EINVAL | libc::ENETUNREACH | libc::EHOSTUNREACH)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_at_the_edge() {
        let kernel = |errno: i32| NetError::Kernel {
            what: "add".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        let cases = [
            (RouteError::NoPrevResult, 6),
            // A stanza naming another attachment than its master's is a configuration error.
            (
                RouteError::Chain(galactic_core::attachment::ChainMismatch::Interface {
                    found: "x".into(),
                    expected: "y".into(),
                }),
                7,
            ),
            (RouteError::NoDomain { vpc: "A".into() }, 7),
            (
                RouteError::Install {
                    route: "r".into(),
                    source: kernel(libc::EINVAL),
                },
                7,
            ),
            (
                RouteError::Install {
                    route: "r".into(),
                    source: kernel(libc::ENOMEM),
                },
                5,
            ),
            (
                RouteError::Net {
                    what: "w",
                    source: NetError::Busy("held".into()),
                },
                11,
            ),
            (RouteError::CheckFailed(vec!["a".into()]), 100),
            (RouteError::Cni(CniError::decode("bad prevResult")), 6),
        ];
        for (err, code) in cases {
            assert_eq!(err.code(), Code(code), "{err}");
            assert_eq!(err.to_cni().code, Code(code));
        }
    }

    #[test]
    fn the_missing_prev_result_message_says_what_to_do() {
        let msg = RouteError::NoPrevResult.to_cni().msg;
        assert!(msg.contains("must follow a master plugin"), "{msg}");
    }
}
