//! The `galactic-cni` DaemonSet: what a node needs from it (decision 0060, docs/ebpf.md "The
//! datapath container"), checked so an edit cannot quietly drop it:
//!
//! - placement as upstream: compute nodes only (`galactic.datumapis.com/node In [compute]`), never
//!   the control plane, every taint tolerated;
//! - `hostNetwork` (the datapath attaches to the uplinks and serves its probes on the node);
//! - the installer mounts what it writes (CNI bin dir, CNI conf dir, node config, state), the Go
//!   IPAM markers it reads (`/var/lib/cni`, read-only), and
//!   carries every upstream installer setting under its upstream name;
//! - the `datapath` container: the host's bpffs at `/sys/fs/bpf` (`hostPath` type `Directory`),
//!   its host conflist's own directory (`/etc/galactic/datapath`) writable, since upstream's
//!   newest `run` rewrites `ebpf_interfaces` there by rename, capabilities `BPF`, `NET_ADMIN`
//!   and `PERFMON` and no others, its gRPC health probes, the tap RA records writable at their host path (`/var/lib/cni/ra`);
//! - one writer of that conflist at a time: install-cni (an init container, done before any
//!   container of the pod starts) and then the datapath; no other container may write there;
//! - no container is privileged, escalates privileges or adds a capability beyond that.

use serde_json::Value;

/// Upstream installer settings (its environment names) the installer must be given.
pub const UPSTREAM_SETTINGS: [&str; 5] = [
    "NODE_NAME",
    "GALACTIC_CNI_LOG_LEVEL",
    "GALACTIC_CNI_EGRESS_SHARD_SIDS",
    "GALACTIC_CNI_NAT64_PREFIX",
    "GALACTIC_CNI_EBPF_INTERFACES",
];
/// The capabilities of the datapath container, exactly.
const DATAPATH_CAPS: [&str; 3] = ["BPF", "NET_ADMIN", "PERFMON"];
/// The datapath's host conflist directory on the host.
const DATAPATH_CONF_DIR: &str = "/etc/galactic/datapath";
/// Where the installer writes on the host.
const INSTALL_MOUNTS: [&str; 4] = [
    "/host/opt/cni/bin",
    "/host/etc/cni/net.d",
    "/host/etc/galactic",
    "/host/var/lib/galactic",
];
/// What the installer only reads on the host: the Go chain's IPAM markers, the sign of a node the
/// Go chain served even after its binaries and conflist are gone.
const INSTALL_READS: [&str; 1] = ["/host/var/lib/cni"];

/// Whether `doc` is the DaemonSet this lint is about.
pub fn is_ours(doc: &Value) -> bool {
    doc["kind"] == "DaemonSet" && doc["metadata"]["name"] == "galactic-cni"
}

/// Every problem of the DaemonSet `doc`; empty when it holds.
pub fn lint(doc: &Value) -> Vec<String> {
    let pod = &doc["spec"]["template"]["spec"];
    let mut problems = Vec::new();
    if pod["hostNetwork"] != true {
        problems.push("hostNetwork must be true (the datapath attaches to the uplinks)".into());
    }
    problems.extend(placement(pod));
    for container in containers(pod) {
        problems.extend(least_privilege(container));
        problems.extend(datapath_conf_writer(pod, container));
    }
    match container(pod, "install-cni") {
        Some(install) => problems.extend(installer(install)),
        None => problems.push("no install-cni init container".into()),
    }
    match container(pod, "datapath") {
        Some(datapath) => problems.extend(datapath_container(pod, datapath)),
        None => problems.push("no datapath container (decision 0060)".into()),
    }
    problems
}

fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers"]
        .into_iter()
        .flat_map(|k| pod[k].as_array().into_iter().flatten())
}

fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    containers(pod).find(|c| c["name"] == name)
}

fn placement(pod: &Value) -> Vec<String> {
    let terms = pod
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // Every term must exclude the control plane and require the compute label: terms are ORed.
    let holds = |term: &Value, key: &str, op: &str, values: &[&str]| {
        term["matchExpressions"].as_array().is_some_and(|exprs| {
            exprs.iter().any(|e| {
                e["key"] == key
                    && e["operator"] == op
                    && values.iter().all(|v| {
                        e["values"]
                            .as_array()
                            .is_some_and(|a| a.contains(&(*v).into()))
                    })
            })
        })
    };
    let mut problems = Vec::new();
    if terms.is_empty()
        || !terms.iter().all(|t| {
            holds(
                t,
                "node-role.kubernetes.io/control-plane",
                "DoesNotExist",
                &[],
            )
        })
    {
        problems.push("node affinity must exclude control-plane nodes (node-role.kubernetes.io/control-plane DoesNotExist)".into());
    }
    if terms.is_empty()
        || !terms
            .iter()
            .all(|t| holds(t, "galactic.datumapis.com/node", "In", &["compute"]))
    {
        problems.push(
            "node affinity must require galactic.datumapis.com/node In [compute] (as upstream)"
                .into(),
        );
    }
    let tolerates_all = pod["tolerations"].as_array().is_some_and(|t| {
        t.iter()
            .any(|t| t["operator"] == "Exists" && t["key"].is_null())
    });
    if !tolerates_all {
        problems.push(
            "tolerations must include {operator: Exists} (a CNI runs on tainted nodes too)".into(),
        );
    }
    problems
}

/// No container is privileged or escalates; only the datapath adds capabilities, and drops the
/// rest.
fn least_privilege(c: &Value) -> Vec<String> {
    let name = c["name"].as_str().unwrap_or("?");
    let sc = &c["securityContext"];
    let mut problems = Vec::new();
    if sc["privileged"] == true {
        problems.push(format!("container {name} must not be privileged"));
    }
    if sc["allowPrivilegeEscalation"] != false {
        problems.push(format!(
            "container {name} must set allowPrivilegeEscalation: false"
        ));
    }
    let drops_all = sc
        .pointer("/capabilities/drop")
        .and_then(Value::as_array)
        .is_some_and(|d| d.contains(&"ALL".into()));
    if !drops_all {
        problems.push(format!("container {name} must drop ALL capabilities"));
    }
    let added: Vec<&str> = sc
        .pointer("/capabilities/add")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let allowed: &[&str] = if name == "datapath" {
        &DATAPATH_CAPS
    } else {
        &[]
    };
    if added.iter().any(|cap| !allowed.contains(cap)) {
        problems.push(format!(
            "container {name} adds capabilities {added:?}; allowed: {allowed:?}"
        ));
    }
    problems
}

fn mounts(c: &Value) -> Vec<(&str, &str, bool)> {
    c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            Some((
                m["name"].as_str()?,
                m["mountPath"].as_str()?,
                m["readOnly"] == true,
            ))
        })
        .collect()
}

fn env_names(c: &Value) -> Vec<&str> {
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect()
}

fn installer(c: &Value) -> Vec<String> {
    let mounted = mounts(c);
    let mut problems: Vec<String> = INSTALL_MOUNTS
        .iter()
        .filter(|path| !mounted.iter().any(|(_, p, _)| p == *path))
        .map(|path| format!("install-cni must mount {path}"))
        .collect();
    problems.extend(
        INSTALL_READS
            .iter()
            .filter(|path| {
                !mounted
                    .iter()
                    .any(|(_, p, read_only)| p == *path && *read_only)
            })
            .map(|path| format!("install-cni must mount {path} read-only")),
    );
    let env = env_names(c);
    problems.extend(
        UPSTREAM_SETTINGS
            .iter()
            .filter(|name| !env.contains(name))
            .map(|name| format!("install-cni must be given the upstream setting {name}")),
    );
    problems
}

/// The datapath container: its host mounts, capabilities, uplinks and probes.
fn datapath_container(pod: &Value, c: &Value) -> Vec<String> {
    let mut problems = datapath_mounts(pod, c);
    problems.extend(datapath_radv_mount(pod, c));
    problems.extend(datapath_privileges(c));
    problems.extend(datapath_probes(c));
    problems
}

/// The pod's volume `name` (null when there is none).
fn volume(pod: &Value, name: &str) -> Value {
    pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Only install-cni (before the datapath starts) and the datapath write the datapath's host
/// conflist: upstream's writer takes no lock, so a third writer could lose its rewrite.
fn datapath_conf_writer(pod: &Value, c: &Value) -> Vec<String> {
    let name = c["name"].as_str().unwrap_or("?");
    if ["install-cni", "datapath"].contains(&name) {
        return Vec::new();
    }
    mounts(c)
        .into_iter()
        .filter(|(volume_name, _, read_only)| {
            let host = volume(pod, volume_name)["hostPath"]["path"].clone();
            let host = host.as_str().unwrap_or("").trim_end_matches('/');
            // The directory itself or any parent of it.
            !read_only
                && !host.is_empty()
                && (DATAPATH_CONF_DIR == host || DATAPATH_CONF_DIR.starts_with(&format!("{host}/")))
        })
        .map(|(_, path, _)| {
            format!("container {name} mounts {path} writable, which holds {DATAPATH_CONF_DIR}: only install-cni and the datapath may write the datapath's host conflist")
        })
        .collect()
}

/// The host's bpffs, its host conflist's directory out of the runtime's conf dir (writable: it
/// rewrites the file), a state dir of its own.
fn datapath_mounts(pod: &Value, c: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mounted = mounts(c);
    match mounted.iter().find(|(_, p, _)| *p == "/sys/fs/bpf") {
        Some((name, _, _)) => {
            let v = volume(pod, name);
            if v["hostPath"]["path"] != "/sys/fs/bpf" || v["hostPath"]["type"] != "Directory" {
                problems.push(
                    "the datapath's /sys/fs/bpf must be the host's bpffs (hostPath /sys/fs/bpf, type Directory)"
                        .into(),
                );
            }
        }
        None => problems
            .push("the datapath container must mount the host's bpffs at /sys/fs/bpf".into()),
    }
    match mounted.iter().find(|(_, p, _)| *p == "/host/etc/cni/net.d") {
        Some((name, _, read_only)) => {
            if *read_only || volume(pod, name)["hostPath"]["path"] != DATAPATH_CONF_DIR {
                problems.push(format!("the datapath's /host/etc/cni/net.d must be {DATAPATH_CONF_DIR}, writable (its host conflist, out of the runtime's conf dir, which it rewrites by rename)"));
            }
        }
        None => problems.push(
            "the datapath container must mount its host conflist at /host/etc/cni/net.d".into(),
        ),
    }
    if let Some((name, _, _)) = mounted
        .iter()
        .find(|(_, p, _)| *p == "/host/var/lib/galactic")
    {
        if volume(pod, name)["emptyDir"].is_null() {
            problems.push("the datapath's /host/var/lib/galactic must be an emptyDir (its kubeconfig refresh must not replace the plugins')".into());
        }
    }
    problems
}

/// The records galactic-tap-cni writes for the datapath's router advertisements: read at the
/// host path the plugin writes (upstream's reader has no prefix for it), writable (the reader
/// removes a record whose tap has stayed missing), and only that directory of `/var/lib/cni`.
fn datapath_radv_mount(pod: &Value, c: &Value) -> Vec<String> {
    const RADV: &str = galactic_core::config::DEFAULT_RADV_STATE_DIR;
    let found = mounts(c).into_iter().find(|(_, p, _)| *p == RADV);
    let holds = found.is_some_and(|(name, _, read_only)| {
        !read_only && volume(pod, name)["hostPath"]["path"] == RADV
    });
    match holds {
        true => Vec::new(),
        false => vec![format!("the datapath container must mount the tap RA records writable at {RADV} (hostPath {RADV}): without them no VM on a tap gets router advertisements")],
    }
}

/// The capabilities it needs and the uplinks it is given.
fn datapath_privileges(c: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let added: Vec<&str> = c
        .pointer("/securityContext/capabilities/add")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if DATAPATH_CAPS.iter().any(|cap| !added.contains(cap)) {
        problems.push(format!(
            "the datapath container needs capabilities {DATAPATH_CAPS:?}"
        ));
    }
    if !env_names(c).contains(&"GALACTIC_CNI_EBPF_INTERFACES") {
        problems.push("the datapath container must be given GALACTIC_CNI_EBPF_INTERFACES (the uplinks galactic-bgp uses)".into());
    }
    problems
}

/// Its three probes: gRPC health of the datapath service.
fn datapath_probes(c: &Value) -> Vec<String> {
    ["startupProbe", "livenessProbe", "readinessProbe"]
        .into_iter()
        .filter(|probe| {
            let grpc = &c[*probe]["grpc"];
            grpc["port"] != 5180 || grpc["service"] != "ebpf-datapath"
        })
        .map(|probe| format!("the datapath's {probe} must be gRPC :5180 service ebpf-datapath"))
        .collect()
}

#[cfg(test)]
mod tests;
