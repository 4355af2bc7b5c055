//! `fuzz [--seconds N]`: a bounded fuzzing campaign over every parser that takes untrusted input.
//!
//! Runs each crate's fuzz tests (the `fuzz` module of its `it` test binary) with `GALACTIC_FUZZ_SECONDS=N` (default 60 s per target; targets run
//! two at a time), then prints the cases run per target. The
//! targets, their seed corpora (`fuzz/corpus/<target>/`) and the properties are described in
//! `galactic_testkit::fuzz` and `docs/reliability.md`. Plain `cargo test` runs the same
//! targets with a small fixed case count (the CI pass).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Packages whose fuzz targets are the module `fuzz` of their `it` test binary.
const IT_CRATES: [&str; 4] = [
    "galactic-master",
    "galactic-ipam",
    "galactic-route",
    "galactic-bgp",
];

/// Seconds per target when `--seconds` is not given.
const DEFAULT_SECONDS: u64 = 60;

/// One target's summary line, parsed.
struct TargetRun {
    line: String,
    seeds: u64,
    generated: u64,
}

/// `cargo xtask fuzz [--seconds N]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seconds per target
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SECONDS)]
    pub seconds: u64,
}

pub fn run(args: &Args) -> Result<()> {
    let seconds = args.seconds;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("warning: not root: the process-level targets (route, bgp) will be skipped");
    }
    let runs = campaign(seconds)?;
    print_summary(&runs, seconds);
    Ok(())
}

/// Runs every target; fails when any target fails.
fn campaign(seconds: u64) -> Result<Vec<TargetRun>> {
    run_targets(&IT_CRATES, "fuzz::", seconds)
}

/// Runs the tests under `filter` of `packages`' `it` binaries.
fn run_targets(packages: &[&str], filter: &str, seconds: u64) -> Result<Vec<TargetRun>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(crate::workspace_root()).arg("test");
    for krate in packages {
        command.args(["-p", krate]);
    }
    let mut child = command
        .args(["--test", "it", "--", filter])
        .args(["--nocapture", "--test-threads", "2"])
        .env("GALACTIC_FUZZ_SECONDS", seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .context("run cargo test")?;
    let mut runs = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            println!("{line}");
            if let Some(run) = parse_line(&line) {
                runs.push(run);
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("a fuzz target failed ({status}); the failing input is printed above");
    }
    Ok(runs)
}

/// `fuzz <target>: S seeds + N generated cases in …`.
fn parse_line(line: &str) -> Option<TargetRun> {
    let rest = line.strip_prefix("fuzz ")?;
    let (_, counts) = rest.split_once(": ")?;
    let mut words = counts.split_whitespace();
    let seeds = words.next()?.parse().ok()?;
    let generated = words.nth(2)?.parse().ok()?;
    Some(TargetRun {
        line: line.to_owned(),
        seeds,
        generated,
    })
}

fn print_summary(runs: &[TargetRun], seconds: u64) {
    println!("\nfuzz campaign: {} targets, {seconds} s each", runs.len());
    for run in runs {
        println!("  {}", run.line);
    }
    let seeds: u64 = runs.iter().map(|r| r.seeds).sum();
    let generated: u64 = runs.iter().map(|r| r.generated).sum();
    println!("total: {seeds} seeds + {generated} generated cases, 0 failures");
}

#[cfg(test)]
mod tests {
    use super::parse_line;

    #[test]
    fn summary_lines_parse() {
        let run = parse_line(
            "fuzz cni-args: 5 seeds + 31488 generated cases in 20.0 s, seed 0x1, 0 failures",
        )
        .expect("parses");
        assert_eq!((run.seeds, run.generated), (5, 31488));
        assert!(parse_line("test cni_args ... ok").is_none());
    }
}
