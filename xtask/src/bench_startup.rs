//! `bench-startup`: the per-process cost every CNI call pays before doing any work.
//!
//! Runs each release plugin's VERSION (and STATUS on a 1.1.0 stanza) as a fresh process many
//! times, next to `/bin/true` (the spawn floor), and prints medians, p95 and the ratio to the
//! floor, plus each binary's size.

use crate::stage::PLUGINS;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 300;

/// `cargo xtask bench-startup` (no options).
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> Result<()> {
    let bins = crate::stage::build_release()?;
    let node = tempfile::tempdir()?;
    let node_config = node.path().join("node.json");
    std::fs::write(
        &node_config,
        serde_json::json!({"log_file": node.path().join("log"), "log_level": "info",
                           "state_dir": node.path().join("state")})
        .to_string(),
    )?;
    let floor = sample(Path::new("/bin/true"), "VERSION", b"", &node_config)?;
    println!(
        "{} runs each, release build; floor = spawn of /bin/true",
        RUNS
    );
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "binary", "median", "p95", "xfloor", "STATUS med", "size"
    );
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "/bin/true",
        fmt(floor.0),
        fmt(floor.1),
        "1.0",
        "-",
        "-"
    );
    for plugin in PLUGINS {
        let binary = bins.join(plugin);
        let version = sample(
            &binary,
            "VERSION",
            br#"{"cniVersion":"1.1.0"}"#,
            &node_config,
        )?;
        let stanza = format!(r#"{{"cniVersion":"1.1.0","name":"bench","type":"{plugin}"}}"#);
        let status = sample(&binary, "STATUS", stanza.as_bytes(), &node_config)?;
        let size = std::fs::metadata(&binary)?.len();
        println!(
            "{plugin:<18} {:>10} {:>10} {:>8.2} {:>12} {:>9}K",
            fmt(version.0),
            fmt(version.1),
            version.0.as_secs_f64() / floor.0.as_secs_f64(),
            fmt(status.0),
            size / 1024
        );
    }
    Ok(())
}

fn fmt(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1000.0)
}

/// (median, p95) wall time of `RUNS` runs.
fn sample(
    binary: &Path,
    command: &str,
    stdin: &[u8],
    node_config: &PathBuf,
) -> Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut child = Command::new(binary)
            .env("CNI_COMMAND", command)
            .env("GALACTIC_CNI_NODE_CONFIG", node_config)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("run {}", binary.display()))?;
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin);
        }
        child.wait()?;
        times.push(started.elapsed());
    }
    Ok(crate::stats::median_p95(&mut times))
}
