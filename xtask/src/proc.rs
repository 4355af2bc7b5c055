//! Running a plugin process the way a runtime does, timed, with its peak RSS.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One finished process.
#[derive(Debug)]
pub struct Run {
    /// Wall time from spawn to reap.
    pub elapsed: Duration,
    /// Peak resident set size in KiB (`ru_maxrss`; with [`run_probed`], the program's own).
    pub max_rss_kib: u64,
    /// With [`run_probed`]: the peak RSS in KiB of each program the process started, by name.
    pub started_rss_kib: Vec<(String, u64)>,
    /// Exit status.
    pub status: ExitStatus,
    /// stdout.
    pub stdout: Vec<u8>,
}

/// Runs `argv` (optionally inside the named netns) with exactly `env`, feeding `stdin`.
pub fn run(
    argv: &[&Path],
    netns: Option<&str>,
    env: &[(&str, String)],
    stdin: &[u8],
) -> Result<Run> {
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(argv);
            c
        }
        None => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawn {}", argv[0].display()))?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    let mut stdout = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        std::io::Read::read_to_end(&mut out, &mut stdout)?;
    }
    let pid = i32::try_from(child.id()).context("pid out of range")?;
    let mut status = 0;
    // SAFETY: rusage is plain data for which all-zero is valid; wait4 fills it for our own
    // child, which has not been reaped (std's Child is never waited on here).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `status` and `usage` outlive the call.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        bail!("wait4({pid}) failed: {}", std::io::Error::last_os_error());
    }
    Ok(Run {
        elapsed: started.elapsed(),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        started_rss_kib: Vec::new(),
        status: ExitStatus::from_raw(status),
        stdout,
    })
}

/// Builds `rss-probe` next to xtask (see [`run_probed`]).
pub fn build_probe() -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--quiet", "-p", "xtask", "--bin", "rss-probe"])
        .status()?;
    if !ok.success() {
        bail!("building rss-probe failed");
    }
    Ok(())
}

/// Like [`run`], but through the `rss-probe` launcher (built next to xtask), so that
/// `max_rss_kib` is the program's own peak (`VmHWM` at its exit) and not this large process's nor
/// the launcher's (see rss-probe's docs).
pub fn run_probed(program: &Path, env: &[(&str, String)], stdin: &[u8]) -> Result<Run> {
    let probe = std::env::current_exe()?.with_file_name("rss-probe");
    if !probe.is_file() {
        bail!(
            "{} is missing: build it with `cargo build -p xtask --bin rss-probe`",
            probe.display()
        );
    }
    let out = tempfile::NamedTempFile::new()?;
    let mut env = env.to_vec();
    if let Ok(dir) = std::env::var("RSS_PROBE_SMAPS") {
        env.push(("RSS_PROBE_SMAPS", dir));
    }
    let mut run = run(&[&probe, out.path(), program], None, &env, stdin)?;
    let report = std::fs::read_to_string(out.path())?;
    let mut peaks = report.lines().map(|line| {
        let (name, kib) = line.rsplit_once(' ').context("rss-probe output line")?;
        Ok((
            name.to_owned(),
            kib.parse::<u64>().context("rss-probe KiB")?,
        ))
    });
    run.max_rss_kib = peaks.next().context("rss-probe wrote no peak")??.1;
    run.started_rss_kib = peaks.collect::<Result<_>>()?;
    Ok(run)
}
