//! Plugin processes started, watched and reaped one by one: wall time from spawn to reap, the
//! kernel's peak-RSS figure, the exit status, and a handle to SIGKILL the process (or its
//! process group, which holds its delegate) while it runs. The benchmarks and the crash
//! campaign run every plugin through here; [`crate::Invocation::run`] is the plain variant
//! for tests.

use crate::harness::{io, Error, Result};
use crate::{Invocation, Outcome};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A started process.
pub struct Running {
    child: Child,
    started: Instant,
    /// stderr goes to an anonymous file, read after the reap: a chatty process can never
    /// block on a full pipe while stdout is read, and no reader thread runs beside a timing.
    stderr: File,
}

/// A reaped process.
#[derive(Debug)]
pub struct Finished {
    /// Exit status.
    pub status: ExitStatus,
    /// stdout.
    pub stdout: Vec<u8>,
    /// stderr.
    pub stderr: Vec<u8>,
    /// Wall time from spawn to reap.
    pub elapsed: Duration,
    /// `ru_maxrss` of the process, KiB. Linux charges a process the high-water mark of the one
    /// that forked it, so this is never below this (large) process's; see [`run_probed`].
    pub max_rss_kib: u64,
}

impl Finished {
    /// Whether it died of SIGKILL.
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(libc::SIGKILL)
    }

    /// As the test kit's [`Outcome`].
    pub fn outcome(&self) -> Outcome {
        Outcome {
            success: self.status.success(),
            stdout: String::from_utf8_lossy(&self.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&self.stderr).into_owned(),
        }
    }
}

/// Spawns `command` with piped stdio, in a process group of its own, and writes `stdin` to it
/// (a process that exits without reading it is not an error: that is what a kill does).
pub fn start(mut command: Command, stdin: &[u8]) -> Result<Running> {
    let program = command.get_program().to_string_lossy().into_owned();
    let stderr = tempfile::tempfile().map_err(io("create a file for stderr"))?;
    let child_stderr = stderr.try_clone().map_err(io("share the stderr file"))?;
    let started = Instant::now();
    let mut child = command
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(child_stderr)
        .spawn()
        .map_err(io(format!("spawn {program}")))?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    Ok(Running {
        child,
        started,
        stderr,
    })
}

impl Running {
    /// Its pid (also its process group id).
    pub fn pid(&self) -> Pid {
        // Pids fit in i32 on Linux (pid_max ≤ 2^22).
        Pid::from_raw(self.child.id() as i32)
    }

    /// SIGKILL to the process or, with `group`, to its whole process group. A process that has
    /// already exited (a zombie until reaped) is not an error: the kill just misses.
    pub fn kill(&self, group: bool) {
        let _ = if group {
            killpg(self.pid(), Signal::SIGKILL)
        } else {
            kill(self.pid(), Signal::SIGKILL)
        };
    }

    /// Reads its output to the end and reaps it with `wait4`, for its resource usage.
    pub fn wait(mut self) -> Result<Finished> {
        let mut stdout = Vec::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_end(&mut stdout).map_err(io("read stdout"))?;
        }
        let pid = self.pid().as_raw();
        let mut status = 0;
        // SAFETY: rusage is plain data for which all-zero is valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (std's Child is never waited on
        // here); `status` and `usage` outlive the call.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        let elapsed = self.started.elapsed();
        if rc != pid {
            return Err(Error::Io {
                what: format!("wait4({pid})"),
                source: std::io::Error::last_os_error(),
            });
        }
        let mut stderr = Vec::new();
        self.stderr
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.stderr.read_to_end(&mut stderr))
            .map_err(io("read stderr"))?;
        Ok(Finished {
            status: ExitStatus::from_raw(status),
            stdout,
            stderr,
            elapsed,
            max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        })
    }
}

impl Invocation<'_> {
    /// Starts the plugin as [`Invocation::run`] would (same environment, same namespace) but
    /// returns at once, in a process group of its own, for a caller that times it or kills it
    /// while it runs.
    pub fn start(self) -> Result<Running> {
        start(self.command(), &self.stdin)
    }
}

/// A process's own peak RSS, as `rss-probe` measured it.
#[derive(Debug)]
pub struct Probed {
    /// The process as [`Running::wait`] saw it, with `max_rss_kib` replaced by the program's
    /// own `VmHWM` at its exit.
    pub finished: Finished,
    /// The peak RSS in KiB of each program the process started, by name.
    pub started_rss_kib: Vec<(String, u64)>,
}

/// Runs `program` with exactly `env` (plus `PATH`) through the `rss-probe` launcher at `probe`,
/// which reads each process's own `VmHWM` at its exit (ptrace), so that the figure is the
/// program's and not this process's nor the launcher's (see rss-probe's docs).
pub fn run_probed(
    probe: &Path,
    program: &Path,
    env: &[(&str, String)],
    stdin: &[u8],
) -> Result<Probed> {
    if !probe.is_file() {
        return Err(Error::Precondition(format!(
            "{} is missing: build it with `cargo build -p xtask --bin rss-probe`",
            probe.display()
        )));
    }
    let out = tempfile::NamedTempFile::new().map_err(io("create the rss-probe report"))?;
    let mut command = Command::new(probe);
    command
        .arg(out.path())
        .arg(program)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    for key in ["PATH", "RSS_PROBE_SMAPS"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    let mut finished = start(command, stdin)?.wait()?;
    let report = std::fs::read_to_string(out.path()).map_err(io("read the rss-probe report"))?;
    let mut peaks = report.lines().map(|line| {
        line.rsplit_once(' ')
            .and_then(|(name, kib)| Some((name.to_owned(), kib.parse::<u64>().ok()?)))
            .ok_or_else(|| Error::Precondition(format!("rss-probe wrote {line:?}")))
    });
    finished.max_rss_kib = peaks
        .next()
        .ok_or_else(|| Error::Precondition("rss-probe wrote no peak".into()))??
        .1;
    Ok(Probed {
        finished,
        started_rss_kib: peaks.collect::<Result<_>>()?,
    })
}

/// A plain process with exactly `env` (plus `PATH`): how the benches start what is not a
/// plugin call of a test node (the reference plugins, `/bin/true`).
pub fn command(program: &Path, env: &[(&str, String)]) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
}
