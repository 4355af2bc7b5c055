//! `lint-manifests`: every NetworkAttachmentDefinition and example conflist under `deploy/`
//! checked the way the plugins will read it, so a manifest that would attach pods with no
//! address (addressing fields at the top level, as in the upstream NADs) cannot land.
//!
//! Sources: every `*.yaml`/`*.yml` document of kind `NetworkAttachmentDefinition` (its
//! `spec.config`; the items of a `List`, as `kubectl get … -o yaml` prints the cluster's NADs)
//! and every `*.conflist` file. Every YAML object of the workspace's CRDs (BGP resources such as
//! the lab's BGPRouters, and the NADs) must also be one the API server would store as written:
//! the test API server refuses a field the CRD's schema lacks (as `kubectl apply` does, with
//! strict field validation) and checks the rest against the schema and CEL rules. Checks, per
//! conflist:
//!
//! 1. shape: `name` (for a NAD, equal to `metadata.name`: the masters look the NAD up by it),
//!    `cniVersion` 1.0.0 or 1.1.0, a non-empty `plugins` list;
//! 2. chain order: a master (`galactic-cni` or `galactic-tap-cni`) first, `galactic-bgp` last,
//!    only `galactic-route` in between; every entry names the same `vpc` and `vpcattachment`;
//! 3. the master has an `ipam` block of type `galactic-ipam` (a master without one attaches
//!    with no address, which is legal for the plugin but never what a manifest here means), and
//!    no entry carries addressing fields at its top level;
//! 4. every stanza through the plugin's own validation, by running the real plugin binaries
//!    (decision 0040): the masters' STATUS (it parses the master stanza and delegates STATUS to
//!    `galactic-ipam`, which parses the `ipam` block), and for `galactic-route` and `galactic-bgp`
//!    an ADD without `prevResult`, which both plugins answer only after validating the stanza
//!    (code 7 for an invalid stanza, code 6 "no prevResult" for a valid one) and before touching
//!    anything. Probes run with a throwaway node config (local publisher, temporary state and
//!    log); the stanza's `cniVersion` is set to 1.1.0 for the probe (STATUS needs it), the
//!    declared one is checked by step 1.
//!
//! The `galactic-cni` DaemonSet (kind `DaemonSet`, that name) is checked too: placement,
//! host network, mounts, capabilities and the upstream settings (see [`daemonset`]).

pub mod daemonset;
mod probe;

use anyhow::{bail, Context, Result};
use probe::Probe;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// The master plugin types, in this project's names.
const MASTERS: [&str; 2] = [plugins::VETH_MASTER, plugins::TAP_MASTER];
/// Upstream type names and what to write instead.
use galactic_core::plugins::{self, ALIASES};
/// Versions every plugin speaks.
const VERSIONS: [&str; 2] = ["1.0.0", "1.1.0"];
/// Addressing fields that belong inside the master's `ipam` block only.
const ADDRESSING: [&str; 10] = [
    "ipv6_subnet",
    "ipv4_subnet",
    "address_families",
    "static_ip",
    "addresses",
    "subnet_len",
    "ipv6_gateway",
    "ipv4_gateway",
    "data_dir",
    "legacy_dir",
];

/// One problem, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// File (and document) the conflist came from.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// A conflist found under the scanned paths.
#[derive(Debug, Clone)]
pub struct Source {
    /// `file` or `file#document` (1-based).
    pub origin: String,
    /// The NAD's `metadata.name`, for a NAD.
    pub nad_name: Option<String>,
    /// The conflist JSON.
    pub conflist: Value,
}

/// What a lint run saw and found.
#[derive(Debug, Default)]
pub struct Report {
    /// Conflists read from NADs.
    pub nads: usize,
    /// Conflist files read.
    pub conflists: usize,
    /// Objects of the workspace's CRDs checked against them (NADs included).
    pub custom_resources: usize,
    /// `galactic-cni` DaemonSets checked (`daemonset`).
    pub daemonsets: usize,
    /// Every problem.
    pub findings: Vec<Finding>,
}

/// `cargo xtask lint-manifests [--bin-dir DIR] [PATH]...`: every NetworkAttachmentDefinition
/// (*.yaml, *.yml) and conflist (*.conflist) under the given paths, checked with the plugins'
/// own validation.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use the plugin binaries in DIR instead of building the workspace's
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Files or directories to check (default: deploy/)
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// The command.
pub fn run(args: &Args) -> Result<()> {
    let mut paths = args.paths.clone();
    if paths.is_empty() {
        paths.push(crate::workspace_root().join("deploy"));
    }
    let bin_dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => build_plugins()?,
    };
    let report = lint(&paths, &bin_dir)?;
    for finding in &report.findings {
        println!("FAIL {finding}");
    }
    println!(
        "{} NetworkAttachmentDefinition(s), {} conflist file(s), {} DaemonSet(s), {} custom resource(s): {} problem(s)",
        report.nads,
        report.conflists,
        report.daemonsets,
        report.custom_resources,
        report.findings.len()
    );
    if !report.findings.is_empty() {
        bail!("manifest lint failed");
    }
    Ok(())
}

/// Builds the plugin binaries (debug profile); returns the directory holding them.
pub fn build_plugins() -> Result<PathBuf> {
    crate::stage::build_plugins(false)
}

/// Lints every source under `paths` with the plugins in `bin_dir`.
pub fn lint(paths: &[PathBuf], bin_dir: &Path) -> Result<Report> {
    let mut report = Report::default();
    let mut sources = Vec::new();
    for path in paths {
        collect(path, &mut sources, &mut report)?;
    }
    let probe = Probe::new(bin_dir)?;
    for source in &sources {
        let mut found = shape(source);
        if found.is_empty() {
            found = probe.stanzas(source)?;
        }
        report
            .findings
            .extend(found.into_iter().map(|message| Finding {
                origin: source.origin.clone(),
                message,
            }));
    }
    Ok(report)
}

/// Walks `path` (file or directory) for NADs and conflists.
fn collect(path: &Path, sources: &mut Vec<Source>, report: &mut Report) -> Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("read {}", path.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        for entry in entries {
            collect(&entry, sources, report)?;
        }
        return Ok(());
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    let text = || std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()));
    match ext {
        "conflist" => {
            report.conflists += 1;
            sources.push(conflist_file(path, &text()?, report));
        }
        "yaml" | "yml" => sources.extend(nads(path, &text()?, report)),
        _ => {}
    }
    Ok(())
}

/// A `.conflist` file as a source (unparseable JSON becomes a finding and an empty source).
fn conflist_file(path: &Path, text: &str, report: &mut Report) -> Source {
    let origin = path.display().to_string();
    let conflist = serde_json::from_str(text).unwrap_or_else(|e| {
        report.findings.push(Finding {
            origin: origin.clone(),
            message: format!("not JSON: {e}"),
        });
        Value::Null
    });
    Source {
        origin,
        nad_name: None,
        conflist,
    }
}

/// The YAML documents of `text`: split at `---` lines at column 0 (a block scalar's lines are
/// indented, so a separator can never be inside one), each parsed on its own.
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        let separator = line == "---" || line.starts_with("--- ") || line == "...";
        match (separator, docs.last_mut()) {
            (true, _) => docs.push(String::new()),
            (false, Some(doc)) => {
                doc.push_str(line);
                doc.push('\n');
            }
            (false, None) => {}
        }
    }
    docs.retain(|d| {
        d.lines()
            .any(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
    });
    docs
}

/// For an object of one of the workspace's CRDs (the BGP resources, NADs): whether the API
/// server would store it (the test API server with those CRDs: schema and CEL rules).
fn refused_custom_resource(value: &Value) -> Option<Result<(), String>> {
    let api_version = value["apiVersion"].as_str()?;
    let ours = galactic_kube::crds().iter().any(|(_, crd)| {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        api_version.split('/').next() == Some(group)
            && crd["spec"]["names"]["kind"] == value["kind"]
    });
    if !ours {
        return None;
    }
    let fixture = galactic_testkit::apiserver::Fixture::new();
    Some(
        fixture
            .try_insert(value.clone())
            .map(drop)
            .map_err(|e| e.message),
    )
}

/// The NADs of one YAML file; problems with a NAD's envelope become findings.
fn nads(path: &Path, text: &str, report: &mut Report) -> Vec<Source> {
    let mut out = Vec::new();
    for (n, doc) in documents(text).iter().enumerate() {
        let origin = format!("{}#{}", path.display(), n + 1);
        let value: Value = match serde_norway::from_str::<serde_norway::Value>(doc)
            .map_err(|e| e.to_string())
            .and_then(|v| serde_json::to_value(v).map_err(|e| e.to_string()))
        {
            Ok(value) => value,
            Err(e) => {
                report.findings.push(Finding {
                    origin,
                    message: format!("not YAML: {e}"),
                });
                continue;
            }
        };
        // `kubectl get … -o yaml` prints a `List`: its items are the documents.
        let items = match value["kind"].as_str() {
            Some("List") => value["items"].as_array().cloned().unwrap_or_default(),
            _ => vec![value],
        };
        for (i, item) in items.iter().enumerate() {
            let origin = match items.len() {
                1 => origin.clone(),
                _ => format!("{origin} items[{i}]"),
            };
            object(origin, item, &mut out, report);
        }
    }
    out
}

/// One Kubernetes object of a YAML document: an object of the workspace's CRDs is checked
/// against its CRD, the DaemonSet is linted, a NAD becomes a source.
fn object(origin: String, value: &Value, out: &mut Vec<Source>, report: &mut Report) {
    if let Some(refused) = refused_custom_resource(value) {
        report.custom_resources += 1;
        if let Err(message) = refused {
            report.findings.push(Finding {
                origin: origin.clone(),
                message,
            });
        }
    }
    if daemonset::is_ours(value) {
        report.daemonsets += 1;
        report
            .findings
            .extend(daemonset::lint(value).into_iter().map(|message| Finding {
                origin: origin.clone(),
                message,
            }));
        return;
    }
    if value["kind"] != "NetworkAttachmentDefinition" {
        return;
    }
    match nad_source(&origin, value) {
        Ok(source) => {
            report.nads += 1;
            out.push(source);
        }
        Err(message) => {
            report.nads += 1;
            report.findings.push(Finding { origin, message });
        }
    }
}

/// The conflist of one NAD document.
fn nad_source(origin: &str, nad: &Value) -> Result<Source, String> {
    if nad["apiVersion"] != "k8s.cni.cncf.io/v1" {
        return Err(format!(
            "apiVersion must be k8s.cni.cncf.io/v1, got {}",
            nad["apiVersion"]
        ));
    }
    let name = nad["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or("metadata.name is missing")?;
    let config = nad["spec"]["config"]
        .as_str()
        .ok_or_else(|| format!("NetworkAttachmentDefinition {name} has no spec.config string"))?;
    let conflist: Value = serde_json::from_str(config)
        .map_err(|e| format!("spec.config of {name} is not JSON: {e}"))?;
    Ok(Source {
        origin: format!("{origin} ({name})"),
        nad_name: Some(name.to_owned()),
        conflist,
    })
}

/// Shape, chain order and consistency (steps 1–3); empty when everything holds.
fn shape(source: &Source) -> Vec<String> {
    let list = &source.conflist;
    if !list.is_object() {
        return vec!["the configuration is not a JSON object".into()];
    }
    let mut found = Vec::new();
    let name = list["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        found.push("conflist has no \"name\"".into());
    }
    if let Some(nad) = &source.nad_name {
        if nad != name {
            found.push(format!(
                "conflist name {name:?} differs from metadata.name {nad:?}: the masters look the NetworkAttachmentDefinition up by the conflist name"
            ));
        }
    }
    let version = list["cniVersion"].as_str().unwrap_or_default();
    if !VERSIONS.contains(&version) {
        found.push(format!(
            "cniVersion {version:?} is not spoken by the plugins: use 1.0.0 or 1.1.0"
        ));
    }
    match list["plugins"].as_array().filter(|p| !p.is_empty()) {
        None => found.push(
            "no \"plugins\" list: a Galactic attachment is a chain (master, optional galactic-route, galactic-bgp)".into(),
        ),
        Some(plugins) => found.extend(chain(plugins)),
    }
    found
}

/// Chain order, identifiers, the `ipam` block and stray addressing fields.
fn chain(plugins: &[Value]) -> Vec<String> {
    let mut found = Vec::new();
    let types: Vec<&str> = plugins
        .iter()
        .map(|p| p["type"].as_str().unwrap_or_default())
        .collect();
    for (i, t) in types.iter().enumerate() {
        if let Some((_, ours)) = ALIASES.iter().find(|(alias, _)| alias == t) {
            found.push(format!(
                "plugins[{i}] uses the upstream type name {t:?}: write {ours:?}"
            ));
        }
    }
    let last = types.len() - 1;
    if !MASTERS.contains(&types[0]) {
        found.push(format!(
            "plugins[0] is {:?}: the master (galactic-cni or galactic-tap-cni) must come first",
            types[0]
        ));
    }
    if types[last] != plugins::BGP || last == 0 {
        found.push(format!(
            "the last plugin is {:?}: galactic-bgp must end the chain (without it the attachment has no path to its VPC)",
            types[last]
        ));
    }
    for (i, t) in types.iter().enumerate().take(last).skip(1) {
        if *t != plugins::ROUTE {
            found.push(format!(
                "plugins[{i}] is {t:?}: only galactic-route may sit between the master and galactic-bgp"
            ));
        }
    }
    found.extend(identifiers(plugins));
    found.extend(addressing(plugins));
    found
}

/// Every entry names the master's `vpc` and `vpcattachment`.
fn identifiers(plugins: &[Value]) -> Vec<String> {
    let mut found = Vec::new();
    for key in ["vpc", "vpcattachment"] {
        let master = &plugins[0][key];
        for (i, plugin) in plugins.iter().enumerate().skip(1) {
            if plugin[key] != *master {
                found.push(format!(
                    "plugins[{i}].{key} is {} but the master's is {master}: every entry of a chain describes one attachment",
                    plugin[key]
                ));
            }
        }
    }
    found
}

/// The master's `ipam` block exists and is galactic-ipam's; no entry has addressing fields at
/// its top level (the master refuses them; the others would silently ignore them).
fn addressing(plugins: &[Value]) -> Vec<String> {
    let mut found = Vec::new();
    match plugins[0]["ipam"]["type"].as_str() {
        Some(plugins::IPAM) => {}
        Some(other) => found.push(format!(
            "plugins[0].ipam.type is {other:?}: the Galactic chain's IPAM is galactic-ipam"
        )),
        None => found
            .push("plugins[0] has no \"ipam\" block: the attachment would get no address".into()),
    }
    for (i, plugin) in plugins.iter().enumerate().skip(1) {
        let stray: Vec<&str> = ADDRESSING
            .iter()
            .copied()
            .filter(|k| plugin.get(*k).is_some_and(|v| !v.is_null()))
            .collect();
        if !stray.is_empty() {
            found.push(format!(
                "plugins[{i}] ({}) has addressing field(s) {stray:?} at its top level: they belong in the master's \"ipam\" block",
                plugin["type"].as_str().unwrap_or_default()
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests;
