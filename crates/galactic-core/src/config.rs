//! The node configuration: settings shared by every plugin on a node.
//!
//! Each key resolves in this order, first non-empty value wins:
//! 1. the plugin stanza's own field (e.g. `"log_level": "debug"` in the conflist entry);
//! 2. the environment variable `GALACTIC_CNI_<KEY>` (upper case);
//! 3. the node config file: JSON at `/etc/galactic/node.json`, or at `$GALACTIC_CNI_NODE_CONFIG`;
//!    when the default file is absent, the `galactic-cni` entry of the upstream static conflist
//!    `/etc/cni/net.d/10-galactic.conflist` is read instead, so a drop-in upgrade keeps its settings;
//! 4. the default.
//!
//! A missing file is fine; a malformed one is an error naming the file.

use crate::log::Level;
use serde_json::Value;
use std::fmt;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

mod ebpf;

/// Default location of the node config file.
pub const DEFAULT_NODE_CONFIG: &str = "/etc/galactic/node.json";
/// The upstream implementation's static conflist, read when the node config file is absent.
pub const LEGACY_HOST_CONFLIST: &str = "/etc/cni/net.d/10-galactic.conflist";
/// Environment variable naming the node config file.
pub const NODE_CONFIG_ENV: &str = "GALACTIC_CNI_NODE_CONFIG";
/// Default pin directory of the eBPF datapath's maps and programs (`bpf_pin_dir`).
pub const DEFAULT_BPF_PIN_DIR: &str = "/sys/fs/bpf/galactic";
/// Default tc priority of the uSID egress filter (`ebpf_filter_priority`).
pub const DEFAULT_EBPF_FILTER_PRIORITY: u16 = 1;

/// How a VPC's routing domain is built on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingDomainMode {
    /// A VRF device bound to the VPC table.
    Vrf,
    /// The VPC table plus policy rules (kernels without VRF).
    Table,
    /// Probe once: VRF when the kernel has it, else table.
    Auto,
}

/// Where galactic-bgp publishes BGP state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publisher {
    /// Custom resources in the cluster.
    Kubernetes,
    /// JSON documents under `state_dir` (no cluster needed).
    Local,
}

/// The resolved node configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// This node's Kubernetes name (`node_name`); `NODE_NAME` is consulted after the file.
    pub node_name: Option<String>,
    /// kubeconfig path (`kubeconfig`; also `GALACTIC_CNI_KUBERNETES_CONFIG`).
    pub kubeconfig: PathBuf,
    /// Namespace of the BGP resources (`namespace`).
    pub namespace: String,
    /// JSON-lines log file shared by every plugin (`log_file`).
    pub log_file: PathBuf,
    /// Log level (`log_level`: debug|info|warn|error; unknown → info with a warning).
    pub log_level: Level,
    /// Log size cap in bytes before rotation to `<file>.1` (`log_max_bytes`).
    pub log_max_bytes: u64,
    /// Routing domain backend (`routing_domain`: vrf|table|auto).
    pub routing_domain: RoutingDomainMode,
    /// Publication backend (`publisher`: kubernetes|local).
    pub publisher: Publisher,
    /// Node-local state directory (`state_dir`).
    pub state_dir: PathBuf,
    /// Pin directory of the eBPF datapath's maps and programs (`bpf_pin_dir`).
    pub bpf_pin_dir: PathBuf,
    /// Whether galactic-bgp registers attachments in the eBPF datapath (`ebpf_datapath`:
    /// on|off). Off is for nodes with SRv6 settings but deliberately no datapath.
    pub ebpf_datapath: bool,
    /// tc priority of the uSID egress filter (`ebpf_filter_priority`: 1–65535).
    pub ebpf_filter_priority: u16,
    /// NAT66 shard SIDs in order of preference (`nat66_shard_sids`, comma-separated); empty
    /// means no NAT66 default egress.
    pub nat66_shard_sids: Vec<Ipv6Addr>,
    /// The datapath's uplink interfaces (`ebpf_interfaces`, comma-separated, deduplicated);
    /// empty means auto-detect (the interfaces of the host's IPv6 default routes).
    pub ebpf_interfaces: Vec<String>,
    /// Problems that did not stop resolution (e.g. an unknown log level), logged once set up.
    pub warnings: Vec<String>,
}

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

/// The three layers a key is looked up in.
struct Layers<'a, L: Fn(&str) -> Option<String>> {
    stanza: &'a Value,
    env: &'a L,
    file: Option<(PathBuf, Value)>,
}

impl<L: Fn(&str) -> Option<String>> Layers<'_, L> {
    fn get(&self, key: &str) -> Option<(String, Source)> {
        let env_name = format!("GALACTIC_CNI_{}", key.to_ascii_uppercase());
        scalar(self.stanza.get(key))
            .map(|v| (v, Source::Stanza))
            .or_else(|| non_empty((self.env)(&env_name)).map(|v| (v, Source::Env(env_name))))
            .or_else(|| {
                let (path, file) = self.file.as_ref()?;
                scalar(file.get(key)).map(|v| (v, Source::File(path.clone())))
            })
    }

    fn string(&self, key: &str, default: &str) -> String {
        self.get(key).map_or_else(|| default.to_owned(), |(v, _)| v)
    }

    fn parsed<T>(
        &self,
        key: &'static str,
        default: T,
        why: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some((value, origin)) => parse(&value).ok_or(ConfigError::Value {
                key,
                value,
                origin,
                why,
            }),
        }
    }

    /// A comma-separated list: entries trimmed, blank ones skipped, each parsed by `parse`;
    /// the first entry that does not parse is an error naming it. Absent → empty.
    fn list<T>(
        &self,
        key: &'static str,
        why: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, ConfigError> {
        let Some((value, origin)) = self.get(key) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match parse(entry) {
                Some(item) => out.push(item),
                None => {
                    return Err(ConfigError::Entry {
                        key,
                        entry: entry.to_owned(),
                        value,
                        origin,
                        why,
                    })
                }
            }
        }
        Ok(out)
    }
}

fn scalar(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => non_empty(Some(s.clone())),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

impl NodeConfig {
    /// Every key at its default.
    pub fn defaults() -> Self {
        Self {
            node_name: None,
            kubeconfig: PathBuf::from("/var/lib/galactic/kubeconfig"),
            namespace: "galactic-system".into(),
            log_file: PathBuf::from("/var/log/galactic/galactic-cni.log"),
            log_level: Level::Info,
            log_max_bytes: 10 * 1024 * 1024,
            routing_domain: RoutingDomainMode::Auto,
            publisher: Publisher::Kubernetes,
            state_dir: PathBuf::from("/var/lib/galactic"),
            bpf_pin_dir: PathBuf::from(DEFAULT_BPF_PIN_DIR),
            ebpf_datapath: true,
            ebpf_filter_priority: DEFAULT_EBPF_FILTER_PRIORITY,
            nat66_shard_sids: Vec::new(),
            ebpf_interfaces: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Resolves the node config for a plugin whose stanza is `stanza`, reading the environment
    /// through `env` and the file it names (or the default file).
    pub fn resolve(
        stanza: &Value,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        match non_empty(env(NODE_CONFIG_ENV)) {
            Some(path) => Self::resolve_from(stanza, env, Path::new(&path), None),
            None => Self::resolve_from(
                stanza,
                env,
                Path::new(DEFAULT_NODE_CONFIG),
                Some(Path::new(LEGACY_HOST_CONFLIST)),
            ),
        }
    }

    /// [`resolve`](Self::resolve) with explicit file locations: `file`, and when it is absent,
    /// the upstream conflist at `legacy`.
    pub fn resolve_from(
        stanza: &Value,
        env: &impl Fn(&str) -> Option<String>,
        file: &Path,
        legacy: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let file = match load_file(file, false)? {
            Some(found) => Some(found),
            None => match legacy {
                Some(legacy) => load_file(legacy, true)?,
                None => None,
            },
        };
        Self::from_layers(&Layers { stanza, env, file })
    }

    fn from_layers<L: Fn(&str) -> Option<String>>(
        layers: &Layers<'_, L>,
    ) -> Result<Self, ConfigError> {
        let d = Self::defaults();
        let mut warnings = Vec::new();
        let log_level = match layers.get("log_level") {
            None => d.log_level,
            Some((raw, source)) => Level::parse(&raw).unwrap_or_else(|| {
                warnings.push(format!(
                    "unknown log_level {raw:?} from {source}; using info"
                ));
                Level::Info
            }),
        };
        let kubeconfig = layers
            .get("kubeconfig")
            .or_else(|| {
                non_empty((layers.env)("GALACTIC_CNI_KUBERNETES_CONFIG"))
                    .map(|v| (v, Source::Stanza))
            })
            .map_or(d.kubeconfig, |(v, _)| PathBuf::from(v));
        Ok(Self {
            node_name: layers
                .get("node_name")
                .map(|(v, _)| v)
                .or_else(|| non_empty((layers.env)("NODE_NAME"))),
            kubeconfig,
            namespace: layers.string("namespace", &d.namespace),
            log_file: PathBuf::from(layers.string("log_file", &d.log_file.to_string_lossy())),
            log_level,
            log_max_bytes: layers.parsed(
                "log_max_bytes",
                d.log_max_bytes,
                "a size in bytes, at least 4096",
                |v| v.parse::<u64>().ok().filter(|n| *n >= 4096),
            )?,
            routing_domain: layers.parsed(
                "routing_domain",
                d.routing_domain,
                "one of vrf, table, auto",
                |v| match v {
                    "vrf" => Some(RoutingDomainMode::Vrf),
                    "table" => Some(RoutingDomainMode::Table),
                    "auto" => Some(RoutingDomainMode::Auto),
                    _ => None,
                },
            )?,
            publisher: layers.parsed(
                "publisher",
                d.publisher,
                "one of kubernetes, local",
                |v| match v {
                    "kubernetes" => Some(Publisher::Kubernetes),
                    "local" => Some(Publisher::Local),
                    _ => None,
                },
            )?,
            state_dir: PathBuf::from(layers.string("state_dir", &d.state_dir.to_string_lossy())),
            bpf_pin_dir: layers.parsed(
                "bpf_pin_dir",
                d.bpf_pin_dir,
                "an absolute path (a directory on a bpffs)",
                ebpf::absolute_path,
            )?,
            ebpf_datapath: layers.parsed(
                "ebpf_datapath",
                d.ebpf_datapath,
                "on or off",
                ebpf::on_off,
            )?,
            ebpf_filter_priority: layers.parsed(
                "ebpf_filter_priority",
                d.ebpf_filter_priority,
                "an integer 1-65535 (0 would let the kernel pick a new slot on every ADD)",
                ebpf::filter_priority,
            )?,
            nat66_shard_sids: layers.list(
                "nat66_shard_sids",
                "not a NAT66 shard SID (an IPv6 unicast address)",
                ebpf::shard_sid,
            )?,
            ebpf_interfaces: ebpf::dedup(layers.list(
                "ebpf_interfaces",
                "not an interface name (1-15 bytes, no '/', ':' or whitespace)",
                ebpf::interface_name,
            )?),
            warnings,
        })
    }
}

/// Reads a node config file. `None` when it does not exist. With `legacy`, the file is the
/// upstream conflist and its first `galactic-cni` entry is the config.
fn load_file(path: &Path, legacy: bool) -> Result<Option<(PathBuf, Value)>, ConfigError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.into(),
                source,
            })
        }
    };
    let malformed = |why: String| ConfigError::Malformed {
        path: path.into(),
        why,
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
    let config = if legacy {
        legacy_entry(&value)
    } else {
        Some(value)
    };
    match config {
        Some(config) if config.is_object() => Ok(Some((path.into(), config))),
        Some(_) => Err(malformed("expected a JSON object".into())),
        None => Err(malformed(
            "no plugins entry with \"type\": \"galactic-cni\"".into(),
        )),
    }
}

fn legacy_entry(conflist: &Value) -> Option<Value> {
    conflist
        .get("plugins")?
        .as_array()?
        .iter()
        .find(|p| p.get("type").and_then(Value::as_str) == Some("galactic-cni"))
        .cloned()
}

#[cfg(test)]
mod tests;
