//! What the lab's benchmarks and campaigns and the fixtures they run on share: their error type,
//! and a thread's visit to a throwaway host namespace.
//!
//! A campaign or a bench runs many plugin processes inside one host namespace. Entering it
//! once on the driving thread ([`Entered`]), so that every process it starts is born there, is
//! what a node does; `ip netns exec` per call (what [`crate::Invocation::in_netns`] does) would
//! add a process and a mount namespace to every measured call.

use crate::host::Host;
use crate::privileged::TestNetns;
use crate::runtime::RuntimeError;
use crate::TestNode;
use nix::sched::{setns, CloneFlags};
use serde_json::Value;
use std::fs::File;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::MutexGuard;

/// Why a bench or campaign could not run (its findings are reported, not errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A plugin's or tool's output was not the JSON expected.
    #[error("{what}: {source}")]
    Json {
        /// Whose output.
        what: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Entering or leaving a namespace failed.
    #[error("{what}: {source}")]
    Netns {
        /// Which move.
        what: &'static str,
        /// The cause.
        #[source]
        source: nix::Error,
    },
    /// A kernel operation the harness performs itself failed.
    #[error("{what}: {source}")]
    Kernel {
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: galactic_core::net::NetError,
    },
    /// A chain operation of the test kit's runtime failed where it must not.
    #[error(transparent)]
    Runtime(#[from] Box<RuntimeError>),
    /// A plugin failed where the harness needs it to succeed.
    #[error("{plugin} {command} failed: {reply}")]
    Plugin {
        /// The plugin.
        plugin: String,
        /// The CNI verb.
        command: String,
        /// Its reply (stdout).
        reply: String,
    },
    /// Something the harness itself depends on did not hold (no root, a warm-up that failed,
    /// a probe that reported nothing).
    #[error("{0}")]
    Precondition(String),
    /// A campaign found broken invariants (see its report).
    #[error("invariants failed: {0}")]
    Invariants(String),
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Self::Runtime(Box::new(e))
    }
}

/// Results of the harness.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Error::Io` with `what` as context.
pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// `Error::Json` with `what` as context.
pub fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> Error {
    let what = what.into();
    move |source| Error::Json { what, source }
}

/// Fails unless this process is root (the harness creates network namespaces).
pub fn require_root() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    Err(Error::Precondition(
        "needs root (it creates network namespaces)".into(),
    ))
}

/// The calling thread inside a namespace until drop, which returns it to where it was. Threads
/// it spawns meanwhile start there too.
pub struct Entered {
    original: Option<File>,
    /// Not `Send`: the namespace belongs to the thread that entered it, and only that thread
    /// can leave it (shared references, e.g. to threads it spawns, are fine).
    _thread_bound: PhantomData<MutexGuard<'static, ()>>,
}

impl Entered {
    /// Moves the calling thread into `netns`.
    pub fn new(netns: &TestNetns) -> Result<Self> {
        let original =
            File::open("/proc/thread-self/ns/net").map_err(io("open this thread's netns"))?;
        let target =
            File::open(netns.path()).map_err(io(format!("open {}", netns.path().display())))?;
        setns(target, CloneFlags::CLONE_NEWNET).map_err(|source| Error::Netns {
            what: "enter the host namespace",
            source,
        })?;
        Ok(Self {
            original: Some(original),
            _thread_bound: PhantomData,
        })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Some(original) = self.original.take() {
            // Nothing better to do on failure: the thread stays in a namespace about to go.
            let _ = setns(original, CloneFlags::CLONE_NEWNET);
        }
    }
}

impl Host {
    /// A host like [`Host::new`] whose bin dir links `plugins` from `built` (a directory of
    /// plugins built by the caller, e.g. xtask's release build) instead of the binaries next to
    /// the running test.
    pub fn with_plugins_from(
        tag: &str,
        node_extra: Value,
        built: &Path,
        plugins: &[&str],
    ) -> Result<Self> {
        let node = TestNode::new(node_extra);
        let bin_dir = node.dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).map_err(io("create the bin dir"))?;
        for name in plugins {
            let source = built.join(name);
            if !source.is_file() {
                return Err(Error::Precondition(format!(
                    "{} was not built",
                    source.display()
                )));
            }
            std::os::unix::fs::symlink(&source, bin_dir.join(name))
                .map_err(io(format!("link {name}")))?;
        }
        Ok(Self {
            netns: TestNetns::node_host(tag),
            node,
            bin_dir,
        })
    }
}
