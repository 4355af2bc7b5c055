//! What the runtime holds for a network and an attachment, and the stdin it builds from them.

use super::RuntimeError;
use serde_json::{json, Map, Value};
use std::path::Path;

/// A network configuration list as the runtime holds it (libcni's `NetworkConfigList`).
#[derive(Debug, Clone, PartialEq)]
pub struct Conflist {
    /// `cniVersion` of the list.
    pub version: String,
    /// The network name.
    pub name: String,
    /// `disableCheck`: CHECK of this list succeeds without running any plugin.
    pub disable_check: bool,
    /// `disableGC`: GC of this list does nothing.
    pub disable_gc: bool,
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
        let flag = |key: &str| value.get(key).and_then(Value::as_bool).unwrap_or(false);
        Ok(Self {
            version: text("cniVersion")?,
            name: text("name")?,
            disable_check: flag("disableCheck"),
            disable_gc: flag("disableGC"),
            plugins,
        })
    }

    /// The list of one that a single network config file is (libcni's `ConfListFromConf`): the
    /// entry keeps every key, the list takes its `name` and `cniVersion`.
    pub fn from_conf(conf: &Value) -> Result<Self, RuntimeError> {
        Self::from_value(&json!({
            "cniVersion": conf.get("cniVersion"),
            "name": conf.get("name"),
            "plugins": [conf],
        }))
    }

    /// A list of `plugins` named `name` declaring `version` (panics when it is not a valid list).
    pub fn new(version: &str, name: &str, plugins: Vec<Value>) -> Self {
        Self::from_value(&json!({"cniVersion": version, "name": name, "plugins": plugins}))
            .unwrap_or_else(|e| panic!("not a conflist: {e}"))
    }

    /// The list as JSON (what the cache records as the attachment's config).
    pub fn to_value(&self) -> Value {
        json!({
            "cniVersion": self.version,
            "name": self.name,
            "disableCheck": self.disable_check,
            "disableGC": self.disable_gc,
            "plugins": self.plugins,
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

    /// What plugin `index` reads on stdin for an attachment (libcni's `buildOneConfig`): the
    /// entry with the list's `name` and `cniVersion` (overwriting its own), `prevResult` when
    /// there is one, and `runtimeConfig` from `att`'s capability arguments.
    pub fn plugin_conf(&self, index: usize, prev: Option<&Value>, att: &Attachment) -> Value {
        let mut conf = self.inject(index);
        if let Some(prev) = prev {
            conf["prevResult"] = prev.clone();
        }
        let runtime_config = att.runtime_config(&conf);
        if !runtime_config.is_empty() {
            conf["runtimeConfig"] = Value::Object(runtime_config);
        }
        conf
    }

    /// The entry with the list's `name` and `cniVersion` (libcni's `InjectConf` for STATUS and
    /// GC, which carry no attachment).
    pub fn inject(&self, index: usize) -> Value {
        let mut conf = self
            .plugins
            .get(index)
            .cloned()
            .unwrap_or_else(|| json!({}));
        conf["cniVersion"] = json!(self.version);
        conf["name"] = json!(self.name);
        conf
    }

    /// Whether the list's version allows STATUS and GC (1.1.0).
    pub fn has_status_and_gc(&self) -> bool {
        self.version == "1.1.0"
    }
}

/// One attachment: what `RuntimeConf` carries in libcni.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS` (empty: exported empty, which plugins read as unset).
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS` pairs (e.g. `K8S_POD_NAME`), joined with `;`.
    pub args: Vec<(String, String)>,
    /// Capability arguments (`CapabilityArgs`: `ips`, `mac`, `portMappings`, …), given to the
    /// plugins that declare the capability as `runtimeConfig`.
    pub capabilities: Map<String, Value>,
}

impl Attachment {
    /// An attachment without `CNI_ARGS` or capability arguments.
    pub fn new(container_id: &str, netns: &str, ifname: &str) -> Self {
        Self {
            container_id: container_id.to_owned(),
            netns: netns.to_owned(),
            ifname: ifname.to_owned(),
            args: Vec::new(),
            capabilities: Map::new(),
        }
    }

    /// Adds one `CNI_ARGS` pair.
    pub fn arg(mut self, key: &str, value: &str) -> Self {
        self.args.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds one capability argument.
    pub fn capability(mut self, name: &str, value: Value) -> Self {
        self.capabilities.insert(name.to_owned(), value);
        self
    }

    /// The same attachment with another `CNI_NETNS` (`""`: none, e.g. a DEL after the
    /// namespace is gone).
    pub fn in_netns(mut self, netns: &str) -> Self {
        self.netns = netns.to_owned();
        self
    }

    /// `CNI_ARGS` (libcni's `stringify`).
    pub fn cni_args(&self) -> String {
        self.args
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// libcni's `injectRuntimeConfig`: the capability arguments of the capabilities `conf`
    /// declares `true`, nothing else.
    fn runtime_config(&self, conf: &Value) -> Map<String, Value> {
        let declared = conf.get("capabilities").and_then(Value::as_object);
        declared
            .into_iter()
            .flatten()
            .filter(|(_, on)| on.as_bool() == Some(true))
            .filter_map(|(name, _)| Some((name.clone(), self.capabilities.get(name)?.clone())))
            .collect()
    }

    /// libcni's checks before an ADD (`utils.ValidateContainerID`, `ValidateNetworkName`,
    /// `ValidateInterfaceName`); the refusal in libcni's words.
    pub(super) fn validate(&self, network: &str) -> Result<(), String> {
        let name_chars = |s: &str| {
            let mut chars = s.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        };
        if self.container_id.is_empty() {
            return Err("missing containerID".into());
        }
        if !name_chars(&self.container_id) {
            return Err(format!(
                "invalid characters in containerID {:?}",
                self.container_id
            ));
        }
        if !name_chars(network) {
            return Err(format!(
                "invalid characters found in network name {network:?}"
            ));
        }
        let ifname = &self.ifname;
        if ifname.is_empty() {
            return Err("interface name is empty".into());
        }
        if ifname.len() > 15 {
            return Err(format!("interface name {ifname:?} is too long"));
        }
        if ifname == "." || ifname == ".." {
            return Err("interface name is . or ..".into());
        }
        if ifname
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
        {
            return Err(format!(
                "interface name {ifname:?} contains / or : or whitespace characters"
            ));
        }
        Ok(())
    }
}
