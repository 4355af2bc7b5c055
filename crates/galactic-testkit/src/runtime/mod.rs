//! A CNI runtime for tests, with libcni's semantics for network configuration lists.
//!
//! What it does, as `libcni` (containernetworking/cni v1.3, `libcni/api.go`) does it:
//!
//! - **Plugin lookup**: each plugin is the executable named by its `type` in `CNI_PATH` (one
//!   directory here).
//! - **Environment** (`invoke.Args.AsEnv`): the runtime's own environment, which the plugins
//!   inherit (here only `PATH`, the test node's `GALACTIC_CNI_NODE_CONFIG` and what the test
//!   gives [`Runtime::env`]), then all six of `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`,
//!   `CNI_ARGS`, `CNI_IFNAME` and `CNI_PATH`, always exported and empty where they do not apply
//!   (no arguments; no netns; STATUS and GC, which carry no attachment).
//! - **stdin** (`buildOneConfig`): the plugin's entry of the list with the list's `name` and
//!   `cniVersion` injected (overwriting the entry's own), `prevResult` when there is one, and
//!   (`injectRuntimeConfig`) `runtimeConfig` holding the attachment's capability arguments for
//!   exactly the capabilities the entry declares `true` (none: no `runtimeConfig` is injected).
//!   STATUS and GC get the entry with `name` and `cniVersion` only (`InjectConf`).
//! - **ADD**: the container id, network name and interface name are validated first
//!   (`utils.Validate*`: refused before any plugin runs); then plugins in order, each result the
//!   next plugin's `prevResult`; the last result is cached. A failed ADD caches nothing.
//! - **CHECK**: nothing when the list says `disableCheck`; otherwise plugins in order, each with
//!   the cached result as `prevResult` (none when nothing is cached).
//! - **DEL**: plugins in reverse order, with the cached result as `prevResult` when one is
//!   cached (none on a repeated DEL); the cache entry is removed only when every DEL succeeded.
//! - **STATUS** (cniVersion 1.1.0): plugins in order, stopping at the first error.
//! - **GC**: nothing when the list says `disableGC`; otherwise first a DEL (as above, of the
//!   attachment as cached: its netns, `CNI_ARGS` and capability arguments) of every cached
//!   attachment of this network that is not in the valid list; then, for cniVersion 1.1.0, GC of
//!   every plugin in order with `cni.dev/valid-attachments` (and the older spelling
//!   `cni.dev/attachments`) injected. Errors of all steps are collected; the first is returned.
//! - **Cache**: on disk, libcni's `cniCacheV1` records under the node's directory (see
//!   `cache.rs`); every runtime of one node shares it, as the runtimes of a host share
//!   `/var/lib/cni`, so a [`Runtime`] is cheap to make wherever a test needs one.
//!
//! Where it is stricter than libcni, so tests can see more:
//!
//! - STATUS of a list before 1.1.0 is an error naming the version, with no plugin run (libcni
//!   returns success without running any plugin).
//! - A DEL, CHECK, STATUS or GC that succeeds must print nothing (libcni ignores stdout).
//!
//! Test extensions that are not libcni: [`Runtime::env`] (the runtime's environment, e.g. armed
//! failpoints), [`Runtime::binary`] (the executable for one plugin type, e.g. a test's own
//! `CARGO_BIN_EXE_*`, instead of the one in `CNI_PATH`), [`Runtime::plugin`] (one entry of a list
//! run on its own with a given `prevResult`, past the cache and the checks),
//! [`Runtime::add_results`] (what each plugin of an ADD passed on), and [`Runtime::lose_cache`]
//! and [`Runtime::remember`] (a runtime that lost its cache, or still holds a result).
//!
//! Not modelled: result-version conversion (every plugin here speaks the list's version),
//! `cniVersions`, pre-0.4.0 lists, VALIDATE and timeouts.

mod cache;
mod conflist;

pub use conflist::{Attachment, Conflist};

use super::{Invocation, Outcome, TestNode};
use cache::Cache;
use serde_json::{json, Value};
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

    fn plugin(command: &str, plugin: &str, message: &str, outcome: Outcome) -> Self {
        Self {
            command: command.to_owned(),
            plugin: Some(plugin.to_owned()),
            message: message.to_owned(),
            outcome: Some(Box::new(outcome)),
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

    /// Asserts that a plugin failed with the CNI error `code` (see [`Outcome::expect_error`]);
    /// returns its message.
    pub fn expect_error(&self, code: u64) -> String {
        match &self.outcome {
            Some(outcome) => outcome.expect_error(code),
            None => panic!("expected a plugin's error {code}, but no plugin failed: {self}"),
        }
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

/// A runtime executing plugins of one bin dir for one node, optionally inside a network
/// namespace standing in for the host. Cheap to clone and to make: its state is the node's
/// on-disk cache.
#[derive(Clone)]
pub struct Runtime<'a> {
    node: &'a TestNode,
    bin_dir: PathBuf,
    netns: Option<String>,
    env: Vec<(String, String)>,
    binaries: Vec<(String, PathBuf)>,
}

impl<'a> Runtime<'a> {
    /// A runtime for `node` whose `CNI_PATH` is `bin_dir`, running plugins in `netns` (or in
    /// the caller's namespace).
    pub fn new(node: &'a TestNode, bin_dir: &Path, netns: Option<&str>) -> Self {
        Self {
            node,
            bin_dir: bin_dir.to_path_buf(),
            netns: netns.map(str::to_owned),
            env: Vec::new(),
            binaries: Vec::new(),
        }
    }

    /// The same runtime with `key=value` in its environment, which every plugin it runs
    /// inherits (the `CNI_*` variables it sets itself still win, as in libcni).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The same runtime running `binary` for plugins of type `plugin_type` instead of the
    /// executable of that name in `CNI_PATH` (the plugins' own lookups still use `CNI_PATH`).
    pub fn binary(mut self, plugin_type: &str, binary: &Path) -> Self {
        self.binaries.retain(|(t, _)| t != plugin_type);
        self.binaries
            .push((plugin_type.to_owned(), binary.to_path_buf()));
        self
    }

    fn cache(&self) -> Cache {
        Cache::new(&self.node.dir.path().join("cni"))
    }

    /// The cached result of an attachment, if any.
    pub fn cached(&self, list: &Conflist, att: &Attachment) -> Option<Value> {
        self.cache().result(&list.name, att)
    }

    /// Empties the cache, as after the runtime's cache directory was lost: only the plugins'
    /// own GC knows the attachments then.
    pub fn lose_cache(&self) {
        self.cache().clear();
    }

    /// Caches `result` for an attachment, as a runtime that still holds it does (a DEL retried
    /// after a plugin of the list failed, a cache restored from a backup).
    pub fn remember(&self, list: &Conflist, att: &Attachment, result: &Value) {
        self.cache().put(list, att, result);
    }

    /// ADD through the list; returns (and caches) the last plugin's result.
    pub fn add(&self, list: &Conflist, att: &Attachment) -> Result<Value, RuntimeError> {
        let mut results = self.add_results(list, att)?;
        results
            .pop()
            .ok_or_else(|| RuntimeError::runtime("ADD", "empty plugin list"))
    }

    /// [`Runtime::add`], returning every plugin's result in order (what each passed on).
    pub fn add_results(
        &self,
        list: &Conflist,
        att: &Attachment,
    ) -> Result<Vec<Value>, RuntimeError> {
        att.validate(&list.name)
            .map_err(|why| RuntimeError::runtime("ADD", why))?;
        let mut results: Vec<Value> = Vec::new();
        for index in 0..list.plugins.len() {
            let conf = list.plugin_conf(index, results.last(), att);
            let plugin = list.plugin_type(index);
            let outcome = self.exec("ADD", plugin, Some(att), &conf)?;
            match serde_json::from_str(&outcome.stdout) {
                Ok(result) => results.push(result),
                Err(e) => {
                    let why = format!("result is not JSON: {e}");
                    return Err(RuntimeError::plugin("ADD", plugin, &why, outcome));
                }
            }
        }
        if let Some(last) = results.last() {
            self.cache().put(list, att, last);
        }
        Ok(results)
    }

    /// CHECK every plugin in order with the cached result.
    pub fn check(&self, list: &Conflist, att: &Attachment) -> Result<(), RuntimeError> {
        if list.disable_check {
            return Ok(());
        }
        let cached = self.cached(list, att);
        for index in 0..list.plugins.len() {
            let conf = list.plugin_conf(index, cached.as_ref(), att);
            self.exec_quiet("CHECK", list.plugin_type(index), Some(att), &conf)?;
        }
        Ok(())
    }

    /// DEL every plugin in reverse order (with the cached result, when there is one).
    pub fn del(&self, list: &Conflist, att: &Attachment) -> Result<(), RuntimeError> {
        let cached = self.cached(list, att);
        for index in (0..list.plugins.len()).rev() {
            let conf = list.plugin_conf(index, cached.as_ref(), att);
            self.exec_quiet("DEL", list.plugin_type(index), Some(att), &conf)?;
        }
        self.cache().remove(&list.name, att);
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
            self.exec_quiet("STATUS", list.plugin_type(index), None, &list.inject(index))?;
        }
        Ok(())
    }

    /// GC: DEL of the cached attachments of this network not in `valid`, then (1.1.0) GC of
    /// every plugin with the valid list.
    pub fn gc(&self, list: &Conflist, valid: &[&Attachment]) -> Result<(), RuntimeError> {
        if list.disable_gc {
            return Ok(());
        }
        let is_valid = |att: &Attachment| {
            valid
                .iter()
                .any(|v| v.container_id == att.container_id && v.ifname == att.ifname)
        };
        let mut errors: Vec<RuntimeError> = Vec::new();
        for stale in self.cache().attachments(&list.name) {
            if !is_valid(&stale) {
                errors.extend(self.del(list, &stale).err());
            }
        }
        if list.has_status_and_gc() {
            let attachments: Vec<Value> = valid
                .iter()
                .map(|a| json!({"containerID": a.container_id, "ifname": a.ifname}))
                .collect();
            for index in 0..list.plugins.len() {
                let mut conf = list.inject(index);
                conf["cni.dev/valid-attachments"] = json!(attachments);
                conf["cni.dev/attachments"] = json!(attachments);
                errors.extend(
                    self.exec_quiet("GC", list.plugin_type(index), None, &conf)
                        .err(),
                );
            }
        }
        match errors.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }

    /// Runs `command` of plugin `index` of `list` on its own, with `prev` as its `prevResult`:
    /// the stdin and environment the list operations give that plugin, without the other
    /// plugins, the cache or the ADD checks. For tests of one plugin in a chain position.
    pub fn plugin(
        &self,
        list: &Conflist,
        index: usize,
        command: &str,
        att: &Attachment,
        prev: Option<&Value>,
    ) -> Outcome {
        let conf = list.plugin_conf(index, prev, att);
        let binary = self
            .find(command, list.plugin_type(index))
            .unwrap_or_else(|e| panic!("{e}"));
        self.invocation(&binary, command, Some(att), &conf).run()
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
        let why = "success must print nothing";
        Err(RuntimeError::plugin(command, plugin, why, outcome))
    }

    /// Finds `plugin` and runs `command` with `conf` on stdin; a failure is an error.
    fn exec(
        &self,
        command: &str,
        plugin: &str,
        att: Option<&Attachment>,
        conf: &Value,
    ) -> Result<Outcome, RuntimeError> {
        let binary = self.find(command, plugin)?;
        let outcome = self.invocation(&binary, command, att, conf).run();
        if outcome.success {
            return Ok(outcome);
        }
        Err(RuntimeError::plugin(
            command,
            plugin,
            "plugin failed",
            outcome,
        ))
    }

    /// The process libcni starts: the runtime's environment, then the `CNI_*` variables.
    fn invocation<'b>(
        &self,
        binary: &'b Path,
        command: &str,
        att: Option<&Attachment>,
        conf: &Value,
    ) -> Invocation<'b> {
        let none = Attachment::new("", "", "");
        let att = att.unwrap_or(&none);
        let mut invocation = Invocation::new(binary, command, self.node);
        for (key, value) in &self.env {
            invocation = invocation.var(key, value);
        }
        invocation = invocation
            .var("CNI_COMMAND", command)
            .attachment(&att.container_id, &att.netns, &att.ifname, &self.bin_dir)
            .var("CNI_ARGS", &att.cni_args())
            .stdin(conf.to_string());
        match &self.netns {
            Some(ns) => invocation.in_netns(ns),
            None => invocation,
        }
    }

    /// The executable for `plugin`: the test's override, else the one of that name in
    /// `CNI_PATH`.
    fn find(&self, command: &str, plugin: &str) -> Result<PathBuf, RuntimeError> {
        if let Some((_, binary)) = self.binaries.iter().find(|(t, _)| t == plugin) {
            return Ok(binary.clone());
        }
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
