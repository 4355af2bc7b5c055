//! The per-process cost every CNI call pays before doing any work: each release plugin's
//! VERSION (and STATUS on a 1.1.0 stanza) as a fresh process many times, next to `/bin/true`
//! (the spawn floor), with medians, p95, the ratio to the floor and each binary's size.

use crate::stats::Summary;
use galactic_testkit::harness::{io, Result};
use galactic_testkit::process;
use serde_json::json;
use std::path::Path;

/// Runs per binary and command.
pub const RUNS: usize = 300;

/// One binary's figures.
pub struct Row {
    /// The plugin.
    pub plugin: String,
    /// VERSION wall time.
    pub version: Summary,
    /// STATUS wall time.
    pub status: Summary,
    /// File size in bytes.
    pub size: u64,
}

/// The floor and every plugin's row.
pub struct Measured {
    /// `/bin/true`.
    pub floor: Summary,
    /// Per plugin.
    pub rows: Vec<Row>,
}

/// Measures every plugin of `plugins` in `bins`.
pub fn run(bins: &Path, plugins: &[&str]) -> Result<Measured> {
    let node = tempfile::tempdir().map_err(io("create a node directory"))?;
    let node_config = node.path().join("node.json");
    // The node defaults (publisher included), not the test node's: STATUS is measured as a
    // node without further configuration answers it.
    super::write_node_config(
        &node_config,
        &json!({"log_file": node.path().join("log"), "log_level": "info",
                "state_dir": node.path().join("state")}),
    )?;
    let floor = sample(Path::new("/bin/true"), "VERSION", b"", &node_config)?;
    let mut rows = Vec::new();
    for plugin in plugins {
        let binary = bins.join(plugin);
        let version = sample(
            &binary,
            "VERSION",
            br#"{"cniVersion":"1.1.0"}"#,
            &node_config,
        )?;
        let stanza = format!(r#"{{"cniVersion":"1.1.0","name":"bench","type":"{plugin}"}}"#);
        let status = sample(&binary, "STATUS", stanza.as_bytes(), &node_config)?;
        let size = std::fs::metadata(&binary)
            .map_err(io(format!("stat {}", binary.display())))?
            .len();
        rows.push(Row {
            plugin: (*plugin).to_owned(),
            version,
            status,
            size,
        });
    }
    Ok(Measured { floor, rows })
}

/// Wall time of `RUNS` runs.
fn sample(binary: &Path, command: &str, stdin: &[u8], node_config: &Path) -> Result<Summary> {
    let env = [
        ("CNI_COMMAND", command.to_owned()),
        (
            "GALACTIC_CNI_NODE_CONFIG",
            node_config.display().to_string(),
        ),
    ];
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let run = process::start(process::command(binary, &env), stdin)?.wait()?;
        times.push(run.elapsed);
    }
    Ok(Summary::of(&mut times))
}

/// The table.
pub fn table(m: &Measured) -> String {
    let fmt = |d: std::time::Duration| format!("{:.3}ms", d.as_secs_f64() * 1000.0);
    let mut out = format!("{RUNS} runs each, release build; floor = spawn of /bin/true\n");
    out.push_str(&format!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>10}\n",
        "binary", "median", "p95", "xfloor", "STATUS med", "size"
    ));
    out.push_str(&format!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>10}\n",
        "/bin/true",
        fmt(m.floor.median),
        fmt(m.floor.p95),
        "1.0",
        "-",
        "-"
    ));
    for row in &m.rows {
        out.push_str(&format!(
            "{:<18} {:>10} {:>10} {:>8.2} {:>12} {:>9}K\n",
            row.plugin,
            fmt(row.version.median),
            fmt(row.version.p95),
            row.version.median.as_secs_f64() / m.floor.median.as_secs_f64(),
            fmt(row.status.median),
            row.size / 1024
        ));
    }
    out
}
