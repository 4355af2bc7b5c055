//! IPAM delegation by exec (the protocol of Go's `ipam.ExecAdd/ExecDel/ExecCheck`).
//!
//! The delegate named by `ipam.type` is found in `CNI_PATH` (a plain name, a regular executable
//! file), run with this process's environment with only `CNI_COMMAND` replaced and with the exact
//! stdin bytes this plugin received, and bounded by a timeout. Its error code reaches the runtime
//! unchanged (a delegate's 11 stays 11). Its stderr is forwarded to ours.

use galactic_core::cni::env::Command;
use galactic_core::cni::error::{CniError, Code, ErrorCode};
use galactic_core::cni::result::CniResult;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Default bound on one delegate call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Set in every delegate's environment: how deep in a delegation it runs. A plugin started as
/// a delegate never delegates again, so no configuration can make the chain recurse (a stanza
/// naming a master as its own IPAM would otherwise exec itself without end).
pub const DEPTH_ENV: &str = "GALACTIC_CNI_DELEGATE_DEPTH";

/// Whether this process runs as another plugin's delegate.
pub fn is_delegated() -> bool {
    depth() > 0
}

fn depth() -> u32 {
    std::env::var(DEPTH_ENV)
        .ok()
        .and_then(|d| d.trim().parse().ok())
        .unwrap_or(0)
}

/// How often and how long to retry `ETXTBSY` (a binary still being written by an installer).
const TEXT_BUSY_RETRIES: u32 = 5;
const TEXT_BUSY_PAUSE: Duration = Duration::from_millis(200);

/// Why a delegate call failed.
#[derive(Debug, thiserror::Error)]
pub enum DelegateError {
    /// The plugin type is not a plain binary name (code 7).
    #[error("plugin type {name:?} must be a plain binary name (no '/')")]
    NotAName {
        /// The type as configured.
        name: String,
    },
    /// No executable of that name in `CNI_PATH` (code 7).
    #[error("delegate plugin {name:?} was not found in CNI_PATH [{}]; install it there", dirs.join(", "))]
    NotFound {
        /// The plugin type.
        name: String,
        /// The directories searched.
        dirs: Vec<String>,
    },
    /// The binary could not be started (code 5).
    #[error("cannot run delegate {}: {source}", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the delegate failed (code 5).
    #[error("waiting for delegate {}: {source}", binary.display())]
    Wait {
        /// The binary.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// This process is itself a delegate: delegating again could recurse (code 7).
    #[error("delegate plugin {name:?} not run: this plugin was itself started as a delegate ({DEPTH_ENV} is set), and a delegate never delegates again; check the ipam.type of the network configuration")]
    Nested {
        /// The plugin type that was to be run.
        name: String,
    },
    /// The delegate did not finish in time and was stopped (code 11: the runtime retries).
    #[error("delegate {} did not finish {command} within {}; it was stopped", binary.display(), humantime::format_duration(*timeout))]
    Timeout {
        /// The binary.
        binary: PathBuf,
        /// The verb.
        command: Command,
        /// The bound.
        timeout: Duration,
    },
    /// The delegate answered ADD with nothing (code 6).
    #[error("delegate plugin {name:?} returned no result for ADD")]
    NoResult {
        /// The plugin type.
        name: String,
    },
    /// The delegate's ADD result does not parse (code 6).
    #[error("delegate plugin {name:?} returned an invalid result: {source}")]
    BadResult {
        /// The plugin type.
        name: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The delegate failed: its own CNI error (or one built from its exit status and stderr),
    /// passed through unchanged.
    #[error("{}", .0.msg)]
    Failed(CniError),
}

impl ErrorCode for DelegateError {
    fn code(&self) -> Code {
        match self {
            Self::NotAName { .. } | Self::NotFound { .. } | Self::Nested { .. } => {
                Code::INVALID_CONFIG
            }
            Self::Spawn { .. } | Self::Wait { .. } => Code::IO,
            Self::Timeout { .. } => Code::TRY_AGAIN_LATER,
            Self::NoResult { .. } | Self::BadResult { .. } => Code::DECODE,
            Self::Failed(e) => e.code,
        }
    }
    fn details(&self) -> Option<String> {
        match self {
            Self::Failed(e) => e.details.clone(),
            _ => None,
        }
    }
}

/// A delegate to exec: its name and where to look for it.
#[derive(Debug, Clone)]
pub struct Delegate<'a> {
    /// The plugin type (`ipam.type`).
    pub plugin_type: &'a str,
    /// The `CNI_PATH` directories, searched in order.
    pub search_path: &'a [PathBuf],
    /// The bound on one call.
    pub timeout: Duration,
}

impl<'a> Delegate<'a> {
    /// The delegate `plugin_type`, looked up in `search_path`, bounded by [`DEFAULT_TIMEOUT`].
    pub fn new(plugin_type: &'a str, search_path: &'a [PathBuf]) -> Self {
        Self {
            plugin_type,
            search_path,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Finds the delegate's binary: a plain name (no `/`) naming a regular, executable file in
    /// one of the search directories.
    pub fn find(&self) -> Result<PathBuf, DelegateError> {
        let name = self.plugin_type;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(DelegateError::NotAName { name: name.into() });
        }
        self.search_path
            .iter()
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable_file(candidate))
            .ok_or_else(|| DelegateError::NotFound {
                name: name.into(),
                dirs: self
                    .search_path
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect(),
            })
    }

    /// ADD: the delegate's result. Empty output is a decode error (an IPAM ADD must answer).
    pub fn add(&self, stdin: &[u8]) -> Result<CniResult, DelegateError> {
        self.start(Command::Add, stdin)?.result()
    }

    /// DEL, CHECK, STATUS or GC: success unless the delegate fails; its output is ignored.
    pub fn call(&self, command: Command, stdin: &[u8]) -> Result<(), DelegateError> {
        self.start(command, stdin)?.wait().map(drop)
    }

    /// A step another plugin binary performs for this one (`args` name it, e.g. the NAD calls
    /// galactic-bgp makes for the masters): same environment and stdin as a delegate call,
    /// success unless it fails, its error passed through unchanged.
    pub fn call_step(
        &self,
        args: &[&str],
        command: Command,
        stdin: &[u8],
    ) -> Result<(), DelegateError> {
        self.start_with(args, command, stdin)?.wait().map(drop)
    }

    /// Starts the delegate for `command` and returns at once: the caller does other work while
    /// it runs (a master creates its interfaces while the IPAM delegate allocates) and collects
    /// the outcome with [`Running::wait`] or [`Running::result`]. The bound on the call counts
    /// from here.
    pub fn start(&self, command: Command, stdin: &[u8]) -> Result<Running, DelegateError> {
        self.start_with(&[], command, stdin)
    }

    /// Starts the delegate for `command` without its stdin yet: the process starts up (exec, its
    /// runtime, its own configuration) while the caller finishes what must come before the
    /// delegate acts, then [`Held::feed`] hands it the configuration it is waiting to read. A
    /// CNI plugin reads its stdin before it does anything, so until then it changes nothing.
    pub fn start_held(&self, command: Command) -> Result<Held, DelegateError> {
        self.spawn(&[], command, None).map(Held)
    }

    fn start_with(
        &self,
        args: &[&str],
        command: Command,
        stdin: &[u8],
    ) -> Result<Running, DelegateError> {
        self.spawn(args, command, Some(stdin))
    }

    fn spawn(
        &self,
        args: &[&str],
        command: Command,
        stdin: Option<&[u8]>,
    ) -> Result<Running, DelegateError> {
        if is_delegated() {
            return Err(DelegateError::Nested {
                name: self.plugin_type.into(),
            });
        }
        let binary = self.find()?;
        let child = spawn_retrying(&binary, args, command)?;
        Ok(Running::watch(
            child,
            binary,
            self.plugin_type,
            command,
            stdin,
            self.timeout,
        ))
    }
}

/// A delegate started by [`Delegate::start_held`], waiting for its stdin. Dropped unfed, its
/// stdin closes: it reads an empty configuration, refuses, and is waited for.
pub struct Held(Running);

impl Held {
    /// Writes the delegate's stdin (the exact bytes this plugin received): from here on it acts.
    pub fn feed(mut self, stdin: &[u8]) -> Running {
        self.0.feed(stdin);
        self.0
    }
}

/// A delegate process under way, started by [`Delegate::start`]. Dropping it without waiting
/// still waits (within the bound), so no delegate ever outlives the call that started it
/// unobserved.
pub struct Running {
    plugin_type: String,
    binary: PathBuf,
    command: Command,
    pid: Pid,
    deadline: Instant,
    timeout: Duration,
    outcome: Option<mpsc::Receiver<std::io::Result<Output>>>,
    /// The delegate's stdin while it is held ([`Held`]).
    input: Option<std::process::ChildStdin>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Feeds `stdin` and collects the output on threads of their own, so a delegate that does
    /// not read all its stdin, or writes more than a pipe holds, cannot deadlock the caller.
    /// `stdin` is written at once; without it the delegate waits for [`Held::feed`].
    fn watch(
        mut child: std::process::Child,
        binary: PathBuf,
        plugin_type: &str,
        command: Command,
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Self {
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let input = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let mut running = Self {
            plugin_type: plugin_type.to_owned(),
            binary,
            command,
            pid,
            deadline: Instant::now() + timeout,
            timeout,
            outcome: Some(rx),
            input,
            threads: vec![waiter],
        };
        if let Some(stdin) = stdin {
            running.feed(stdin);
        }
        running
    }

    /// Writes `stdin` to the delegate and closes it, on a thread of its own.
    fn feed(&mut self, stdin: &[u8]) {
        let Some(mut input) = self.input.take() else {
            return;
        };
        let bytes = stdin.to_vec();
        self.threads.push(std::thread::spawn(move || {
            let _ = input.write_all(&bytes);
        }));
    }

    /// Waits for the delegate and returns its stdout when it exits 0; its own error otherwise.
    /// Its stderr is forwarded to ours (C77); the runtime keeps it.
    pub fn wait(mut self) -> Result<Vec<u8>, DelegateError> {
        let output = self.finish()?;
        let _ = std::io::stderr().write_all(&output.stderr);
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(DelegateError::Failed(delegate_error(
            &self.plugin_type,
            self.command,
            &output,
        )))
    }

    /// Waits for an ADD and parses its result. Empty output is a decode error (an IPAM ADD
    /// must answer).
    pub fn result(self) -> Result<CniResult, DelegateError> {
        let name = self.plugin_type.clone();
        let stdout = self.wait()?;
        if stdout.iter().all(u8::is_ascii_whitespace) {
            return Err(DelegateError::NoResult { name });
        }
        serde_json::from_slice(&stdout).map_err(|source| DelegateError::BadResult { name, source })
    }

    /// The delegate's output, at most until the deadline (then the whole process group is
    /// killed: code 11). Runs once; later calls find nothing to wait for.
    fn finish(&mut self) -> Result<Output, DelegateError> {
        // A delegate still held gets the end of its stdin rather than waiting for the bound.
        drop(self.input.take());
        let Some(rx) = self.outcome.take() else {
            return Err(self.timed_out());
        };
        let left = self.deadline.saturating_duration_since(Instant::now());
        let outcome = match rx.recv_timeout(left) {
            Ok(result) => result.map_err(|source| DelegateError::Wait {
                binary: self.binary.clone(),
                source,
            }),
            Err(_) => {
                // The child is not reaped until the waiter returns, so its pid (the group's
                // id) cannot be reused yet. Its own children die with it: they may hold our
                // pipes.
                let _ = killpg(self.pid, Signal::SIGKILL);
                Err(self.timed_out())
            }
        };
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        outcome
    }

    fn timed_out(&self) -> DelegateError {
        DelegateError::Timeout {
            binary: self.binary.clone(),
            command: self.command,
            timeout: self.timeout,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.outcome.is_some() {
            let _ = self.finish();
        }
    }
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Spawns `binary` in a process group of its own (so the bound can kill whatever it starts),
/// retrying while the file is still being written by an installer (`ETXTBSY`).
fn spawn_retrying(
    binary: &Path,
    args: &[&str],
    command: Command,
) -> Result<std::process::Child, DelegateError> {
    let mut attempt = 0;
    loop {
        let mut process = Process::new(binary);
        die_with_caller(&mut process);
        let spawned = process
            .args(args)
            .env("CNI_COMMAND", command.as_str())
            .env(DEPTH_ENV, (depth() + 1).to_string())
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => return Ok(child),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < TEXT_BUSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(TEXT_BUSY_PAUSE);
            }
            Err(source) => {
                return Err(DelegateError::Spawn {
                    binary: binary.into(),
                    source,
                })
            }
        }
    }
}

/// Makes the delegate die (SIGKILL) when this process dies. The delegate runs in a process group
/// of its own (so the timeout can kill everything it started), which a runtime killing the
/// plugin's group no longer reaches: without this, a delegate of a killed master would go on and
/// allocate after the runtime's recovery DEL or GC had already run, leaking the allocation until
/// the next GC. The caller's thread waits for the delegate, so the signal cannot come early.
fn die_with_caller(process: &mut Process) {
    let caller = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and makes only
    // async-signal-safe system calls (prctl, getppid); it allocates nothing.
    unsafe {
        process.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The caller died before the signal was armed: nobody is left to answer to.
            if u32::try_from(libc::getppid()).ok() != Some(caller) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// The delegate's own CNI error when it printed one; otherwise an error built from its stderr.
fn delegate_error(plugin_type: &str, command: Command, output: &Output) -> CniError {
    if let Ok(err) = serde_json::from_slice::<CniError>(&output.stdout) {
        return err;
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    let how = match output.status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal".to_owned(),
    };
    let mut err = CniError::new(
        Code::INTERNAL,
        format!("delegate plugin {plugin_type:?} {how} during {command} without a CNI error"),
    );
    if !stderr.is_empty() {
        err = err.with_details(stderr);
    }
    err
}

#[cfg(test)]
mod tests;
