//! The eBPF uSID datapath, as the CNI chain sees it: the pinned-map ABI ([`abi`]), the uSID
//! codec ([`usid`]), the map definitions and pin directory ([`maps`]), per-attachment
//! registration, removal and GC ([`registry`]), the tc attachment of the pinned egress
//! program ([`tc`]), and the node's uplink as the datapath needs it: the NAT66 default egress
//! and the node rows ([`uplink`]). The datapath programs themselves are loaded by the node's datapath loader;
//! this module only writes their tables. See `docs/ebpf.md`.

pub mod abi;
pub mod maps;
pub mod registry;
pub mod tc;
pub mod uplink;
pub mod usid;

pub use maps::{DEFAULT_PIN_DIR, PIN_DIR_ENV};
pub use registry::{sweep_attachments, unregister_attachment, unregister_or_defer};

use std::path::PathBuf;

/// Why a datapath operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// A pinned map is absent: the datapath was not loaded on this node.
    #[error("eBPF datapath not loaded: {} is not pinned; the galactic-cni DaemonSet's `datapath` container (upstream's `galactic-cni run`) pins it: check that container on this node (docs/ebpf.md, \"The datapath container\"), or set ebpf_datapath: off on a node that deliberately has no datapath (in tests, create empty maps with `cargo xtask bpf-pin-maps --dir <dir>`)", path.display())]
    NotLoaded {
        /// The missing pin.
        path: PathBuf,
    },
    /// A map operation failed.
    #[error("{op} {map}: {source}")]
    Map {
        /// The map.
        map: &'static str,
        /// What was being done.
        op: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// Pinning a new map failed.
    #[error("pin {}: {source}", path.display())]
    Pin {
        /// The pin path.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: Box<aya::pin::PinError>,
    },
    /// A map is pinned with a different definition than the ABI's.
    #[error("{} is pinned with definition ({found}), want ({want}); remove it or fix the loader", path.display())]
    Incompatible {
        /// The pin path.
        path: PathBuf,
        /// The ABI's definition.
        want: Box<maps::MapDef>,
        /// The pinned map's.
        found: Box<maps::MapDef>,
    },
    /// The uSID cannot be formed.
    #[error(transparent)]
    Usid(#[from] usid::UsidError),
    /// A registration record or lock file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A registration record.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// The registration lock was held too long (retry later).
    #[error(transparent)]
    Busy(crate::lockfile::LockError),
    /// NAT66 shard SIDs are configured and none has a route, link and next-hop MAC yet
    /// (retryable: the fabric route or neighbour may appear).
    #[error("no egress shard SID is resolvable yet, out of {configured} configured: {}", reasons.join("; "))]
    NoShardSidResolvable {
        /// How many SIDs are configured.
        configured: usize,
        /// `<sid>: <why>` for each.
        reasons: Vec<String>,
    },
    /// The tc attachment of the pinned program failed.
    #[error("attach {program} to {ifname}: {source}")]
    Attach {
        /// The program pin.
        program: String,
        /// The interface.
        ifname: String,
        /// aya's error.
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
}
