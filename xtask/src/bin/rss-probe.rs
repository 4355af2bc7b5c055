//! `rss-probe OUT PROGRAM [ARGS…]`: runs PROGRAM with this process's stdin, stdout, stderr and
//! environment, then writes its peak RSS in KiB to OUT and exits with its status.
//!
//! The peak is the program's own `VmHWM`, read from `/proc/<pid>/status` while the program is
//! stopped at its exit event (ptrace `PTRACE_O_TRACEEXIT`), before its address space is torn down.
//! `wait4`'s `ru_maxrss` cannot be used: Linux charges a child the high-water mark of the process
//! that forked it (exec folds the old address space's peak into the child's), so every program
//! would carry this launcher's own ≈ 1.7 MiB as a floor. Only the program itself is traced, not
//! the processes it starts (an IPAM delegate is measured as its own process).
//!
//! With `RSS_PROBE_SMAPS=DIR` the program's `/proc/<pid>/smaps` at exit is copied to
//! `DIR/<program name>.<pid>`, to see where the resident pages are.

use std::ffi::CString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: rss-probe OUT PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    match run(program, rest) {
        Ok((status, hwm_kib)) => {
            if std::fs::write(out, hwm_kib.to_string()).is_err() {
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

fn cstrings(program: &str, rest: &[String]) -> Result<Vec<CString>, String> {
    std::iter::once(program)
        .chain(rest.iter().map(String::as_str))
        .map(|a| CString::new(a).map_err(|_| format!("argument {a:?} contains NUL")))
        .collect()
}

/// Forks, execs PROGRAM under ptrace and follows it to its exit; returns (exit code, VmHWM KiB).
fn run(program: &str, rest: &[String]) -> Result<(u8, u64), String> {
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

fn wait(pid: libc::pid_t) -> Result<libc::c_int, String> {
    let mut status = 0;
    // SAFETY: `status` outlives the call; `pid` is our child.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    if rc != pid {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    Ok(status)
}

fn resume(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: the tracee is stopped; a failed PTRACE_CONT shows up in the next waitpid.
    unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, signal) };
}

fn follow(pid: libc::pid_t) -> Result<(u8, u64), String> {
    // The first stop is the SIGTRAP of a successful exec (or the child already exited: exec failed).
    let status = wait(pid)?;
    if libc::WIFEXITED(status) {
        return Err("cannot exec".into());
    }
    // SAFETY: the tracee is stopped after exec.
    unsafe {
        libc::ptrace(
            libc::PTRACE_SETOPTIONS,
            pid,
            0,
            libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_EXITKILL,
        )
    };
    resume(pid, 0);
    let mut hwm = 0;
    loop {
        let status = wait(pid)?;
        if libc::WIFEXITED(status) {
            return Ok((u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(1), hwm));
        }
        if libc::WIFSIGNALED(status) {
            return Ok((128u8.saturating_add(libc::WTERMSIG(status) as u8), hwm));
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        if status >> 8 == (libc::SIGTRAP | (libc::PTRACE_EVENT_EXIT << 8)) {
            hwm = read_hwm(pid)?;
            resume(pid, 0);
        } else {
            // A signal meant for the program: deliver it.
            resume(pid, libc::WSTOPSIG(status));
        }
    }
}

fn read_hwm(pid: libc::pid_t) -> Result<u64, String> {
    if let Some(dir) = std::env::var_os("RSS_PROBE_SMAPS") {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let dest = std::path::Path::new(&dir).join(format!("{}.{pid}", name.trim()));
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
