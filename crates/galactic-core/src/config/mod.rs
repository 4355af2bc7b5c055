//! The node configuration: settings shared by every plugin on a node, owned by the node's
//! administrator.
//!
//! Each key resolves in this order, first non-empty value wins:
//! 1. the environment variable `GALACTIC_CNI_<KEY>` (upper case), as the runtime gives it;
//! 2. the node config file: JSON at `/etc/galactic/node.json`, or at `$GALACTIC_CNI_NODE_CONFIG`;
//!    when the default file is absent, the `galactic-cni` entry of the upstream static conflist
//!    `/etc/cni/net.d/10-galactic.conflist` is read instead, so a drop-in upgrade keeps its settings;
//! 3. the default.
//!
//! A stanza never sets a node key (see [`stanza`]): it is refused, except on nodes whose config
//! allows stanza overrides, where the stanza's value comes first. The one per-stanza key is
//! `namespace` (upstream's), which the stanza may set.
//!
//! A missing file is fine; a malformed one is an error naming the file.

use crate::log::Level;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod egress;
mod error;
mod layers;
pub mod stanza;
mod values;

pub use egress::EgressConfig;
pub use error::{ConfigError, Source};
use layers::{non_empty, scalar, Layers};
pub use stanza::{node_config_keys, Strictness, IPAM_NODE_KEYS, NAMESPACE_KEY, NODE_KEYS};

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
/// Default `table_mark_mask`: the top byte of the mark (255 VPCs per node), clear of
/// kube-proxy's 0x4000/0x8000 and of the other users `docs/decisions/0076` lists.
pub const DEFAULT_TABLE_MARK_MASK: u32 = 0xff00_0000;
/// Default root of the upstream implementation's IPAM marker files (`ipam_legacy_dir`).
pub const DEFAULT_IPAM_LEGACY_DIR: &str = "/var/lib/cni/galactic-ipam";
/// Default bound on waiting for the IPAM store lock (`ipam_lock_timeout_ms`).
pub const DEFAULT_IPAM_LOCK_TIMEOUT: Duration = Duration::from_millis(5000);
/// Default directory of the Kata DAN files (`dan_dir`): where Kata's runtime-rs shim reads them.
pub const DEFAULT_DAN_DIR: &str = "/run/kata-containers/dans-rs";
/// Default directory of the tap router-advertisement records (`radv_state_dir`): where the
/// upstream datapath container reads them.
pub const DEFAULT_RADV_STATE_DIR: &str = "/var/lib/cni/ra";
/// Longest `namespace` (a Kubernetes namespace is an RFC 1123 label).
const MAX_NAMESPACE_LEN: usize = 63;

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
    /// The firewall-mark bits table-mode routing domains select a VPC's traffic by
    /// (`table_mark_mask`: contiguous, at least 2 bits; default [`DEFAULT_TABLE_MARK_MASK`]).
    pub table_mark_mask: u32,
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
    /// Where a VPC that opts in to internet egress goes (`egress_shard_sids`, old name
    /// `nat66_shard_sids`; `nat64_prefix`).
    pub egress: EgressConfig,
    /// The datapath's uplink interfaces (`ebpf_interfaces`, comma-separated, deduplicated);
    /// empty means auto-detect (the interfaces of the host's IPv6 default routes).
    pub ebpf_interfaces: Vec<String>,
    /// The IPAM store directory (`ipam_data_dir`; default `<state_dir>/ipam`).
    pub ipam_data_dir: PathBuf,
    /// The upstream IPAM marker root imported once (`ipam_legacy_dir`).
    pub ipam_legacy_dir: PathBuf,
    /// Bound on waiting for the IPAM store lock (`ipam_lock_timeout_ms`: 1–600000).
    pub ipam_lock_timeout: Duration,
    /// Where the tap master writes a Kata sandbox's DAN file (`dan_dir`), for stanzas with
    /// `"dan": true`.
    pub dan_dir: PathBuf,
    /// Where the tap master records each tap for the datapath container's router
    /// advertisements (`radv_state_dir`).
    pub radv_state_dir: PathBuf,
    /// Lab nodes only: the directories a stanza's path may point into when the node config
    /// allows stanza overrides (`allow_stanza_overrides`, `stanza_override_dirs`); `None`
    /// (the default) refuses every node key in a stanza.
    pub stanza_overrides: Option<Vec<PathBuf>>,
    /// Problems that did not stop resolution (e.g. an unknown log level), logged once set up.
    pub warnings: Vec<String>,
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
            table_mark_mask: DEFAULT_TABLE_MARK_MASK,
            publisher: Publisher::Kubernetes,
            state_dir: PathBuf::from("/var/lib/galactic"),
            bpf_pin_dir: PathBuf::from(DEFAULT_BPF_PIN_DIR),
            ebpf_datapath: true,
            ebpf_filter_priority: DEFAULT_EBPF_FILTER_PRIORITY,
            egress: EgressConfig::default(),
            ebpf_interfaces: Vec::new(),
            ipam_data_dir: PathBuf::from("/var/lib/galactic/ipam"),
            ipam_legacy_dir: PathBuf::from(DEFAULT_IPAM_LEGACY_DIR),
            ipam_lock_timeout: DEFAULT_IPAM_LOCK_TIMEOUT,
            dan_dir: PathBuf::from(DEFAULT_DAN_DIR),
            radv_state_dir: PathBuf::from(DEFAULT_RADV_STATE_DIR),
            stanza_overrides: None,
            warnings: Vec::new(),
        }
    }

    /// Resolves the node config for a plugin whose stanza is `stanza`, reading the environment
    /// through `env` and the file it names (or the default file). Node keys in the stanza are
    /// refused.
    pub fn resolve(
        stanza: &Value,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::resolve_with(stanza, env, Strictness::Refuse)
    }

    /// [`resolve`](Self::resolve) with the given strictness (DEL ignores node keys instead).
    pub fn resolve_with(
        stanza: &Value,
        env: &impl Fn(&str) -> Option<String>,
        strictness: Strictness,
    ) -> Result<Self, ConfigError> {
        match non_empty(env(NODE_CONFIG_ENV)) {
            Some(path) => Self::from_files(stanza, env, Path::new(&path), None, strictness),
            None => Self::from_files(
                stanza,
                env,
                Path::new(DEFAULT_NODE_CONFIG),
                Some(Path::new(LEGACY_HOST_CONFLIST)),
                strictness,
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
        Self::from_files(stanza, env, file, legacy, Strictness::Refuse)
    }

    fn from_files(
        stanza: &Value,
        env: &impl Fn(&str) -> Option<String>,
        file: &Path,
        legacy: Option<&Path>,
        strictness: Strictness,
    ) -> Result<Self, ConfigError> {
        let node_config = file.to_path_buf();
        let file = match load_file(file, false)? {
            Some(found) => Some(found),
            None => match legacy {
                Some(legacy) => load_file(legacy, true)?,
                None => None,
            },
        };
        let none = Map::new();
        let node_only = Layers {
            stanza: &none,
            env,
            file,
            lenient: strictness == Strictness::Ignore,
            dropped: Default::default(),
        };
        let overrides = stanza::overrides(|k| node_only.get(k))?;
        let admitted = stanza::admitted(stanza, overrides.as_deref(), strictness, &node_config)?;
        let layers = Layers {
            stanza: &admitted,
            ..node_only
        };
        let mut node = Self::from_layers(&layers)?;
        node.namespace = namespace(stanza, &layers, strictness)?;
        node.stanza_overrides = overrides;
        Ok(node)
    }

    // Over 60 lines on purpose: one entry per node-config key, each with its default and what it
    // accepts, in one place and in the order of docs/configuration.md's node table; split, the
    // table would be scattered across functions that each read a few keys.
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
        let state_dir = layers.parsed(
            "state_dir",
            d.state_dir.clone(),
            "an absolute path",
            values::absolute_path,
        )?;
        let kubeconfig = match layers.get("kubeconfig").or_else(|| {
            non_empty((layers.env)("GALACTIC_CNI_KUBERNETES_CONFIG"))
                .map(|v| (v, Source::Env("GALACTIC_CNI_KUBERNETES_CONFIG".into())))
        }) {
            None => d.kubeconfig.clone(),
            Some((value, origin)) => values::absolute_path(&value).ok_or(ConfigError::Value {
                key: "kubeconfig",
                value,
                origin,
                why: "an absolute path",
            })?,
        };
        Ok(Self {
            node_name: layers
                .get("node_name")
                .map(|(v, _)| v)
                .or_else(|| non_empty((layers.env)("NODE_NAME"))),
            kubeconfig,
            namespace: d.namespace.clone(),
            log_file: layers.parsed(
                "log_file",
                d.log_file.clone(),
                "an absolute path",
                values::absolute_path,
            )?,
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
            table_mark_mask: layers.parsed(
                "table_mark_mask",
                d.table_mark_mask,
                "a contiguous bit mask of at least 2 bits, e.g. 0xff000000",
                values::mark_mask,
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
            bpf_pin_dir: layers.parsed(
                "bpf_pin_dir",
                d.bpf_pin_dir,
                "an absolute path (a directory on a bpffs)",
                values::absolute_path,
            )?,
            ebpf_datapath: layers.parsed(
                "ebpf_datapath",
                d.ebpf_datapath,
                "on or off",
                values::on_off,
            )?,
            ebpf_filter_priority: layers.parsed(
                "ebpf_filter_priority",
                d.ebpf_filter_priority,
                "an integer 1-65535 (0 would let the kernel pick a new slot on every ADD)",
                values::filter_priority,
            )?,
            egress: EgressConfig::resolve(layers)?,
            ebpf_interfaces: values::dedup(layers.list(
                "ebpf_interfaces",
                "not an interface name (1-15 bytes, no '/', ':' or whitespace)",
                values::interface_name,
            )?),
            ipam_data_dir: layers.parsed(
                "ipam_data_dir",
                state_dir.join("ipam"),
                "an absolute path",
                values::absolute_path,
            )?,
            ipam_legacy_dir: layers.parsed(
                "ipam_legacy_dir",
                d.ipam_legacy_dir,
                "an absolute path",
                values::absolute_path,
            )?,
            ipam_lock_timeout: layers.parsed(
                "ipam_lock_timeout_ms",
                d.ipam_lock_timeout,
                "a number of milliseconds from 1 to 600000",
                |v| {
                    v.parse::<u64>()
                        .ok()
                        .filter(|ms| (1..=600_000).contains(ms))
                        .map(Duration::from_millis)
                },
            )?,
            dan_dir: layers.parsed(
                "dan_dir",
                d.dan_dir,
                "an absolute path",
                values::absolute_path,
            )?,
            radv_state_dir: layers.parsed(
                "radv_state_dir",
                d.radv_state_dir,
                "an absolute path",
                values::absolute_path,
            )?,
            state_dir,
            stanza_overrides: None,
            warnings: {
                warnings.extend(layers.dropped.take());
                warnings
            },
        })
    }
}

/// The BGP namespace: the stanza's own (upstream's one per-stanza key), else the node's.
fn namespace<L: Fn(&str) -> Option<String>>(
    stanza: &Value,
    layers: &Layers<'_, L>,
    strictness: Strictness,
) -> Result<String, ConfigError> {
    let from_stanza = scalar(stanza.get(NAMESPACE_KEY));
    match from_stanza {
        Some(ns) if is_namespace(&ns) => Ok(ns),
        Some(ns) if strictness == Strictness::Refuse => Err(ConfigError::Namespace(ns)),
        _ => Ok(layers.string(NAMESPACE_KEY, &NodeConfig::defaults().namespace)),
    }
}

/// An RFC 1123 label, as Kubernetes requires of a namespace name.
fn is_namespace(name: &str) -> bool {
    name.len() <= MAX_NAMESPACE_LEN
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.is_empty()
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
