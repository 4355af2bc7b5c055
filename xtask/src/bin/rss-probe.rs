//! `rss-probe OUT PROGRAM [ARGS…]`: runs PROGRAM with this process's stdin, stdout, stderr and
//! environment, then writes its peak RSS in KiB to OUT and exits with its status.
//!
//! Linux charges a child the resident size of the process that forked it (`exec` records the old
//! address space's high-water mark), so a peak RSS read by a large parent (the bench itself) is
//! really the parent's. This launcher is small, so what it reports is the program's own peak, with
//! the same floor for every program measured.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: rss-probe OUT PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let child = match Command::new(program).args(rest).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("rss-probe: cannot run {program}: {e}");
            return ExitCode::from(127);
        }
    };
    let Ok(pid) = i32::try_from(child.id()) else {
        return ExitCode::from(125);
    };
    let mut status = 0;
    // SAFETY: rusage is plain data for which all-zero is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` outlive the call; the child has not been reaped.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        return ExitCode::from(125);
    }
    if std::fs::write(out, usage.ru_maxrss.to_string()).is_err() {
        return ExitCode::from(125);
    }
    let status = std::process::ExitStatus::from_raw(status);
    ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1))
}
