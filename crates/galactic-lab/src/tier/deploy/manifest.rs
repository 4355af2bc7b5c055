//! The DaemonSet's containers as `podman run` flags, read from `deploy/kubernetes/daemonset.yaml`
//! so that a change to the manifest is what the tier tests.
//!
//! Each field of a container the tier runs is turned into what the kubelet would make of it
//! (Kubernetes' `readOnlyRootFilesystem` is Podman's `--read-only --read-only-tmpfs=false`: Podman's
//! `--read-only` alone mounts tmpfs on `/tmp`, `/var/tmp` and `/run`, which Kubernetes does not), plus
//! what the kubelet adds to every container (the service account directory, read-only, and the
//! `kubernetes` service's environment). A field the tier does not know fails the parse, naming
//! it: the tier must never pass on a manifest it did not fully apply.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where the kubelet mounts a pod's service account token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Why the manifest could not be turned into containers.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file is not YAML (or not a mapping where one is required).
    #[error("{path}: {message}")]
    Syntax {
        /// The manifest.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A field the tier does not apply: a manifest change the tier would not test.
    #[error("{at}: `{field}` is not applied by the deployment tier; teach the tier (crates/galactic-lab/src/tier/deploy/manifest.rs) what the kubelet does with it")]
    Unknown {
        /// Where in the manifest.
        at: String,
        /// The field.
        field: String,
    },
    /// A field with a value the tier cannot apply.
    #[error("{at}: {message}")]
    Unsupported {
        /// Where in the manifest.
        at: String,
        /// What is wrong.
        message: String,
    },
}

type Result<T> = std::result::Result<T, ManifestError>;

/// What the kubelet of the simulated node supplies: the downward API's values, the host root the
/// `hostPath` volumes are under, the service account and the API server's address.
#[derive(Debug, Clone)]
pub struct Kubelet {
    /// `spec.nodeName`.
    pub node_name: String,
    /// The simulated host's `/`: a `hostPath` `/etc/galactic` is `<host_root>/etc/galactic`.
    pub host_root: PathBuf,
    /// The directory mounted read-only at [`SERVICE_ACCOUNT_DIR`] (token, ca.crt, namespace).
    pub service_account: PathBuf,
    /// `KUBERNETES_SERVICE_HOST`.
    pub service_host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub service_port: u16,
}

/// One container as `podman run` runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// The container's name in the manifest.
    pub name: String,
    /// `image`, as the manifest names it.
    pub image: String,
    /// Every flag between `podman run` and the image.
    pub flags: Vec<String>,
    /// `args` (after the image's entrypoint).
    pub args: Vec<String>,
    /// Host directories a `hostPath` volume of type `DirectoryOrCreate` needs: the kubelet
    /// creates them before the container starts.
    pub create_dirs: Vec<PathBuf>,
    /// Host directories a `hostPath` volume of type `Directory` needs: the kubelet refuses to
    /// start the container without them.
    pub require_dirs: Vec<PathBuf>,
}

/// The DaemonSet manifest.
#[derive(Debug, Clone)]
pub struct DaemonSet {
    namespace: String,
    pod: Value,
}

/// Pod fields that only decide where and when the pod is scheduled, not how its containers run.
const SCHEDULING: &[&str] = &[
    "priorityClassName",
    "tolerations",
    "affinity",
    "nodeSelector",
];

impl DaemonSet {
    /// Reads the manifest at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError::Syntax {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses a manifest's text (`origin` names it in errors).
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let syntax = |message: String| ManifestError::Syntax {
            path: origin.to_owned(),
            message,
        };
        let yaml: serde_norway::Value =
            serde_norway::from_str(text).map_err(|e| syntax(e.to_string()))?;
        let doc = serde_json::to_value(yaml).map_err(|e| syntax(e.to_string()))?;
        if doc["kind"] != "DaemonSet" {
            return Err(syntax(format!("kind is {}, not DaemonSet", doc["kind"])));
        }
        let namespace = doc["metadata"]["namespace"]
            .as_str()
            .ok_or_else(|| syntax("metadata.namespace is not set".to_owned()))?
            .to_owned();
        let pod = doc["spec"]["template"]["spec"].clone();
        if !pod.is_object() {
            return Err(syntax("spec.template.spec is not a mapping".to_owned()));
        }
        Ok(Self { namespace, pod })
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The container `name` (an init container or a container) as `kubelet` would run it.
    pub fn container(&self, name: &str, kubelet: &Kubelet) -> Result<Container> {
        let pod_flags = self.pod_flags()?;
        let (at, spec) = self.find(name)?;
        let mut run = Container {
            name: name.to_owned(),
            image: string(&spec["image"], &format!("{at}.image"))?,
            flags: pod_flags,
            args: strings(&spec["args"], &format!("{at}.args"))?,
            create_dirs: Vec::new(),
            require_dirs: Vec::new(),
        };
        for (field, value) in object(spec, &at)? {
            let here = format!("{at}.{field}");
            match field.as_str() {
                "name" | "image" | "args" => {}
                "command" => {
                    let command = strings(value, &here)?;
                    let (entrypoint, rest) = command
                        .split_first()
                        .ok_or_else(|| unsupported(&here, "an empty command".to_owned()))?;
                    run.flags.push(format!("--entrypoint={entrypoint}"));
                    run.args = rest.iter().cloned().chain(run.args).collect();
                }
                "env" => run.flags.extend(self.env(value, &here, kubelet)?),
                "securityContext" => run.flags.extend(security_context(value, &here)?),
                "resources" => run.flags.extend(resources(value, &here)?),
                "volumeMounts" => self.volume_mounts(value, &here, kubelet, &mut run)?,
                other => return Err(unknown(&at, other)),
            }
        }
        run.flags.extend(kubelet_additions(kubelet));
        Ok(run)
    }

    /// The container `name` and where it is in the manifest.
    fn find(&self, name: &str) -> Result<(String, &Value)> {
        for list in ["initContainers", "containers"] {
            let found = self.pod[list]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .find(|(_, c)| c["name"] == name);
            if let Some((i, spec)) = found {
                return Ok((format!("spec.template.spec.{list}[{i}]"), spec));
            }
        }
        Err(unsupported(
            "spec.template.spec",
            format!("no container named {name}"),
        ))
    }

    /// What the pod's own fields make of every container of it.
    fn pod_flags(&self) -> Result<Vec<String>> {
        let at = "spec.template.spec";
        let mut flags = Vec::new();
        for (field, value) in object(&self.pod, at)? {
            let here = format!("{at}.{field}");
            match field.as_str() {
                // Applied per container, or the service account the kubelet mounts.
                "initContainers" | "containers" | "volumes" | "serviceAccountName" => {}
                f if SCHEDULING.contains(&f) => {}
                "hostNetwork" => match value.as_bool() {
                    Some(true) => flags.push("--network=host".to_owned()),
                    _ => {
                        return Err(unsupported(
                            &here,
                            "the tier runs host-network pods only".to_owned(),
                        ))
                    }
                },
                // With the host's network a pod resolves as the host does: Podman's host
                // network gives the host's resolv.conf.
                "dnsPolicy" => {
                    if value != "ClusterFirstWithHostNet" {
                        return Err(unsupported(
                            &here,
                            format!("dnsPolicy {value} is not applied by the tier"),
                        ));
                    }
                }
                "securityContext" => pod_security_context(value, &here)?,
                other => return Err(unknown(at, other)),
            }
        }
        Ok(flags)
    }

    /// `env`, the downward API resolved as the kubelet does.
    fn env(&self, env: &Value, at: &str, kubelet: &Kubelet) -> Result<Vec<String>> {
        let mut flags = Vec::new();
        for (i, entry) in array(env, at)?.iter().enumerate() {
            let here = format!("{at}[{i}]");
            let name = string(&entry["name"], &format!("{here}.name"))?;
            let value = match (entry.get("value"), entry.get("valueFrom")) {
                (Some(v), None) => string(v, &format!("{here}.value"))?,
                (None, Some(from)) => {
                    self.value_from(from, &format!("{here}.valueFrom"), kubelet)?
                }
                (None, None) => String::new(),
                (Some(_), Some(_)) => {
                    return Err(unsupported(&here, "both value and valueFrom".to_owned()))
                }
            };
            if let Some(field) = object(entry, &here)?
                .keys()
                .find(|k| !["name", "value", "valueFrom"].contains(&k.as_str()))
            {
                return Err(unknown(&here, field));
            }
            flags.push(format!("--env={name}={value}"));
        }
        Ok(flags)
    }

    fn value_from(&self, from: &Value, at: &str, kubelet: &Kubelet) -> Result<String> {
        let path = from["fieldRef"]["fieldPath"].as_str();
        let known = object(from, at)?.len() == 1 && object(&from["fieldRef"], at)?.len() == 1;
        match path {
            Some("spec.nodeName") if known => Ok(kubelet.node_name.clone()),
            Some("metadata.namespace") if known => Ok(self.namespace.clone()),
            _ => Err(unsupported(
                at,
                format!(
                    "only fieldRef spec.nodeName and metadata.namespace are resolved, got {from}"
                ),
            )),
        }
    }

    /// `volumeMounts` with the pod's `volumes`: `hostPath` a bind mount of the simulated host
    /// root, `emptyDir` of medium `Memory` a tmpfs.
    fn volume_mounts(
        &self,
        mounts: &Value,
        at: &str,
        kubelet: &Kubelet,
        run: &mut Container,
    ) -> Result<()> {
        for (i, mount) in array(mounts, at)?.iter().enumerate() {
            let here = format!("{at}[{i}]");
            let name = string(&mount["name"], &format!("{here}.name"))?;
            let target = string(&mount["mountPath"], &format!("{here}.mountPath"))?;
            let read_only = mount["readOnly"].as_bool().unwrap_or(false);
            if let Some(field) = object(mount, &here)?
                .keys()
                .find(|k| !["name", "mountPath", "readOnly"].contains(&k.as_str()))
            {
                return Err(unknown(&here, field));
            }
            let (vat, volume) = self.volume(&name)?;
            let ro = if read_only { ",ro" } else { "" };
            if let Some(host) = volume.get("hostPath") {
                let source = host_path(host, &format!("{vat}.hostPath"), kubelet, run)?;
                run.flags
                    .push(format!("--volume={}:{target}:rbind{ro}", source.display()));
            } else if let Some(empty) = volume.get("emptyDir") {
                run.flags
                    .push(empty_dir(empty, &format!("{vat}.emptyDir"), &target, ro)?);
            } else {
                let kind = object(volume, &vat)?.keys().find(|k| *k != "name").cloned();
                return Err(unknown(&vat, &kind.unwrap_or_default()));
            }
        }
        Ok(())
    }

    fn volume(&self, name: &str) -> Result<(String, &Value)> {
        self.pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, v)| v["name"] == name)
            .map(|(i, v)| (format!("spec.template.spec.volumes[{i}]"), v))
            .ok_or_else(|| unsupported("spec.template.spec.volumes", format!("no volume {name}")))
    }
}

/// A `hostPath` volume: its directory under the simulated host root, created or required as its
/// `type` says.
fn host_path(host: &Value, at: &str, kubelet: &Kubelet, run: &mut Container) -> Result<PathBuf> {
    let path = string(&host["path"], &format!("{at}.path"))?;
    let source = kubelet.host_root.join(path.trim_start_matches('/'));
    for field in object(host, at)?.keys() {
        if field != "path" && field != "type" {
            return Err(unknown(at, field));
        }
    }
    match host["type"].as_str().unwrap_or("") {
        "DirectoryOrCreate" => run.create_dirs.push(source.clone()),
        "Directory" => run.require_dirs.push(source.clone()),
        "" => {}
        other => {
            return Err(unsupported(
                at,
                format!("hostPath type {other} is not applied by the tier"),
            ))
        }
    }
    Ok(source)
}

/// An `emptyDir` of medium `Memory`: a tmpfs of its `sizeLimit`.
fn empty_dir(empty: &Value, at: &str, target: &str, ro: &str) -> Result<String> {
    for field in object(empty, at)?.keys() {
        if field != "medium" && field != "sizeLimit" {
            return Err(unknown(at, field));
        }
    }
    if empty["medium"] != "Memory" {
        return Err(unsupported(
            at,
            "only emptyDir of medium Memory is applied by the tier".to_owned(),
        ));
    }
    let size = match empty.get("sizeLimit") {
        Some(limit) => format!(",size={}", quantity(limit, &format!("{at}.sizeLimit"))?),
        None => String::new(),
    };
    Ok(format!("--tmpfs={target}:rw{size}{ro}"))
}

/// What the kubelet adds to every container of a pod with a service account.
fn kubelet_additions(kubelet: &Kubelet) -> Vec<String> {
    vec![
        format!(
            "--volume={}:{SERVICE_ACCOUNT_DIR}:rbind,ro",
            kubelet.service_account.display()
        ),
        format!("--env=KUBERNETES_SERVICE_HOST={}", kubelet.service_host),
        format!("--env=KUBERNETES_SERVICE_PORT={}", kubelet.service_port),
        format!(
            "--env=KUBERNETES_SERVICE_PORT_HTTPS={}",
            kubelet.service_port
        ),
    ]
}

/// A pod's `securityContext`: the tier applies only what Podman gives every container anyway.
fn pod_security_context(value: &Value, at: &str) -> Result<()> {
    for (field, v) in object(value, at)? {
        match field.as_str() {
            // Podman's default seccomp profile is the runtime's default.
            "seccompProfile" if v["type"] == "RuntimeDefault" && object(v, at)?.len() == 1 => {}
            other => return Err(unknown(at, other)),
        }
    }
    Ok(())
}

/// A container's `securityContext` as Podman flags.
fn security_context(value: &Value, at: &str) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    for (field, v) in object(value, at)? {
        let here = format!("{at}.{field}");
        match field.as_str() {
            "runAsUser" => {
                let uid = v
                    .as_u64()
                    .ok_or_else(|| unsupported(&here, format!("not a user id: {v}")))?;
                flags.push(format!("--user={uid}"));
            }
            "capabilities" => flags.extend(capabilities(v, &here)?),
            "allowPrivilegeEscalation" => {
                if v == false {
                    flags.push("--security-opt=no-new-privileges".to_owned());
                }
            }
            "readOnlyRootFilesystem" => {
                if v == true {
                    // Podman's --read-only alone mounts tmpfs on /tmp, /var/tmp and /run.
                    flags.push("--read-only".to_owned());
                    flags.push("--read-only-tmpfs=false".to_owned());
                }
            }
            other => return Err(unknown(at, other)),
        }
    }
    Ok(flags)
}

fn capabilities(value: &Value, at: &str) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    for (field, list) in object(value, at)? {
        let flag = match field.as_str() {
            "drop" => "--cap-drop",
            "add" => "--cap-add",
            other => return Err(unknown(at, other)),
        };
        for cap in strings(list, &format!("{at}.{field}"))? {
            flags.push(format!("{flag}={cap}"));
        }
    }
    Ok(flags)
}

/// `resources`: what Podman enforces. Limits become cgroup limits; requests only weigh in the
/// scheduler (and in CPU shares under contention), so the tier applies none of them.
fn resources(value: &Value, at: &str) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    for (field, v) in object(value, at)? {
        let here = format!("{at}.{field}");
        match field.as_str() {
            "requests" => {
                for key in object(v, &here)?.keys() {
                    if key != "cpu" && key != "memory" {
                        return Err(unknown(&here, key));
                    }
                }
            }
            "limits" => {
                for (key, limit) in object(v, &here)? {
                    match key.as_str() {
                        "memory" => flags.push(format!(
                            "--memory={}",
                            quantity(limit, &format!("{here}.memory"))?
                        )),
                        "cpu" => {
                            flags.push(format!("--cpus={}", cpus(limit, &format!("{here}.cpu"))?))
                        }
                        other => return Err(unknown(&here, other)),
                    }
                }
            }
            other => return Err(unknown(at, other)),
        }
    }
    Ok(flags)
}

/// A memory quantity (`64Mi`, `1G`, `512`) in bytes.
fn quantity(value: &Value, at: &str) -> Result<u64> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(unsupported(at, format!("not a quantity: {other}"))),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1000,
        "M" => 1000_u64.pow(2),
        "G" => 1000_u64.pow(3),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => {
            return Err(unsupported(
                at,
                format!("quantity {text} is not applied by the tier"),
            ))
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| unsupported(at, format!("not a quantity: {text}")))
}

/// A CPU quantity (`500m`, `2`) as Podman's `--cpus`.
fn cpus(value: &Value, at: &str) -> Result<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(unsupported(at, format!("not a CPU quantity: {other}"))),
    };
    let millis = match text.strip_suffix('m') {
        Some(m) => m.parse::<u64>().ok(),
        None => text.parse::<u64>().ok().and_then(|n| n.checked_mul(1000)),
    };
    millis
        .map(|m| format!("{}.{:03}", m / 1000, m % 1000))
        .ok_or_else(|| unsupported(at, format!("not a CPU quantity: {text}")))
}

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a serde_json::Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| unsupported(at, format!("not a mapping: {value}")))
}

fn array<'a>(value: &'a Value, at: &str) -> Result<&'a Vec<Value>> {
    value
        .as_array()
        .ok_or_else(|| unsupported(at, format!("not a list: {value}")))
}

fn string(value: &Value, at: &str) -> Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| unsupported(at, format!("not a string: {value}")))
}

/// A list of strings; absent is empty.
fn strings(value: &Value, at: &str) -> Result<Vec<String>> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    array(value, at)?.iter().map(|v| string(v, at)).collect()
}

fn unknown(at: &str, field: &str) -> ManifestError {
    ManifestError::Unknown {
        at: at.to_owned(),
        field: field.to_owned(),
    }
}

fn unsupported(at: &str, message: String) -> ManifestError {
    ManifestError::Unsupported {
        at: at.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests;
