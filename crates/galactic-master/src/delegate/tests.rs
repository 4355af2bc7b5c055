use super::*;
use galactic_core::cni::ErrorCode;
use std::os::unix::fs::PermissionsExt;

/// Writes an executable shell script named `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn delegate<'a>(name: &'a str, path: &'a [PathBuf]) -> Delegate<'a> {
    Delegate {
        plugin_type: name,
        search_path: path,
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn add_returns_the_delegates_result_and_passes_stdin_and_env_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    script(
        dir.path(),
        "fake-ipam",
        &format!(
            "cat > {rec}.stdin; echo \"$CNI_COMMAND $PATH\" > {rec}.env\n\
             echo '{{\"cniVersion\":\"1.0.0\",\"ips\":[{{\"address\":\"10.0.0.2/32\"}}]}}'",
            rec = record.display()
        ),
    );
    let path = vec![dir.path().join("missing-dir"), dir.path().to_path_buf()];
    // Odd spacing and key order must survive: the delegate sees our exact bytes (C76).
    let stdin = b"{ \"cniVersion\":\"1.0.0\",  \"name\":\"n\" ,\"type\":\"x\",\"ipam\":{\"type\":\"fake-ipam\"}}";
    let result = delegate("fake-ipam", &path).add(stdin).unwrap();
    assert_eq!(result.ips[0].address.to_string(), "10.0.0.2/32");
    assert_eq!(
        std::fs::read(record.with_extension("stdin")).unwrap(),
        stdin
    );
    assert_eq!(
        std::fs::read_to_string(record.with_extension("env"))
            .unwrap()
            .trim(),
        format!("ADD {}", std::env::var("PATH").unwrap()),
        "CNI_COMMAND replaced, the rest of the environment inherited"
    );
}

#[test]
fn the_delegates_error_code_reaches_the_caller_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "busy-ipam",
        r#"echo '{"cniVersion":"1.0.0","code":11,"msg":"store busy","details":"lock"}'; exit 1"#,
    );
    let path = vec![dir.path().to_path_buf()];
    for command in [
        Command::Add,
        Command::Del,
        Command::Check,
        Command::Status,
        Command::Gc,
    ] {
        let err = match command {
            Command::Add => delegate("busy-ipam", &path)
                .add(b"{}")
                .unwrap_err()
                .to_cni(),
            other => delegate("busy-ipam", &path)
                .call(other, b"{}")
                .unwrap_err()
                .to_cni(),
        };
        assert_eq!(err.code, Code::TRY_AGAIN_LATER, "{command}");
        assert_eq!(err.msg, "store busy");
        assert_eq!(err.details.as_deref(), Some("lock"));
    }
}

#[test]
fn empty_output_is_success_for_del_and_check_but_not_add() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "quiet", "cat >/dev/null");
    let path = vec![dir.path().to_path_buf()];
    delegate("quiet", &path).call(Command::Del, b"{}").unwrap();
    delegate("quiet", &path)
        .call(Command::Check, b"{}")
        .unwrap();
    assert_eq!(
        delegate("quiet", &path).add(b"{}").unwrap_err().code(),
        Code::DECODE
    );
}

#[test]
fn a_missing_or_unsafe_delegate_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("not-exec"), "x").unwrap();
    let path = vec![dir.path().to_path_buf()];
    let err = delegate("galactic-ipam", &path)
        .add(b"{}")
        .unwrap_err()
        .to_cni();
    assert_eq!(err.code, Code::INVALID_CONFIG);
    assert!(
        err.msg.contains("galactic-ipam") && err.msg.contains("CNI_PATH"),
        "{}",
        err.msg
    );
    assert!(
        delegate("not-exec", &path).find().is_err(),
        "non-executable files are skipped"
    );
    assert!(delegate("../bin/sh", &path)
        .find()
        .unwrap_err()
        .to_string()
        .contains("plain"));
}

#[test]
fn a_crash_without_cni_output_carries_stderr() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "crashy", "echo 'segfault-ish' >&2; exit 3");
    let path = vec![dir.path().to_path_buf()];
    let err = delegate("crashy", &path)
        .call(Command::Del, b"{}")
        .unwrap_err()
        .to_cni();
    assert_eq!(err.code, Code::INTERNAL);
    assert!(err.msg.contains("status 3"));
    assert_eq!(err.details.as_deref(), Some("segfault-ish"));
}

#[test]
fn a_hung_delegate_is_stopped_with_try_again_later() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "hang", "exec sleep 30");
    let path = vec![dir.path().to_path_buf()];
    let d = Delegate {
        plugin_type: "hang",
        search_path: &path,
        timeout: Duration::from_millis(300),
    };
    let started = std::time::Instant::now();
    let err = d.call(Command::Check, b"{}").unwrap_err().to_cni();
    assert_eq!(err.code, Code::TRY_AGAIN_LATER);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "killed, not waited for"
    );
}

#[test]
fn a_timeout_kills_what_the_delegate_started_too() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // The delegate starts a grandchild that keeps our stdout open, then hangs.
    script(
        dir.path(),
        "forker",
        &format!("sleep 60 & echo $! > {}\nsleep 60", pids.display()),
    );
    let path = vec![dir.path().to_path_buf()];
    let d = Delegate {
        plugin_type: "forker",
        search_path: &path,
        timeout: Duration::from_millis(500),
    };
    let started = std::time::Instant::now();
    let err = d.call(Command::Add, b"{}").unwrap_err().to_cni();
    assert_eq!(err.code, Code::TRY_AGAIN_LATER);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not waited for"
    );
    let grandchild = std::fs::read_to_string(&pids).unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{}/stat", grandchild.trim()))
            .is_ok_and(|stat| !stat.contains(") Z "))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(),
        "the delegate's child {grandchild} survived the timeout"
    );
}

#[test]
fn a_delegate_knows_it_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("depth");
    script(
        dir.path(),
        "depth-ipam",
        &format!(
            "echo \"${DEPTH_ENV}\" > {}\necho '{{\"cniVersion\":\"1.0.0\",\"ips\":[{{\"address\":\"10.0.0.2/32\"}}]}}'",
            seen.display()
        ),
    );
    let path = vec![dir.path().to_path_buf()];
    delegate("depth-ipam", &path).add(b"{}").unwrap();
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "1");
}

#[test]
fn a_started_delegate_runs_while_the_caller_works_and_its_result_comes_after() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    // The delegate answers only once the caller has done its own work after start(): if start
    // waited for the delegate, the handshake could never happen and the call would time out.
    script(
        dir.path(),
        "slow-ipam",
        &format!(
            "while [ ! -e {go} ]; do sleep 0.01; done\n\
             echo '{{\"cniVersion\":\"1.0.0\",\"ips\":[{{\"address\":\"10.0.0.9/32\"}}]}}'",
            go = go.display()
        ),
    );
    let path = vec![dir.path().to_path_buf()];
    let mut d = delegate("slow-ipam", &path);
    d.timeout = Duration::from_secs(5);
    let running = d.start(Command::Add, b"{}").unwrap();
    std::fs::write(&go, "").unwrap();
    let result = running.result().unwrap();
    assert_eq!(result.ips[0].address.to_string(), "10.0.0.9/32");
}

#[test]
fn a_started_delegate_that_is_dropped_is_still_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("done");
    script(
        dir.path(),
        "late-ipam",
        &format!("sleep 0.3; echo finished > {}", done.display()),
    );
    let path = vec![dir.path().to_path_buf()];
    let running = delegate("late-ipam", &path)
        .start(Command::Del, b"{}")
        .unwrap();
    drop(running);
    assert!(
        done.exists(),
        "dropping a running delegate waits for it: nothing it does comes after its caller moved on"
    );
}

#[test]
fn a_held_delegate_acts_only_on_what_it_is_fed_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let started = dir.path().join("started");
    // It records that it started, then what it read: nothing may be read before feed().
    script(
        dir.path(),
        "held-ipam",
        &format!(
            "touch {started}\ncat > {seen}",
            started = started.display(),
            seen = seen.display()
        ),
    );
    let path = vec![dir.path().to_path_buf()];
    let held = delegate("held-ipam", &path)
        .start_held(Command::Del)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !started.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(started.exists(), "the held delegate starts up at once");
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        std::fs::read(&seen).unwrap_or_default().is_empty(),
        "a held delegate has read nothing before it is fed"
    );
    held.feed(b"{\"released\":true}").wait().unwrap();
    assert_eq!(std::fs::read(&seen).unwrap(), b"{\"released\":true}");
}

#[test]
fn a_held_delegate_dropped_unfed_reads_the_end_of_its_stdin_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    script(
        dir.path(),
        "unfed-ipam",
        &format!(
            "cat > {}; test -s {} || exit 1",
            seen.display(),
            seen.display()
        ),
    );
    let path = vec![dir.path().to_path_buf()];
    let mut d = delegate("unfed-ipam", &path);
    d.timeout = Duration::from_secs(20);
    let held = d.start_held(Command::Del).unwrap();
    let t = Instant::now();
    drop(held);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "an unfed delegate is not left waiting for the bound"
    );
    assert_eq!(std::fs::read(&seen).unwrap(), b"");
}

#[test]
fn a_delegate_that_cannot_be_executed_is_a_spawn_error_with_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("garbled-ipam");
    // Executable, but its interpreter is missing: found, then refused by exec (ENOENT).
    std::fs::write(&binary, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = vec![dir.path().to_path_buf()];
    let err = delegate("garbled-ipam", &path)
        .add(b"{}")
        .expect_err("nothing ran");
    assert!(matches!(err, DelegateError::Spawn { .. }), "{err:?}");
    assert_eq!(err.code(), Code::IO);
    assert!(
        err.to_string().contains("garbled-ipam"),
        "names the binary: {err}"
    );
}
