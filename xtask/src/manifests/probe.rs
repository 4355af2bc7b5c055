//! Step 4 of the lint: every stanza through the real plugin binaries (decision 0040).

use super::{Source, MASTERS};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The plugin binaries and a throwaway node to run them on.
pub(super) struct Probe {
    bin_dir: PathBuf,
    node: tempfile::TempDir,
}

impl Probe {
    pub(super) fn new(bin_dir: &Path) -> Result<Self> {
        for plugin in crate::stage::PLUGINS {
            let path = bin_dir.join(plugin);
            if !path.is_file() {
                bail!("plugin {} not found", path.display());
            }
        }
        let node = tempfile::tempdir()?;
        let config = json!({
            "state_dir": node.path().join("state"),
            "log_file": node.path().join("galactic.log"),
            "publisher": "local",
            "routing_domain": "table",
        });
        std::fs::write(node.path().join("node.json"), config.to_string())?;
        Ok(Self {
            bin_dir: bin_dir.to_path_buf(),
            node,
        })
    }

    /// Step 4 for every entry of `source` (which passed steps 1–3).
    pub(super) fn stanzas(&self, source: &Source) -> Result<Vec<String>> {
        let mut found = Vec::new();
        let plugins = source.conflist["plugins"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, plugin) in plugins.iter().enumerate() {
            let mut conf = plugin.clone();
            conf["cniVersion"] = json!("1.1.0");
            conf["name"] = source.conflist["name"].clone();
            let plugin_type = plugin["type"].as_str().unwrap_or_default();
            if let Some(problem) = self.stanza(plugin_type, &conf)? {
                found.push(format!("plugins[{i}] ({plugin_type}): {problem}"));
            }
        }
        Ok(found)
    }

    /// The plugin's verdict on one stanza: `None` when it accepts it.
    fn stanza(&self, plugin_type: &str, conf: &Value) -> Result<Option<String>> {
        let (command, accepted_code) = if MASTERS.contains(&plugin_type) {
            ("STATUS", None)
        } else {
            ("ADD", Some(6))
        };
        let (success, reply) = self.exec(plugin_type, command, conf)?;
        let code = reply["code"].as_u64();
        let msg = reply["msg"].as_str().unwrap_or_default();
        Ok(match (success, accepted_code, code) {
            (true, None, _) => None,
            (false, Some(want), Some(got)) if want == got && msg.contains("prevResult") => None,
            (false, _, Some(7)) => Some(format!("refused by the plugin: {msg}")),
            (false, _, Some(code)) => Some(format!("{command} answered code {code}: {msg}")),
            _ => Some(format!("unexpected {command} reply: {reply}")),
        })
    }

    /// Runs `plugin_type` from the bin dir with a runtime's environment; (success, stdout JSON).
    fn exec(&self, plugin_type: &str, command: &str, conf: &Value) -> Result<(bool, Value)> {
        let binary = self.bin_dir.join(plugin_type);
        let mut cmd = Command::new(&binary);
        cmd.env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_PATH", &self.bin_dir)
            .env(
                "GALACTIC_CNI_NODE_CONFIG",
                self.node.path().join("node.json"),
            )
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if command == "ADD" {
            cmd.env("CNI_CONTAINERID", "galactic-lint")
                .env("CNI_NETNS", "/var/run/netns/galactic-lint-never-created")
                .env("CNI_IFNAME", "eth0");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("run {}", binary.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin.write_all(conf.to_string().as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reply = if stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&stdout).unwrap_or_else(|_| json!({"stdout": stdout}))
        };
        Ok((out.status.success(), reply))
    }
}
