//! Kernel networking for the master and route plugins.
//!
//! - [`netns`]: network-namespace handles, and running code inside one on a dedicated thread;
//! - [`netlink`]: one thin, typed, synchronous layer over rtnetlink (links, addresses, routes,
//!   rules, neighbours) whose sockets are opened inside the namespace they act on;
//! - [`sysctl`]: per-interface and node-wide `net.*` settings;
//! - [`firewall`]: the forward-accept rules this project owns in nftables;
//! - [`domain`]: a VPC's routing domain, with a VRF or a policy-routing (table + rules) backend.
//!
//! Namespace switches never happen on a thread that returns to a pool: see [`netns::run_in`].

pub mod domain;
pub mod firewall;
pub mod netlink;
pub mod netns;
pub mod nftables;
pub mod sysctl;

use std::io;
use std::os::fd::AsRawFd;

/// Bounds each receive on `socket` to `timeout`, after which it fails with `WouldBlock`: a
/// kernel that does not answer (or a notification that never comes) costs a wait, not a hang.
pub(crate) fn set_receive_timeout(socket: &impl AsRawFd, timeout: libc::timeval) -> io::Result<()> {
    // SAFETY: a valid socket descriptor, a pointer to a timeval and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A kernel networking failure, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The object does not exist.
    #[error("{what}: not found")]
    NotFound {
        /// What was looked up.
        what: String,
    },
    /// The kernel refused with an errno.
    #[error("{what}: {source}")]
    Kernel {
        /// What was being done.
        what: String,
        /// The errno as an I/O error.
        #[source]
        source: io::Error,
    },
    /// Something local (a file, a thread, a socket) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The kernel lacks something this operation needs.
    #[error("{what}: unsupported by this kernel")]
    Unsupported {
        /// What is missing.
        what: String,
    },
    /// The node is in a state this operation cannot proceed from.
    #[error("{0}")]
    Conflict(String),
    /// A node-wide lock could not be had in time: retry later.
    #[error("{0}")]
    Busy(String),
    /// A state file of this node.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The node config's `routing_domain` cannot work on this node as configured.
    #[error(transparent)]
    Refused(#[from] domain::backend::Refusal),
    /// A failure point armed by a test (debug builds only).
    #[error(transparent)]
    Injected(#[from] crate::failpoint::Injected),
}

impl NetError {
    /// Wraps an errno-carrying error.
    pub fn kernel(what: impl Into<String>, source: io::Error) -> Self {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENOENT) | Some(libc::ESRCH) => Self::NotFound { what },
            Some(libc::EOPNOTSUPP) => Self::Unsupported { what },
            _ => Self::Kernel { what, source },
        }
    }

    /// Whether the error means "already exists".
    pub fn is_exists(&self) -> bool {
        matches!(self, Self::Kernel { source, .. } if source.raw_os_error() == Some(libc::EEXIST))
    }

    /// Whether the error means "not found".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether a state file could not be written because its disk is full: nothing is lost by
    /// answering "try again later", everything is by answering success.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::State(e) if e.is_disk_full())
    }
}

/// Why a plugin that changes this node's network cannot service ADD (STATUS, code 50).
#[derive(Debug, thiserror::Error)]
pub enum NodeNotReady {
    /// No netlink socket, or it does not answer.
    #[error("netlink is not usable: {0}")]
    Netlink(#[source] NetError),
    /// Records cannot be written.
    #[error("state directory {} is not writable: {source}", dir.display())]
    StateDir {
        /// The node's state directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: crate::state::StateError,
    },
}

/// STATUS of a plugin that changes this node's network and records it under `state_dir`: a
/// netlink socket answers a request and the state directory takes a file.
pub fn readiness(state_dir: &std::path::Path) -> Result<(), NodeNotReady> {
    netlink::Netlink::current()
        .and_then(|nl| nl.require_link("lo"))
        .map_err(NodeNotReady::Netlink)?;
    crate::state::probe_writable(state_dir).map_err(|source| NodeNotReady::StateDir {
        dir: state_dir.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests;
