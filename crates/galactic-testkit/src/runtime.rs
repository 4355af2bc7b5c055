//! A CNI runtime for tests, with libcni's semantics for network configuration lists.
//!
//! What it does, as `libcni` (containernetworking/cni v1.x) does it:
//!
//! - **Plugin lookup**: each plugin is the executable named by its `type` in `CNI_PATH` (one
//!   directory here).
//! - **Environment**: only `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
//!   `CNI_ARGS` (when the attachment has arguments) and `CNI_PATH`, plus the test node's
//!   `GALACTIC_CNI_NODE_CONFIG` and `PATH`; nothing else is inherited.
//! - **stdin**: the plugin's entry of the list with the list's `name` and `cniVersion` injected
//!   (overwriting the entry's own), and `prevResult` when there is one.
//! - **ADD**: plugins in order; each result is the next plugin's `prevResult`; the last result
//!   is cached per (network name, container id, ifname). A failed ADD caches nothing.
//! - **CHECK**: needs the cached result (an error otherwise); plugins in order, each with the
//!   cached result as `prevResult`.
//! - **DEL**: plugins in reverse order, with the cached result as `prevResult` when one is
//!   cached (none on a repeated DEL); the cache entry is removed only when every DEL succeeded.
//! - **STATUS** (cniVersion 1.1.0 only; refused before any plugin runs otherwise): plugins in
//!   order, stopping at the first error; environment `CNI_COMMAND` and `CNI_PATH` only.
//! - **GC**: first a DEL (as above) of every cached attachment of this network that is not in
//!   the valid list; then, for cniVersion 1.1.0, GC of every plugin in order with
//!   `cni.dev/valid-attachments` (and the older spelling `cni.dev/attachments`) injected.
//!   Errors of all steps are collected; the first is returned.
//!
//! Not modelled: capabilities/`runtimeConfig`, the on-disk cache (this cache lives in memory,
//! in the [`Runtime`] value), result-version conversion (every plugin here speaks the list's
//! version) and timeouts.

use super::host::Host;
use super::{Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a runtime operation failed.
#[derive(Debug)]
pub struct RuntimeError {
    /// The verb (`ADD`, `CHECK`, …).
    pub command: String,
    /// The plugin type that failed, when a plugin ran.
    pub plugin: Option<String>,
    /// What went wrong, in the runtime's words.
    pub message: String,
    /// The plugin process's outcome, when a plugin ran.
    pub outcome: Option<Box<Outcome>>,
}

impl RuntimeError {
    fn runtime(command: &str, message: impl Into<String>) -> Self {
        Self {
            command: command.to_owned(),
            plugin: None,
            message: message.into(),
            outcome: None,
        }
    }

    /// The CNI error code the plugin printed, if it printed one.
    pub fn code(&self) -> Option<u64> {
        let outcome = self.outcome.as_ref()?;
        serde_json::from_str::<Value>(&outcome.stdout)
            .ok()?
            .get("code")?
            .as_u64()
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.plugin, &self.outcome) {
            (Some(plugin), Some(out)) => write!(
                f,
                "{} {plugin}: {} (stdout {:?}, stderr {:?})",
                self.command, self.message, out.stdout, out.stderr
            ),
            (Some(plugin), None) => write!(f, "{} {plugin}: {}", self.command, self.message),
            _ => write!(f, "{}: {}", self.command, self.message),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// A network configuration list as the runtime holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflist {
    /// `cniVersion` of the list.
    pub version: String,
    /// The network name.
    pub name: String,
    /// The plugin entries, in order.
    pub plugins: Vec<Value>,
}

impl Conflist {
    /// Reads a conflist file (JSON).
    pub fn from_file(path: &Path) -> Result<Self, RuntimeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| RuntimeError::runtime("LOAD", format!("read {}: {e}", path.display())))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            RuntimeError::runtime("LOAD", format!("{} is not JSON: {e}", path.display()))
        })?;
        Self::from_value(&value)
    }

    /// A conflist from its JSON (`cniVersion`, `name`, non-empty `plugins` with a `type` each).
    pub fn from_value(value: &Value) -> Result<Self, RuntimeError> {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| RuntimeError::runtime("LOAD", format!("conflist has no {key:?}")))
        };
        let plugins = value
            .get("plugins")
            .and_then(Value::as_array)
            .filter(|p| !p.is_empty())
            .cloned()
            .ok_or_else(|| RuntimeError::runtime("LOAD", "conflist has no plugins"))?;
        if plugins
            .iter()
            .any(|p| p.get("type").and_then(Value::as_str).is_none())
        {
            return Err(RuntimeError::runtime(
                "LOAD",
                "a plugin entry has no \"type\"",
            ));
        }
        Ok(Self {
            version: text("cniVersion")?,
            name: text("name")?,
            plugins,
        })
    }

    /// The same list declaring another `cniVersion`.
    pub fn with_version(&self, version: &str) -> Self {
        Self {
            version: version.to_owned(),
            ..self.clone()
        }
    }

    /// The type of plugin `index`.
    pub fn plugin_type(&self, index: usize) -> &str {
        self.plugins
            .get(index)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// What plugin `index` reads on stdin (libcni's `buildOneConfig`).
    pub fn plugin_conf(&self, index: usize, prev: Option<&Value>) -> Value {
        let mut conf = self
            .plugins
            .get(index)
            .cloned()
            .unwrap_or_else(|| json!({}));
        conf["cniVersion"] = json!(self.version);
        conf["name"] = json!(self.name);
        if let Some(prev) = prev {
            conf["prevResult"] = prev.clone();
        }
        conf
    }

    /// Whether the list's version allows STATUS and GC (1.1.0).
    pub fn has_status_and_gc(&self) -> bool {
        self.version == "1.1.0"
    }
}

/// One attachment: what `RuntimeConf` carries in libcni.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attachment {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS` pairs (e.g. `K8S_POD_NAME`), joined with `;`.
    pub args: Vec<(String, String)>,
}

impl Attachment {
    /// An attachment without `CNI_ARGS`.
    pub fn new(container_id: &str, netns: &str, ifname: &str) -> Self {
        Self {
            container_id: container_id.to_owned(),
            netns: netns.to_owned(),
            ifname: ifname.to_owned(),
            args: Vec::new(),
        }
    }

    /// The attachment of a test pod.
    pub fn of_pod(pod: &super::host::Pod) -> Self {
        Self::new(&pod.id, &pod.netns_path(), &pod.ifname)
    }

    fn cni_args(&self) -> String {
        self.args
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    }
}

/// The cache key: (network name, container id, ifname), as libcni keys its result cache.
type CacheKey = (String, String, String);

fn key(list: &Conflist, att: &Attachment) -> CacheKey {
    (
        list.name.clone(),
        att.container_id.clone(),
        att.ifname.clone(),
    )
}

/// A runtime executing plugins of one bin dir for one node, optionally inside a network
/// namespace standing in for the host.
pub struct Runtime<'a> {
    node: &'a TestNode,
    bin_dir: PathBuf,
    netns: Option<String>,
    cache: RefCell<HashMap<CacheKey, (Attachment, Value)>>,
}

impl<'a> Runtime<'a> {
    /// A runtime for `node` whose `CNI_PATH` is `bin_dir`, running plugins in `netns` (or in
    /// the caller's namespace).
    pub fn new(node: &'a TestNode, bin_dir: &Path, netns: Option<&str>) -> Self {
        Self {
            node,
            bin_dir: bin_dir.to_path_buf(),
            netns: netns.map(str::to_owned),
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// A runtime on a throwaway [`Host`]: its node, its bin dir, its namespace.
    pub fn on_host(host: &'a Host) -> Self {
        Self::new(&host.node, &host.bin_dir, Some(host.netns.name()))
    }

    /// The cached result of an attachment, if any.
    pub fn cached(&self, list: &Conflist, att: &Attachment) -> Option<Value> {
        self.cache
            .borrow()
            .get(&key(list, att))
            .map(|(_, result)| result.clone())
    }

    /// ADD through the list; returns (and caches) the last plugin's result.
    pub fn add(&self, list: &Conflist, att: &Attachment) -> Result<Value, RuntimeError> {
        let mut prev: Option<Value> = None;
        for index in 0..list.plugins.len() {
            let conf = list.plugin_conf(index, prev.as_ref());
            let outcome = self.exec("ADD", list.plugin_type(index), Some(att), &conf)?;
            let result: Value =
                serde_json::from_str(&outcome.stdout).map_err(|e| RuntimeError {
                    command: "ADD".into(),
                    plugin: Some(list.plugin_type(index).to_owned()),
                    message: format!("result is not JSON: {e}"),
                    outcome: Some(Box::new(outcome)),
                })?;
            prev = Some(result);
        }
        let result = prev.ok_or_else(|| RuntimeError::runtime("ADD", "empty plugin list"))?;
        self.cache
            .borrow_mut()
            .insert(key(list, att), (att.clone(), result.clone()));
        Ok(result)
    }

    /// CHECK every plugin in order with the cached result.
    pub fn check(&self, list: &Conflist, att: &Attachment) -> Result<(), RuntimeError> {
        let cached = self.cached(list, att).ok_or_else(|| {
            RuntimeError::runtime("CHECK", "no cached result for this attachment")
        })?;
        for index in 0..list.plugins.len() {
            let conf = list.plugin_conf(index, Some(&cached));
            self.exec_quiet("CHECK", list.plugin_type(index), Some(att), &conf)?;
        }
        Ok(())
    }

    /// DEL every plugin in reverse order (with the cached result, when there is one).
    pub fn del(&self, list: &Conflist, att: &Attachment) -> Result<(), RuntimeError> {
        let cached = self.cached(list, att);
        for index in (0..list.plugins.len()).rev() {
            let conf = list.plugin_conf(index, cached.as_ref());
            self.exec_quiet("DEL", list.plugin_type(index), Some(att), &conf)?;
        }
        self.cache.borrow_mut().remove(&key(list, att));
        Ok(())
    }

    /// STATUS of every plugin in order (cniVersion 1.1.0 only).
    pub fn status(&self, list: &Conflist) -> Result<(), RuntimeError> {
        if !list.has_status_and_gc() {
            return Err(RuntimeError::runtime(
                "STATUS",
                format!(
                    "configuration version {:?} does not support the STATUS verb",
                    list.version
                ),
            ));
        }
        for index in 0..list.plugins.len() {
            let conf = list.plugin_conf(index, None);
            self.exec_quiet("STATUS", list.plugin_type(index), None, &conf)?;
        }
        Ok(())
    }

    /// GC: DEL of the cached attachments of this network not in `valid`, then (1.1.0) GC of
    /// every plugin with the valid list.
    pub fn gc(&self, list: &Conflist, valid: &[&Attachment]) -> Result<(), RuntimeError> {
        let mut errors: Vec<RuntimeError> = Vec::new();
        for stale in self.stale(list, valid) {
            if let Err(e) = self.del(list, &stale) {
                errors.push(e);
            }
        }
        if list.has_status_and_gc() {
            let attachments: Vec<Value> = valid
                .iter()
                .map(|a| json!({"containerID": a.container_id, "ifname": a.ifname}))
                .collect();
            for index in 0..list.plugins.len() {
                let mut conf = list.plugin_conf(index, None);
                conf["cni.dev/valid-attachments"] = json!(attachments);
                conf["cni.dev/attachments"] = json!(attachments);
                if let Err(e) = self.exec_quiet("GC", list.plugin_type(index), None, &conf) {
                    errors.push(e);
                }
            }
        }
        match errors.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }

    /// Cached attachments of `list`'s network that are not in `valid`.
    fn stale(&self, list: &Conflist, valid: &[&Attachment]) -> Vec<Attachment> {
        self.cache
            .borrow()
            .iter()
            .filter(|((network, _, _), _)| *network == list.name)
            .map(|(_, (att, _))| att.clone())
            .filter(|att| {
                !valid
                    .iter()
                    .any(|v| v.container_id == att.container_id && v.ifname == att.ifname)
            })
            .collect()
    }

    /// Runs a verb that must succeed with nothing on stdout.
    fn exec_quiet(
        &self,
        command: &str,
        plugin: &str,
        att: Option<&Attachment>,
        conf: &Value,
    ) -> Result<(), RuntimeError> {
        let outcome = self.exec(command, plugin, att, conf)?;
        if outcome.stdout.trim().is_empty() {
            return Ok(());
        }
        Err(RuntimeError {
            command: command.into(),
            plugin: Some(plugin.into()),
            message: "success must print nothing".into(),
            outcome: Some(Box::new(outcome)),
        })
    }

    /// Finds `plugin` in `CNI_PATH` and runs `command` with `conf` on stdin.
    fn exec(
        &self,
        command: &str,
        plugin: &str,
        att: Option<&Attachment>,
        conf: &Value,
    ) -> Result<Outcome, RuntimeError> {
        let binary = self.find(command, plugin)?;
        let mut invocation = Invocation::new(&binary, command, self.node)
            .var("CNI_PATH", &self.bin_dir.display().to_string())
            .stdin(conf.to_string());
        if let Some(att) = att {
            invocation =
                invocation.attachment(&att.container_id, &att.netns, &att.ifname, &self.bin_dir);
            if !att.args.is_empty() {
                invocation = invocation.var("CNI_ARGS", &att.cni_args());
            }
        }
        if let Some(ns) = &self.netns {
            invocation = invocation.in_netns(ns);
        }
        let outcome = invocation.run();
        if outcome.success {
            return Ok(outcome);
        }
        Err(RuntimeError {
            command: command.into(),
            plugin: Some(plugin.into()),
            message: "plugin failed".into(),
            outcome: Some(Box::new(outcome)),
        })
    }

    /// The executable named `plugin` in `CNI_PATH`.
    fn find(&self, command: &str, plugin: &str) -> Result<PathBuf, RuntimeError> {
        let path = self.bin_dir.join(plugin);
        if plugin.contains('/') || !path.is_file() {
            return Err(RuntimeError::runtime(
                command,
                format!(
                    "failed to find plugin {plugin:?} in path [{}]",
                    self.bin_dir.display()
                ),
            ));
        }
        Ok(path)
    }
}
