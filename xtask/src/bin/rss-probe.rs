//! `rss-probe OUT PROGRAM [ARGS…]`: runs PROGRAM with this process's stdin, stdout, stderr and
//! environment, then writes the peak RSS of it and of every program it starts to OUT, one
//! `<name> <KiB>` line each (PROGRAM first; the largest peak per name for the others), and exits
//! with PROGRAM's status.
//!
//! A peak is the process's own `VmHWM`, read from `/proc/<pid>/status` while the process is
//! stopped at its exit event (ptrace `PTRACE_O_TRACEEXIT`), before its address space is torn down.
//! `wait4`'s `ru_maxrss` cannot be used: Linux charges a child the high-water mark of the process
//! that forked it (exec folds the old address space's peak into the child's), so every program
//! would carry this launcher's own ≈ 1.7 MiB as a floor, and a delegate its plugin's. Processes
//! that PROGRAM forks (an IPAM delegate, `nft`) are followed too (`PTRACE_O_TRACEFORK`/`VFORK`);
//! threads are not (they share their process's address space).
//!
//! With `RSS_PROBE_SMAPS=DIR` each process's `/proc/<pid>/smaps` at exit is copied to
//! `DIR/<name>.<pid>`, to see where the resident pages are.

use std::ffi::CString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: rss-probe OUT PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    match run(program, rest) {
        Ok((status, peaks)) => {
            let lines: String = peaks.iter().map(|(n, k)| format!("{n} {k}\n")).collect();
            if std::fs::write(out, lines).is_err() {
                return ExitCode::from(125);
            }
            ExitCode::from(status)
        }
        Err(e) => {
            eprintln!("rss-probe: {program}: {e}");
            ExitCode::from(125)
        }
    }
}

/// Peak RSS per program name, PROGRAM first.
type Peaks = Vec<(String, u64)>;

fn cstrings(program: &str, rest: &[String]) -> Result<Vec<CString>, String> {
    std::iter::once(program)
        .chain(rest.iter().map(String::as_str))
        .map(|a| CString::new(a).map_err(|_| format!("argument {a:?} contains NUL")))
        .collect()
}

/// Forks, execs PROGRAM under ptrace and follows it and its children to PROGRAM's exit.
fn run(program: &str, rest: &[String]) -> Result<(u8, Peaks), String> {
    let argv = cstrings(program, rest)?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: the child only calls async-signal-safe functions (ptrace, execvp, _exit) before exec.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above; `ptrs` is NUL-terminated and its strings outlive the call.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    follow(pid)
}

/// Waits for any tracee; returns its pid and wait status.
fn wait_any() -> Result<(libc::pid_t, libc::c_int), String> {
    let mut status = 0;
    // SAFETY: `status` outlives the call.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
    if pid < 0 {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    Ok((pid, status))
}

fn resume(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: the tracee is stopped; a failed PTRACE_CONT shows up in the next waitpid.
    unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, signal) };
}

fn follow(root: libc::pid_t) -> Result<(u8, Peaks), String> {
    // The first stop is the SIGTRAP of a successful exec (or the child already exited: exec failed).
    let (_, status) = wait_any()?;
    if libc::WIFEXITED(status) {
        return Err("cannot exec".into());
    }
    let options = libc::PTRACE_O_TRACEEXIT
        | libc::PTRACE_O_EXITKILL
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACEEXEC;
    // SAFETY: the tracee is stopped after exec; children inherit the options.
    unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, root, 0, options) };
    resume(root, 0);
    let mut root_peak = (String::new(), 0);
    let mut others: std::collections::BTreeMap<String, u64> = Default::default();
    let mut known = std::collections::HashSet::from([root]);
    loop {
        let (pid, status) = wait_any()?;
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            if pid != root {
                continue;
            }
            let code = if libc::WIFEXITED(status) {
                u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(1)
            } else {
                128u8.saturating_add(u8::try_from(libc::WTERMSIG(status)).unwrap_or(0))
            };
            let mut peaks = vec![root_peak];
            peaks.extend(others);
            return Ok((code, peaks));
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let event = status >> 16;
        let signal = libc::WSTOPSIG(status);
        if event == libc::PTRACE_EVENT_EXIT {
            let peak = read_hwm(pid)?;
            if pid == root {
                root_peak = (name(root), peak);
            } else {
                let slot = others.entry(name(pid)).or_default();
                *slot = (*slot).max(peak);
            }
            resume(pid, 0);
        } else if event != 0 || (signal == libc::SIGSTOP && known.insert(pid)) {
            // A fork/vfork/exec event, or the initial stop of a newly followed child.
            resume(pid, 0);
        } else {
            // A signal meant for the program: deliver it.
            resume(pid, signal);
        }
    }
}

/// The program a process runs (its executable's file name).
fn name(pid: libc::pid_t) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("pid{pid}"))
}

fn read_hwm(pid: libc::pid_t) -> Result<u64, String> {
    if let Some(dir) = std::env::var_os("RSS_PROBE_SMAPS") {
        let dest = std::path::Path::new(&dir).join(format!("{}.{pid}", name(pid)));
        let smaps = std::fs::read(format!("/proc/{pid}/smaps")).map_err(|e| e.to_string())?;
        std::fs::write(dest, smaps).map_err(|e| e.to_string())?;
    }
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM in /proc/<pid>/status".into())
}
