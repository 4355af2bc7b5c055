//! The crate's errors, mapped to CNI codes here and nowhere else.

use crate::config::ConfigError;
use crate::request::RequestError;
use crate::store::StoreError;
use galactic_core::cni::{CniError, Code, ErrorCode};

/// Anything an operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The `ipam` block is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The runtime's address request cannot be granted.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// CHECK found no allocation for the attachment.
    #[error("no IPAM allocation recorded for attachment (network {network:?}, container {container_id:?}, interface {ifname:?})")]
    NoAllocation {
        /// Network name.
        network: String,
        /// Container id.
        container_id: String,
        /// Interface.
        ifname: String,
    },
    /// CHECK found the allocation different from `prevResult`.
    #[error("IPAM allocation differs from prevResult: {}", .0.join("; "))]
    Mismatch(Vec<String>),
    /// The request itself (environment, `prevResult`, GC list) as the protocol layer judged it.
    #[error(transparent)]
    Protocol(#[from] CniError),
    /// STATUS: the plugin cannot service ADD for this reason.
    #[error(transparent)]
    NotReady(Box<IpamError>),
}

impl ErrorCode for IpamError {
    fn code(&self) -> Code {
        match self {
            Self::Config(_) | Self::Request(_) => Code::INVALID_CONFIG,
            // What the runtime asked for is not to be had: only another request cures it.
            Self::Store(StoreError::InUse { .. } | StoreError::Holds { .. }) => {
                Code::INVALID_CONFIG
            }
            // Nothing could be recorded: a DEL that cannot record its release must be retried,
            // never forgotten.
            Self::Store(StoreError::Busy { .. } | StoreError::Full { .. }) => Code::TRY_AGAIN_LATER,
            Self::Store(StoreError::Exhausted { .. }) => Code::NOT_AVAILABLE,
            Self::Store(_) => Code::IO,
            Self::NoAllocation { .. } | Self::Mismatch(_) => Code::CHECK_FAILED,
            Self::Protocol(e) => e.code,
            // Not ready (50), except a busy store (11: retry) and a config only a fix cures (7).
            Self::NotReady(inner) => match inner.code() {
                code @ (Code::TRY_AGAIN_LATER | Code::INVALID_CONFIG) => code,
                _ => Code::NOT_AVAILABLE,
            },
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Protocol(e) => e.msg.clone(),
            other => other.to_string(),
        }
    }

    fn details(&self) -> Option<String> {
        match self {
            Self::Protocol(e) => e.details.clone(),
            _ => None,
        }
    }
}
