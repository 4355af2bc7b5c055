// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use super::*;

fn manifest_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/daemonset.yaml")
}

fn text() -> String {
    std::fs::read_to_string(manifest_path()).unwrap()
}

fn kubelet() -> Kubelet {
    Kubelet {
        node_name: "node-t".to_owned(),
        host_root: PathBuf::from("/sim/host"),
        service_account: PathBuf::from("/sim/sa"),
        service_host: "127.0.0.1".to_owned(),
        service_port: 6443,
    }
}

fn has(flags: &[String], flag: &str) -> bool {
    flags.iter().any(|f| f == flag)
}

#[test]
fn the_init_container_runs_as_the_manifest_says() {
    let ds = DaemonSet::read(&manifest_path()).unwrap();
    let c = ds.container("install-cni", &kubelet()).unwrap();
    assert_eq!(c.image, "galactic-cni:dev");
    assert_eq!(c.args, ["install"]);
    for flag in [
        "--network=host",
        "--user=0",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--read-only",
        "--read-only-tmpfs=false",
        "--memory=67108864",
        "--env=NODE_NAME=node-t",
        "--env=GALACTIC_NAMESPACE=galactic-system",
        "--env=GALACTIC_PUBLISHER=kubernetes",
        "--env=GALACTIC_CNI_EGRESS_SHARD_SIDS=",
        "--volume=/sim/host/opt/cni/bin:/host/opt/cni/bin:rbind",
        "--volume=/sim/host/var/log/galactic:/host/var/log/galactic:rbind",
        "--volume=/sim/sa:/var/run/secrets/kubernetes.io/serviceaccount:rbind,ro",
        // The Go chain's IPAM markers, read only.
        "--volume=/sim/host/var/lib/cni:/host/var/lib/cni:rbind,ro",
        "--env=KUBERNETES_SERVICE_HOST=127.0.0.1",
        "--env=KUBERNETES_SERVICE_PORT=6443",
    ] {
        assert!(has(&c.flags, flag), "{flag} in {:?}", c.flags);
    }
    assert_eq!(c.create_dirs.len(), 6, "{:?}", c.create_dirs);
    assert!(c
        .create_dirs
        .contains(&PathBuf::from("/sim/host/etc/cni/net.d")));
}

#[test]
fn the_refresh_container_shares_the_environment_through_the_anchor() {
    let ds = DaemonSet::parse(&text(), "daemonset.yaml").unwrap();
    let c = ds.container("refresh-credentials", &kubelet()).unwrap();
    assert_eq!(c.args, ["refresh"]);
    assert!(has(&c.flags, "--env=NODE_NAME=node-t"), "{:?}", c.flags);
    assert!(has(&c.flags, "--memory=33554432"));
    let volumes: Vec<&String> = c
        .flags
        .iter()
        .filter(|f| f.starts_with("--volume"))
        .collect();
    assert_eq!(
        volumes.len(),
        2,
        "the state dir and the service account: {volumes:?}"
    );
}

/// Every change below is one the tier does not apply: it must refuse, naming the field.
#[test]
fn a_field_the_tier_does_not_apply_fails_naming_it() {
    let cases = [
        (
            "readOnlyRootFilesystem: true\n",
            "readOnlyRootFilesystem: true\n            privileged: true\n",
            "privileged",
        ),
        (
            "- {name: cni-bin, mountPath: /host/opt/cni/bin}",
            "- {name: cni-bin, mountPath: /host/opt/cni/bin, subPath: x}",
            "subPath",
        ),
        (
            "limits: {memory: 64Mi}",
            "limits: {memory: 64Mi, hugepages-2Mi: 1Mi}",
            "hugepages-2Mi",
        ),
        (
            "args: [install]",
            "args: [install]\n          workingDir: /",
            "workingDir",
        ),
        (
            "hostNetwork: true",
            "hostNetwork: true\n      hostPID: true",
            "hostPID",
        ),
        (
            "valueFrom: {fieldRef: {fieldPath: spec.nodeName}}",
            "valueFrom: {fieldRef: {fieldPath: status.hostIP}}",
            "status.hostIP",
        ),
        (
            "hostPath: {path: /opt/cni/bin, type: DirectoryOrCreate}",
            "hostPath: {path: /opt/cni/bin, type: Socket}",
            "Socket",
        ),
    ];
    for (from, to, field) in cases {
        let original = text();
        assert!(original.contains(from), "{from}");
        let edited = original.replacen(from, to, 1);
        let outcome = DaemonSet::parse(&edited, "edited")
            .and_then(|ds| ds.container("install-cni", &kubelet()));
        let err = outcome.expect_err(field).to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
}

#[test]
fn quantities_as_the_api_server_reads_them() {
    assert_eq!(quantity(&Value::from("64Mi"), "m").unwrap(), 64 << 20);
    assert_eq!(quantity(&Value::from("1G"), "m").unwrap(), 1_000_000_000);
    assert_eq!(quantity(&Value::from(512), "m").unwrap(), 512);
    assert!(quantity(&Value::from("1.5Gi"), "m").is_err());
    assert_eq!(cpus(&Value::from("250m"), "c").unwrap(), "0.250");
    assert_eq!(cpus(&Value::from(2), "c").unwrap(), "2.000");
}
