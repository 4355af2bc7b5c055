//! `lint-manifests`: every NetworkAttachmentDefinition and example conflist under `deploy/`
//! checked the way the plugins will read it, so a manifest that would attach pods with no
//! address (addressing fields at the top level, as in the upstream NADs) cannot land.
//!
//! Sources: every `*.yaml`/`*.yml` document of kind `NetworkAttachmentDefinition` (its
//! `spec.config`) and every `*.conflist` file. Checks, per conflist:
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

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The master plugin types, in this project's names.
const MASTERS: [&str; 2] = ["galactic-cni", "galactic-tap-cni"];
/// Upstream type names and what to write instead.
const ALIASES: [(&str, &str); 2] = [
    ("galactic-veth", "galactic-cni"),
    ("galactic-tap", "galactic-tap-cni"),
];
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
        "{} NetworkAttachmentDefinition(s), {} conflist file(s): {} problem(s)",
        report.nads,
        report.conflists,
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
        "yaml" | "yml" => {
            for source in nads(path, &text()?, report) {
                report.nads += 1;
                sources.push(source);
            }
        }
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
        if value["kind"] != "NetworkAttachmentDefinition" {
            continue;
        }
        match nad_source(&origin, &value) {
            Ok(source) => out.push(source),
            Err(message) => {
                report.nads += 1;
                report.findings.push(Finding { origin, message });
            }
        }
    }
    out
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
    if types[last] != "galactic-bgp" || last == 0 {
        found.push(format!(
            "the last plugin is {:?}: galactic-bgp must end the chain (without it the attachment has no path to its VPC)",
            types[last]
        ));
    }
    for (i, t) in types.iter().enumerate().take(last).skip(1) {
        if *t != "galactic-route" {
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
        Some("galactic-ipam") => {}
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

/// The plugin binaries and a throwaway node to run them on.
struct Probe {
    bin_dir: PathBuf,
    node: tempfile::TempDir,
}

impl Probe {
    fn new(bin_dir: &Path) -> Result<Self> {
        for plugin in crate::stage::PLUGINS {
            let path = bin_dir.join(plugin);
            if !path.is_file() {
                bail!("plugin {} not found", path.display());
            }
        }
        let node = tempfile::tempdir()?;
        let config = json!({
            "state_dir": node.path().join("state"),
            "log_file": node.path().join("galactic.log"),
            "publisher": "local",
            "routing_domain": "table",
        });
        std::fs::write(node.path().join("node.json"), config.to_string())?;
        Ok(Self {
            bin_dir: bin_dir.to_path_buf(),
            node,
        })
    }

    /// Step 4 for every entry of `source` (which passed steps 1–3).
    fn stanzas(&self, source: &Source) -> Result<Vec<String>> {
        let mut found = Vec::new();
        let plugins = source.conflist["plugins"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, plugin) in plugins.iter().enumerate() {
            let mut conf = plugin.clone();
            conf["cniVersion"] = json!("1.1.0");
            conf["name"] = source.conflist["name"].clone();
            let plugin_type = plugin["type"].as_str().unwrap_or_default();
            if let Some(problem) = self.stanza(plugin_type, &conf)? {
                found.push(format!("plugins[{i}] ({plugin_type}): {problem}"));
            }
        }
        Ok(found)
    }

    /// The plugin's verdict on one stanza: `None` when it accepts it.
    fn stanza(&self, plugin_type: &str, conf: &Value) -> Result<Option<String>> {
        let (command, accepted_code) = if MASTERS.contains(&plugin_type) {
            ("STATUS", None)
        } else {
            ("ADD", Some(6))
        };
        let (success, reply) = self.exec(plugin_type, command, conf)?;
        let code = reply["code"].as_u64();
        let msg = reply["msg"].as_str().unwrap_or_default();
        Ok(match (success, accepted_code, code) {
            (true, None, _) => None,
            (false, Some(want), Some(got)) if want == got && msg.contains("prevResult") => None,
            (false, _, Some(7)) => Some(format!("refused by the plugin: {msg}")),
            (false, _, Some(code)) => Some(format!("{command} answered code {code}: {msg}")),
            _ => Some(format!("unexpected {command} reply: {reply}")),
        })
    }

    /// Runs `plugin_type` from the bin dir with a runtime's environment; (success, stdout JSON).
    fn exec(&self, plugin_type: &str, command: &str, conf: &Value) -> Result<(bool, Value)> {
        let binary = self.bin_dir.join(plugin_type);
        let mut cmd = Command::new(&binary);
        cmd.env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_PATH", &self.bin_dir)
            .env(
                "GALACTIC_CNI_NODE_CONFIG",
                self.node.path().join("node.json"),
            )
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if command == "ADD" {
            cmd.env("CNI_CONTAINERID", "galactic-lint")
                .env("CNI_NETNS", "/var/run/netns/galactic-lint-never-created")
                .env("CNI_IFNAME", "eth0");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("run {}", binary.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin.write_all(conf.to_string().as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let reply = if stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&stdout).unwrap_or_else(|_| json!({"stdout": stdout}))
        };
        Ok((out.status.success(), reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plugins, built once per test process.
    fn bin_dir() -> PathBuf {
        static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        DIR.get_or_init(|| build_plugins().expect("build the plugins"))
            .clone()
    }

    /// Lints one fixture file written to a temporary directory.
    fn lint_fixture(file: &str, text: &str) -> Report {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(file), text).unwrap();
        lint(&[dir.path().to_path_buf()], &bin_dir()).unwrap()
    }

    /// A NAD around `config` (a conflist JSON text).
    fn nad(name: &str, config: &Value) -> String {
        let indented: String = serde_json::to_string_pretty(config)
            .unwrap()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect();
        format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: {name}\n  namespace: tenant\nspec:\n  config: |\n{indented}"
        )
    }

    fn good_list(name: &str) -> Value {
        json!({"cniVersion": "1.0.0", "name": name, "plugins": [
            {"type": "galactic-cni", "vpc": "A", "vpcattachment": "1",
             "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff01::/64"}},
            {"type": "galactic-route", "vpc": "A", "vpcattachment": "1",
             "terminations": [{"network": "198.51.100.0/24"}]},
            {"type": "galactic-bgp", "vpc": "A", "vpcattachment": "1"}]})
    }

    /// The one finding of a fixture's report.
    fn only_finding(report: &Report) -> String {
        assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
        report.findings[0].message.clone()
    }

    #[test]
    fn every_manifest_under_deploy_passes() {
        let report = lint(&[crate::workspace_root().join("deploy")], &bin_dir()).unwrap();
        assert!(report.findings.is_empty(), "{:#?}", report.findings);
        assert!(
            report.conflists >= 8,
            "deploy/cni examples: {}",
            report.conflists
        );
        assert!(report.nads >= 6, "tenant NADs: {}", report.nads);
    }

    #[test]
    fn a_good_nad_passes_in_a_multi_document_file() {
        let text = format!(
            "# tenant\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant\n---\n{}",
            nad("tenant-a", &good_list("tenant-a"))
        );
        let report = lint_fixture("nad.yaml", &text);
        assert_eq!(report.nads, 1);
        assert!(report.findings.is_empty(), "{:#?}", report.findings);
    }

    #[test]
    fn addressing_fields_at_the_top_level_fail_as_in_the_upstream_nads() {
        // The shape of the upstream tenant NADs after IPAM moved into the `ipam` block.
        let list = json!({"cniVersion": "1.0.0", "name": "tenant-a", "plugins": [
            {"type": "galactic-cni", "vpc": "A", "vpcattachment": "1",
             "ipv6_subnet": "fd20:10:ff01::/64", "address_families": ["ipv6"],
             "ipam": {"type": "galactic-ipam"}},
            {"type": "galactic-bgp", "vpc": "A", "vpcattachment": "1"}]});
        let report = lint_fixture("nad.yaml", &nad("tenant-a", &list));
        let msg = only_finding(&report);
        assert!(
            msg.contains("refused by the plugin") && msg.contains("belong inside the 'ipam' block"),
            "{msg}"
        );
    }

    #[test]
    fn a_master_without_ipam_fails() {
        let mut list = good_list("tenant-a");
        list["plugins"][0].as_object_mut().unwrap().remove("ipam");
        let msg = only_finding(&lint_fixture("nad.yaml", &nad("tenant-a", &list)));
        assert!(msg.contains("no \"ipam\" block"), "{msg}");
    }

    #[test]
    fn an_ipam_block_the_plugin_refuses_fails() {
        let mut list = good_list("tenant-a");
        list["plugins"][0]["ipam"]["ipv6_subnet"] = json!("fd20:10:ff01::1");
        let msg = only_finding(&lint_fixture("x.conflist", &list.to_string()));
        assert!(
            msg.contains("refused by the plugin") && msg.contains("ipam.ipv6_subnet"),
            "{msg}"
        );
    }

    #[test]
    fn a_route_stanza_the_plugin_refuses_fails() {
        let mut list = good_list("tenant-a");
        list["plugins"][1]["terminations"] =
            json!([{"network": "198.51.100.0/24", "gw": "10.0.0.1"}]);
        let msg = only_finding(&lint_fixture("x.conflist", &list.to_string()));
        assert!(
            msg.contains("plugins[1] (galactic-route): refused by the plugin")
                && msg.contains("unknown key"),
            "{msg}"
        );
    }

    #[test]
    fn a_bgp_stanza_the_plugin_refuses_fails() {
        let mut list = good_list("tenant-a");
        for plugin in list["plugins"].as_array_mut().unwrap() {
            plugin["vpc"] = json!("not base62!");
        }
        let report = lint_fixture("x.conflist", &list.to_string());
        let bgp: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| {
                f.message
                    .starts_with("plugins[2] (galactic-bgp): refused by the plugin")
            })
            .collect();
        assert_eq!(bgp.len(), 1, "{:#?}", report.findings);
        assert_eq!(
            report.findings.len(),
            3,
            "every plugin refuses: {:#?}",
            report.findings
        );
    }

    #[test]
    fn name_mismatch_order_aliases_and_identifiers_fail() {
        let list = good_list("tenant-a");
        let msg = only_finding(&lint_fixture("nad.yaml", &nad("tenant-b", &list)));
        assert!(msg.contains("differs from metadata.name"), "{msg}");

        let mut swapped = good_list("t");
        let plugins = swapped["plugins"].as_array_mut().unwrap();
        plugins.swap(1, 2);
        let report = lint_fixture("x.conflist", &swapped.to_string());
        let text = format!("{:?}", report.findings);
        assert!(text.contains("galactic-bgp must end the chain"), "{text}");
        assert!(
            text.contains("only galactic-route may sit between"),
            "{text}"
        );

        let mut alias = good_list("t");
        alias["plugins"][0]["type"] = json!("galactic-veth");
        let text = format!(
            "{:?}",
            lint_fixture("x.conflist", &alias.to_string()).findings
        );
        assert!(
            text.contains("upstream type name") && text.contains("must come first"),
            "{text}"
        );

        let mut other_vpc = good_list("t");
        other_vpc["plugins"][2]["vpc"] = json!("B");
        let msg = only_finding(&lint_fixture("x.conflist", &other_vpc.to_string()));
        assert!(msg.contains("plugins[2].vpc"), "{msg}");

        let mut stray = good_list("t");
        stray["plugins"][2]["ipv4_subnet"] = json!("10.0.0.0/24");
        let msg = only_finding(&lint_fixture("x.conflist", &stray.to_string()));
        assert!(msg.contains("addressing field"), "{msg}");

        let mut version = good_list("t");
        version["cniVersion"] = json!("0.3.1");
        let msg = only_finding(&lint_fixture("x.conflist", &version.to_string()));
        assert!(msg.contains("cniVersion"), "{msg}");
    }

    #[test]
    fn the_crd_kustomization_lists_every_generated_crd() {
        let dir = crate::workspace_root().join("deploy/crds");
        let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
        let listed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- "))
            .collect();
        let mut generated: Vec<String> = crate::crds::rendered()
            .unwrap()
            .into_iter()
            .map(|(file, _)| file.to_owned())
            .collect();
        generated.sort();
        assert_eq!(listed, generated, "deploy/crds/kustomization.yaml");
    }

    #[test]
    fn documents_split_only_at_column_zero_separators() {
        let docs = documents("a: 1\n---\nb: |\n  ---\n  x\n--- # c\nc: 3\n...\n");
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert!(docs[1].contains("  ---"));
    }
}
