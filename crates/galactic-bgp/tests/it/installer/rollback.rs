//! `install.sh rollback` and the Kata DAN dir.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use super::*;

impl Fixture {
    fn rollback(&self) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg(script())
            .arg("rollback")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOST_ROOT", self.dir.path().join("host"))
            .env("IMAGE_BIN", self.dir.path().join("image-bin"));
        cmd.output().unwrap()
    }

    /// A stand-in galactic-ipam that records its arguments and exits with `status`.
    fn recording_ipam(&self, status: u8) -> PathBuf {
        let calls = self.dir.path().join("ipam-calls");
        std::fs::write(
            self.dir.path().join("image-bin/galactic-ipam"),
            format!(
                "#!/bin/sh\necho \"$@\" >>{}\necho '{{\"written\": 0}}'\nexit {status}\n",
                calls.display()
            ),
        )
        .unwrap();
        calls
    }
}

#[test]
fn rollback_writes_the_markers_then_the_go_conflist_with_the_current_settings() {
    let fx = Fixture::new();
    let go = fx.plant_go_conflist("debug", "2001:db8:ff01:9:e001::", "eth1");
    // Installed, then the DaemonSet changed a setting after the switch.
    assert!(fx.run(&[]).status.success());
    assert!(fx
        .run(&[("GALACTIC_CNI_EBPF_INTERFACES", "eth7")])
        .status
        .success());
    assert!(!go.exists());

    let calls = fx.recording_ipam(0);
    let out = fx.rollback();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        format!(
            "write-markers --data-dir {} --legacy-dir {}\n",
            fx.host("var/lib/galactic/ipam").display(),
            fx.host("var/lib/cni/galactic-ipam").display()
        )
    );
    let restored = std::fs::read_to_string(&go).unwrap();
    assert_eq!(
        restored,
        std::fs::read_to_string(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap()
    );
    for setting in [
        "\"ebpf_interfaces\": \"eth7\"",
        "\"nat66_shard_sids\": \"2001:db8:ff01:9:e001::\"",
        "\"egress_shard_sids\": \"2001:db8:ff01:9:e001::\"",
        "\"log_level\": \"debug\"",
        "\"node_name\": \"node-a\"",
    ] {
        assert!(restored.contains(setting), "{setting}: {restored}");
    }
    assert!(fx.rollback().status.success(), "a second run is harmless");
}

#[test]
fn a_rollback_whose_markers_are_incomplete_fails_and_leaves_the_conf_dir_alone() {
    let fx = Fixture::new();
    assert!(fx.run(&[]).status.success());
    fx.recording_ipam(1);
    let out = fx.rollback();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("do not start the Go chain on this node"),
        "{err}"
    );
    assert!(!fx.host("etc/cni/net.d/10-galactic.conflist").exists());
    // A node this installer never ran on has nothing to roll back.
    let never = Fixture::new();
    never.recording_ipam(0);
    let out = never.rollback();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("never installed"));
}

/// `dan_dir` (Kata DAN files, upstream's key) lands in node.json and, as upstream's installer
/// writes it, in the datapath's host conflist: from `GALACTIC_CNI_DAN_DIR`, else from the Go
/// conflist; unset, the plugins use runtime-rs's directory. The Go shim's directory and a
/// relative path are refused before anything is written.
#[test]
fn the_kata_dan_dir_reaches_the_node_config_and_the_datapath_conflist() {
    let datapath_dan_dir = |fx: &Fixture| {
        let text =
            std::fs::read_to_string(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap();
        let conflist: serde_json::Value = serde_json::from_str(&text).unwrap();
        conflist["plugins"][0]["dan_dir"].clone()
    };
    let fx = Fixture::new();
    let out = fx.run(&[("GALACTIC_CNI_DAN_DIR", "/run/kata-dans")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(node_config(&fx).dan_dir, Path::new("/run/kata-dans"));
    assert_eq!(datapath_dan_dir(&fx), "/run/kata-dans");

    let fx = Fixture::new();
    assert!(fx.run(&[]).status.success());
    assert_eq!(
        node_config(&fx).dan_dir,
        Path::new("/run/kata-containers/dans-rs")
    );
    assert_eq!(
        datapath_dan_dir(&fx),
        "",
        "upstream writes an unset one empty"
    );

    let fx = Fixture::new();
    let go = fx.plant_go_conflist("info", "", "");
    let text = std::fs::read_to_string(&go).unwrap().replace(
        r#""ebpf_interfaces": """#,
        "\"ebpf_interfaces\": \"\",\n      \"dan_dir\": \"/run/go-dans\"",
    );
    std::fs::write(&go, text).unwrap();
    assert!(fx.run(&[]).status.success());
    assert_eq!(node_config(&fx).dan_dir, Path::new("/run/go-dans"));

    for bad in ["/run/kata-containers/dans", "dans"] {
        let fx = Fixture::new();
        let out = fx.run(&[("GALACTIC_CNI_DAN_DIR", bad)]);
        assert!(!out.status.success(), "{bad} must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("GALACTIC_CNI_DAN_DIR"), "{bad}: {stderr}");
        assert!(
            !fx.host("opt").exists() && !fx.host("etc").exists(),
            "{bad}: nothing staged"
        );
    }
}
