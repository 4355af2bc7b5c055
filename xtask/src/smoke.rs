//! `smoke`: stage everything into a throwaway root and talk to every staged plugin the way a
//! runtime does (VERSION, then STATUS on a 1.1.0 stanza), printing one line per plugin.

use crate::stage::{build_and_stage, Options, PLUGINS};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `cargo xtask smoke`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build and stage release binaries (default: debug)
    #[arg(long)]
    pub release: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let root = tempfile::tempdir().context("create a temporary root")?;
    let staged = Staged::new(root.path());
    build_and_stage(&staged.options(root.path(), args.release))?;
    println!("{:<18} {:<26} STATUS", "PLUGIN", "VERSION");
    let mut failures = 0;
    for plugin in PLUGINS {
        failures += staged.check(plugin)?;
    }
    let lines = std::fs::read_to_string(&staged.log_file)
        .unwrap_or_default()
        .lines()
        .count();
    println!("log: {lines} JSON lines in {}", staged.log_file.display());
    if failures > 0 {
        bail!("{failures} plugin check(s) failed");
    }
    println!("smoke: PASS (temporary root removed)");
    Ok(())
}

/// Where the plugins are staged in the throwaway root.
struct Staged {
    bin_dir: PathBuf,
    node_config: PathBuf,
    log_file: PathBuf,
}

impl Staged {
    fn new(root: &Path) -> Self {
        Self {
            bin_dir: root.join("opt/cni/bin"),
            node_config: root.join("etc/galactic/node.json"),
            log_file: root.join("var/log/galactic/galactic-cni.log"),
        }
    }

    /// What `build_and_stage` is asked: every path under `root`, the local publisher, an
    /// automatic routing domain, the aliases.
    fn options(&self, root: &Path, release: bool) -> Options {
        Options {
            release,
            bin_dir: self.bin_dir.clone(),
            node_config: self.node_config.clone(),
            set: vec![
                ("publisher".into(), "local".into()),
                ("routing_domain".into(), "auto".into()),
                ("log_file".into(), self.log_file.display().to_string()),
                (
                    "state_dir".into(),
                    root.join("var/lib/galactic").display().to_string(),
                ),
            ],
            aliases: true,
            conflist: None,
            conf_dir: root.join("etc/cni/net.d"),
        }
    }

    /// VERSION, then STATUS, of `plugin`, printed as one line; how many of the two failed.
    fn check(&self, plugin: &str) -> Result<u32> {
        let binary = self.bin_dir.join(plugin);
        let version = call(
            &binary,
            "VERSION",
            &self.node_config,
            &json!({"cniVersion": "1.1.0"}),
        )?;
        let versions = version
            .1
            .as_ref()
            .map(|v| v["supportedVersions"].to_string());
        let status = call(&binary, "STATUS", &self.node_config, &stanza(plugin))?;
        let (status_ok, status_text) = status_line(&status);
        let failures = u32::from(!status_ok) + u32::from(!version.0 || versions.is_none());
        println!(
            "{plugin:<18} {:<26} {status_text}",
            versions.unwrap_or_else(|| "FAIL".into())
        );
        Ok(failures)
    }
}

/// Whether a STATUS reply passes (ready, or not available with code 50 or 51), and its text.
fn status_line(status: &(bool, Option<Value>)) -> (bool, String) {
    match (&status.0, &status.1) {
        (true, None) => (true, "PASS ready".to_owned()),
        (false, Some(err)) if err["code"] == 50 || err["code"] == 51 => (
            true,
            format!(
                "PASS not available (code {}): {}",
                err["code"],
                err["msg"].as_str().unwrap_or("")
            ),
        ),
        (ok, reply) => (
            false,
            format!(
                "FAIL unexpected reply: {} with {}",
                if *ok { "success" } else { "failure" },
                reply
                    .as_ref()
                    .map_or("no output".to_owned(), Value::to_string)
            ),
        ),
    }
}

/// A 1.1.0 stanza of `plugin`; galactic-ipam gets what a master hands its delegate (the master's
/// stanza, with the `ipam` block it reads).
fn stanza(plugin: &str) -> Value {
    let mut stanza = json!({"cniVersion": "1.1.0", "name": "smoke", "type": plugin, "vpc": "1", "vpcattachment": "1"});
    if plugin == galactic_core::plugins::IPAM {
        stanza["type"] = json!(galactic_core::plugins::VETH_MASTER);
        stanza["ipam"] = json!({"type": plugin, "ipv6_subnet": "fd00:10:ff01::/64"});
    }
    stanza
}

/// Runs one plugin command; returns (exit success, parsed stdout if any).
fn call(
    binary: &Path,
    command: &str,
    node_config: &Path,
    stdin: &Value,
) -> Result<(bool, Option<Value>)> {
    let mut child = Command::new(binary)
        .env("CNI_COMMAND", command)
        .env("CNI_PATH", binary.parent().unwrap_or(Path::new("/")))
        .env("GALACTIC_CNI_NODE_CONFIG", node_config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("run {}", binary.display()))?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.to_string().as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = if text.trim().is_empty() {
        None
    } else {
        Some(
            serde_json::from_str(&text)
                .with_context(|| format!("{command} stdout is not JSON: {text}"))?,
        )
    };
    Ok((out.status.success(), parsed))
}
