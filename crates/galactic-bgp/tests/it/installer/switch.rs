//! The switch from the Go chain: its binaries replaced, the annotations exported once, a node
//! name that is not this node's refused.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn the_go_binaries_are_replaced_and_aliased_over_in_one_switch() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    let out = fx.run(&[]);
    assert!(out.status.success(), "{out:?}");
    let bin = fx.host("opt/cni/bin");
    let image = |name: &str| std::fs::read(fx.dir.path().join("image-bin").join(name)).unwrap();
    for (name, ours) in [
        ("galactic-cni", "galactic-cni"),
        ("galactic-tap-cni", "galactic-tap-cni"),
        ("galactic-ipam", "galactic-ipam"),
        ("galactic-route", "galactic-route"),
        ("galactic-bgp", "galactic-bgp"),
        ("galactic-veth", "galactic-cni"),
        ("galactic-tap", "galactic-tap-cni"),
    ] {
        assert_eq!(
            std::fs::read(bin.join(name)).unwrap(),
            image(ours),
            "{name}"
        );
        // Every name goes through the one `current` link: one rename switches them all.
        assert_eq!(
            std::fs::read_link(bin.join(name)).unwrap(),
            Path::new(".galactic/current").join(name),
            "{name}"
        );
    }
    assert!(std::fs::symlink_metadata(bin.join(".galactic/current"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(bin.join("host-device")).unwrap(),
        "#!/bin/sh\necho go-host-device\n",
        "not ours to replace"
    );
    let sets: Vec<_> = std::fs::read_dir(bin.join(".galactic"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(sets.len(), 2, "current and one set: {sets:?}");
    let again = fx.run(&[]);
    assert!(
        again.status.success() && again.stdout.is_empty(),
        "{again:?}"
    );

    // A new image switches every name at once, and the old set goes.
    let new_bgp = fx.dir.path().join("image-bin/galactic-bgp");
    std::fs::write(&new_bgp, "#!/bin/sh\necho galactic-bgp v2\n").unwrap();
    let before = std::fs::read_link(bin.join(".galactic/current")).unwrap();
    assert!(fx.run(&[]).status.success());
    assert_ne!(
        std::fs::read_link(bin.join(".galactic/current")).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(bin.join("galactic-bgp")).unwrap(),
        "#!/bin/sh\necho galactic-bgp v2\n"
    );
    assert!(!bin.join(".galactic").join(before).exists());

    // Once no NAD uses the upstream names: ALIASES=false removes them.
    assert!(fx.run(&[("ALIASES", "false")]).status.success());
    assert!(std::fs::symlink_metadata(bin.join("galactic-veth")).is_err());
    assert!(std::fs::symlink_metadata(bin.join("galactic-tap")).is_err());
    assert!(bin.join("galactic-cni").is_file());
}

/// An image `galactic-bgp` that records its `export-annotations` call (the kubeconfig it was
/// given, whether the Go binaries were still in place) and writes the export.
fn recording_bgp(fx: &Fixture) {
    let log = fx.dir.path().join("export-calls");
    let ipam = fx.host("opt/cni/bin/galactic-ipam");
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        format!(
            "#!/bin/sh\n[ \"$1\" = export-annotations ] || exit 0\n\
             {{ echo \"args $3 $4\"; grep -E 'server|certificate-authority|token' \"$2\"; \
             echo \"ipam then: $(sh {ipam})\"; }} >>{log}\n\
             printf '%s' '{{\"kind\":\"List\",\"items\":[]}}' >\"$4\"\n",
            ipam = ipam.display(),
            log = log.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_node_the_go_chain_served_exports_the_annotations_once_before_the_switch() {
    let fx = Fixture::new();
    recording_bgp(&fx);
    plant_go_binaries(&fx);
    let out = fx.run(&[("GALACTIC_NAMESPACE", "galactic-system")]);
    assert!(out.status.success(), "{out:?}");
    let export = fx.host("var/lib/galactic/ipam/legacy-annotations.json");
    assert_eq!(
        std::fs::read_to_string(&export).unwrap(),
        r#"{"kind":"List","items":[]}"#
    );
    let calls = std::fs::read_to_string(fx.dir.path().join("export-calls")).unwrap();
    let sa = fx.dir.path().join("sa");
    for line in [
        format!("args galactic-system {}", export.display()),
        "server: https://[fd00:10::1]:6443".to_owned(),
        format!("certificate-authority: {}/ca.crt", sa.display()),
        "token: eyJhbGciOi.first-token_1".to_owned(),
        // Exported while the Go IPAM still served the node: the new one's first write imports it.
        "ipam then: go-galactic-ipam".to_owned(),
    ] {
        assert!(calls.contains(&line), "{line}: {calls}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains(&export.display().to_string()));
    // Once: a second run (the Go layout is gone, the export kept) exports nothing.
    let again = fx.run(&[("GALACTIC_NAMESPACE", "galactic-system")]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        std::fs::read_to_string(fx.dir.path().join("export-calls"))
            .unwrap()
            .matches("args ")
            .count(),
        1
    );
}

#[test]
fn a_failed_export_fails_the_install_before_the_switch_and_other_nodes_export_nothing() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        "#!/bin/sh\n[ \"$1\" = export-annotations ] && { echo 'connection refused' >&2; exit 1; }\nexit 0\n",
    )
    .unwrap();
    let out = fx.run(&[]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("could not export the BGPAdvertisement annotations"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.host("opt/cni/bin/galactic-ipam")).unwrap(),
        "#!/bin/sh\necho go-galactic-ipam\n",
        "the Go chain keeps serving until the export exists"
    );
    // A node without the Go chain, or with the local publisher: no export is attempted.
    let fresh = Fixture::new();
    recording_bgp(&fresh);
    assert!(fresh.run(&[]).status.success());
    let local = Fixture::new();
    recording_bgp(&local);
    plant_go_binaries(&local);
    assert!(local
        .run(&[("GALACTIC_PUBLISHER", "local")])
        .status
        .success());
    for fx in [&fresh, &local] {
        assert!(!fx.dir.path().join("export-calls").exists());
    }
}

#[test]
fn a_node_name_that_names_another_node_fails_the_install_before_anything_is_staged() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    let go = fx.plant_go_conflist("debug", "", "eth1");
    let calls = fx.dir.path().join("check-calls");
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        format!(
            "#!/bin/sh\n[ \"$1\" = check-node ] || exit 0\necho \"$3\" >>{calls}\n\
             echo 'node identity check failed: Node node-a has InternalIP 192.0.2.7' >&2\nexit 1\n",
            calls = calls.display()
        ),
    )
    .unwrap();
    let out = fx.run(&[]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "node-a\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("192.0.2.7"), "the check's own reason: {err}");
    assert!(
        err.contains("NODE_NAME node-a does not name this node"),
        "{err}"
    );
    assert!(!fx.host("etc/galactic").exists(), "no node config");
    assert!(go.exists(), "the Go conflist stays");
    assert_eq!(
        std::fs::read_to_string(fx.host("opt/cni/bin/galactic-ipam")).unwrap(),
        "#!/bin/sh\necho go-galactic-ipam\n",
        "the Go chain keeps serving"
    );
    let state: Vec<_> = std::fs::read_dir(fx.host("var/lib/galactic"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        state.is_empty(),
        "the installer's kubeconfig is removed: {state:?}"
    );
    // The local publisher has no API server to ask: no check.
    let local = Fixture::new();
    std::fs::copy(
        fx.dir.path().join("image-bin/galactic-bgp"),
        local.dir.path().join("image-bin/galactic-bgp"),
    )
    .unwrap();
    assert!(local
        .run(&[("GALACTIC_PUBLISHER", "local")])
        .status
        .success());
}
