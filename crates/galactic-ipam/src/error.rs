//! The crate's errors, mapped to CNI codes here and nowhere else.

use crate::config::ConfigError;
use crate::store::StoreError;
use galactic_core::cni::{CniError, Code};

/// Anything an operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The `ipam` block is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
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
}

impl IpamError {
    /// The CNI code of this error.
    pub fn code(&self) -> Code {
        match self {
            Self::Config(_) => Code::INVALID_CONFIG,
            Self::Store(StoreError::Busy { .. }) => Code::TRY_AGAIN_LATER,
            Self::Store(StoreError::Exhausted { .. }) => Code::NOT_AVAILABLE,
            Self::Store(_) => Code::IO,
            Self::NoAllocation { .. } | Self::Mismatch(_) => Code::CHECK_FAILED,
        }
    }

    /// The error as the runtime sees it.
    pub fn into_cni(self) -> CniError {
        CniError::new(self.code(), self.to_string())
    }

    /// The error as STATUS reports it: not ready (50), except a busy store (11, retry).
    pub fn into_status(self) -> CniError {
        let code = match self.code() {
            Code::TRY_AGAIN_LATER | Code::INVALID_CONFIG => self.code(),
            _ => Code::NOT_AVAILABLE,
        };
        CniError::new(code, self.to_string())
    }
}

impl From<IpamError> for CniError {
    fn from(e: IpamError) -> Self {
        e.into_cni()
    }
}
