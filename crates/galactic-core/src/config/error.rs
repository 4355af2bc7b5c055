//! What can be wrong with a node config, and where a value came from.

use std::fmt;
use std::path::PathBuf;

/// A node config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read node config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error("node config {path} is malformed: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A value does not parse.
    #[error("invalid {key} {value:?} (from {origin}): {why}")]
    Value {
        /// The key.
        key: &'static str,
        /// The raw value.
        value: String,
        /// Where it came from.
        origin: Source,
        /// What is accepted.
        why: &'static str,
    },
    /// A stanza sets a node-level key (code 7).
    #[error("{key} is a node setting and cannot be set in the network configuration (whoever writes the NetworkAttachmentDefinition must not steer the node's files and services); set {node_key} in the node config {} or as GALACTIC_CNI_{}", node_config.display(), node_key.to_ascii_uppercase())]
    NodeKeyInStanza {
        /// The key as the stanza spells it (`log_file`, `ipam.data_dir`).
        key: String,
        /// Its node config name.
        node_key: &'static str,
        /// The node config file.
        node_config: PathBuf,
    },
    /// On a node that allows stanza overrides, a stanza path outside the allowed directories.
    #[error("{key} {value} is outside the directories this node lets a network configuration use ({})", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))]
    OutsideOverrideDirs {
        /// The key as the stanza spells it.
        key: String,
        /// The value as written.
        value: String,
        /// `stanza_override_dirs`.
        dirs: Vec<PathBuf>,
    },
    /// The stanza's `namespace` is not a Kubernetes namespace name (code 7).
    #[error("namespace {0:?} is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)")]
    Namespace(String),
    /// One entry of a comma-separated list does not parse.
    #[error("invalid {key} entry {entry:?} in {value:?} (from {origin}): {why}")]
    Entry {
        /// The key.
        key: &'static str,
        /// The offending entry, trimmed.
        entry: String,
        /// The whole raw value.
        value: String,
        /// Where it came from.
        origin: Source,
        /// What is accepted.
        why: &'static str,
    },
    /// A key and its old name are both set, to different values.
    #[error("{key} (from {key_origin}) and its old name {alias} (from {alias_origin}) are both set and differ; keep {key} and remove {alias}")]
    AliasConflict {
        /// The current name.
        key: &'static str,
        /// The old name.
        alias: &'static str,
        /// Where the current name's value came from.
        key_origin: Source,
        /// Where the old name's value came from.
        alias_origin: Source,
    },
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The plugin stanza.
    Stanza,
    /// An environment variable.
    Env(String),
    /// The node config file.
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stanza => f.write_str("the plugin configuration"),
            Self::Env(name) => f.write_str(name),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}
