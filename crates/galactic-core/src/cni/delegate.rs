//! IPAM delegation by exec (the protocol of Go's `ipam.ExecAdd/ExecDel/ExecCheck`).
//!
//! The delegate named by `ipam.type` is found in `CNI_PATH` (a plain name, a regular executable
//! file), run with this process's environment with only `CNI_COMMAND` replaced and with the exact
//! stdin bytes this plugin received, and bounded by a timeout. Its error code reaches the runtime
//! unchanged (a delegate's 11 stays 11). Its stderr is forwarded to ours.

use super::env::Command;
use super::error::{CniError, Code};
use super::result::CniResult;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Default bound on one delegate call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How often and how long to retry `ETXTBSY` (a binary still being written by an installer).
const TEXT_BUSY_RETRIES: u32 = 5;
const TEXT_BUSY_PAUSE: Duration = Duration::from_millis(200);

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

impl Delegate<'_> {
    /// Finds the delegate's binary: a plain name (no `/`) naming a regular, executable file in
    /// one of the search directories.
    pub fn find(&self) -> Result<PathBuf, CniError> {
        let name = self.plugin_type;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(CniError::invalid_config(format!(
                "plugin type {name:?} must be a plain binary name (no '/')"
            )));
        }
        self.search_path
            .iter()
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable_file(candidate))
            .ok_or_else(|| {
                let dirs: Vec<String> = self
                    .search_path
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect();
                CniError::invalid_config(format!(
                    "delegate plugin {name:?} was not found in CNI_PATH [{}]; install it there",
                    dirs.join(", ")
                ))
            })
    }

    /// ADD: the delegate's result. Empty output is a decode error (an IPAM ADD must answer).
    pub fn add(&self, stdin: &[u8]) -> Result<CniResult, CniError> {
        let stdout = self.exec(&[], Command::Add, stdin)?;
        if stdout.iter().all(u8::is_ascii_whitespace) {
            return Err(CniError::decode(format!(
                "delegate plugin {:?} returned no result for ADD",
                self.plugin_type
            )));
        }
        serde_json::from_slice(&stdout).map_err(|e| {
            CniError::decode(format!(
                "delegate plugin {:?} returned an invalid result: {e}",
                self.plugin_type
            ))
        })
    }

    /// DEL, CHECK, STATUS or GC: success unless the delegate fails; its output is ignored.
    pub fn call(&self, command: Command, stdin: &[u8]) -> Result<(), CniError> {
        self.exec(&[], command, stdin).map(drop)
    }

    /// A step another plugin binary performs for this one (`args` name it, e.g. the NAD calls
    /// galactic-bgp makes for the masters): same environment and stdin as a delegate call,
    /// success unless it fails, its error passed through unchanged.
    pub fn call_step(&self, args: &[&str], command: Command, stdin: &[u8]) -> Result<(), CniError> {
        self.exec(args, command, stdin).map(drop)
    }

    /// Runs the delegate once and returns its stdout when it exits 0.
    fn exec(&self, args: &[&str], command: Command, stdin: &[u8]) -> Result<Vec<u8>, CniError> {
        let binary = self.find()?;
        let output = run_bounded(&binary, args, command, stdin, self.timeout)?;
        // Forward the delegate's diagnostics to our stderr (C77); the runtime keeps it.
        let _ = std::io::stderr().write_all(&output.stderr);
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(delegate_error(self.plugin_type, command, &output))
    }
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Spawns `binary`, feeds `stdin`, and waits at most `timeout` (then kills it: code 11).
fn run_bounded(
    binary: &Path,
    args: &[&str],
    command: Command,
    stdin: &[u8],
    timeout: Duration,
) -> Result<Output, CniError> {
    let mut child = spawn_retrying(binary, args, command)?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let input = child.stdin.take();
    let bytes = stdin.to_vec();
    // A writer thread, so a delegate that does not read all its stdin cannot deadlock us.
    let writer = std::thread::spawn(move || {
        if let Some(mut input) = input {
            let _ = input.write_all(&bytes);
        }
    });
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let outcome = match rx.recv_timeout(timeout) {
        Ok(result) => result
            .map_err(|e| CniError::io(format!("waiting for delegate {}: {e}", binary.display()))),
        Err(_) => {
            // The child is not reaped until the waiter returns, so the pid cannot be reused yet.
            let _ = kill(pid, Signal::SIGKILL);
            Err(CniError::try_again_later(format!(
                "delegate {} did not finish {command} within {:?}; it was stopped",
                binary.display(),
                timeout
            )))
        }
    };
    let _ = waiter.join();
    let _ = writer.join();
    outcome
}

fn spawn_retrying(
    binary: &Path,
    args: &[&str],
    command: Command,
) -> Result<std::process::Child, CniError> {
    let mut attempt = 0;
    loop {
        let spawned = Process::new(binary)
            .args(args)
            .env("CNI_COMMAND", command.as_str())
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
            Err(e) => {
                return Err(CniError::io(format!(
                    "cannot run delegate {}: {e}",
                    binary.display()
                )))
            }
        }
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
