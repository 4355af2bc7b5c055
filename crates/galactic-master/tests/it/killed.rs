//! A master killed while its IPAM delegate runs: the runtime's recovery (DEL, or GC) comes after
//! the kill, so nothing the delegate would do afterwards may happen. The delegate runs in a process
//! group of its own (for its timeout), which a kill of the master's group does not reach; it must
//! die with the master instead.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{Host, Pod};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn cni() -> &'static Path {
    galactic_testkit::plugin_binary("galactic-cni")
}

#[test]
fn a_delegate_dies_with_the_master_that_started_it() {
    galactic_testkit::privileged!();
    let host = Host::new("hkill", json!({"routing_domain": "auto"}), &[]);
    let (started, finished) = (host.path("started"), host.path("finished"));
    // An IPAM plugin that is slow to allocate: it would record its allocation after 2 s.
    let script = host.bin_dir.join("slow-ipam");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch {}\nsleep 2\ntouch {}\n",
            started.display(),
            finished.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = json!({"cniVersion": "1.1.0", "name": "killed", "type": "galactic-cni",
        "vpc": "1", "vpcattachment": "1", "ipam": {"type": "slow-ipam"}});
    let pod = Pod::new("hkill");
    let master = host
        .invocation(cni(), "ADD", &pod)
        .stdin(conf.to_string())
        .start()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the delegate never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // As a runtime's timeout does: the plugin's process only.
    master.kill(false);
    assert!(master.wait().unwrap().killed());
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !finished.exists(),
        "the delegate of a killed master went on after the kill"
    );
}
