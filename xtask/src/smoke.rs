//! `smoke`: stage everything into a throwaway root and talk to every staged plugin the way a
//! runtime does (VERSION, then STATUS on a 1.1.0 stanza), printing one line per plugin.

use crate::stage::{build_and_stage, Options, PLUGINS};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// `cargo xtask smoke`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build and stage release binaries (default: debug)
    #[arg(long)]
    pub release: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let release = args.release;
    let root = tempfile::tempdir().context("create a temporary root")?;
    let bin_dir = root.path().join("opt/cni/bin");
    let node_config = root.path().join("etc/galactic/node.json");
    let log_file = root.path().join("var/log/galactic/galactic-cni.log");
    let opts = Options {
        release,
        bin_dir: bin_dir.clone(),
        node_config: node_config.clone(),
        set: vec![
            ("publisher".into(), "local".into()),
            ("routing_domain".into(), "auto".into()),
            ("log_file".into(), log_file.display().to_string()),
            (
                "state_dir".into(),
                root.path().join("var/lib/galactic").display().to_string(),
            ),
        ],
        aliases: true,
        conflist: None,
        conf_dir: root.path().join("etc/cni/net.d"),
    };
    build_and_stage(&opts)?;
    println!("{:<18} {:<26} STATUS", "PLUGIN", "VERSION");
    let mut failures = 0;
    for plugin in PLUGINS {
        let binary = bin_dir.join(plugin);
        let version = call(
            &binary,
            "VERSION",
            &node_config,
            &json!({"cniVersion": "1.1.0"}),
        )?;
        let versions = version
            .1
            .as_ref()
            .map(|v| v["supportedVersions"].to_string());
        let status = call(&binary, "STATUS", &node_config, &stanza(plugin))?;
        let status_text = match (&status.0, &status.1) {
            (true, None) => "PASS ready".to_owned(),
            (false, Some(err)) if err["code"] == 50 || err["code"] == 51 => {
                format!(
                    "PASS not available (code {}): {}",
                    err["code"],
                    err["msg"].as_str().unwrap_or("")
                )
            }
            other => {
                failures += 1;
                format!("FAIL unexpected reply {other:?}")
            }
        };
        if !version.0 || versions.is_none() {
            failures += 1;
        }
        println!(
            "{plugin:<18} {:<26} {status_text}",
            versions.unwrap_or_else(|| "FAIL".into())
        );
    }
    let lines = std::fs::read_to_string(&log_file)
        .unwrap_or_default()
        .lines()
        .count();
    println!("log: {lines} JSON lines in {}", log_file.display());
    if failures > 0 {
        bail!("{failures} plugin check(s) failed");
    }
    println!("smoke: PASS (temporary root removed)");
    Ok(())
}

fn stanza(plugin: &str) -> Value {
    json!({"cniVersion": "1.1.0", "name": "smoke", "type": plugin, "vpc": "1", "vpcattachment": "1"})
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
