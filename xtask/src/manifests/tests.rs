//! The lint against fixtures and against every manifest under deploy/.

use super::*;
use serde_json::json;

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
    assert!(
        report.custom_resources >= report.nads + 4,
        "NADs and the lab's BGPRouters: {}",
        report.custom_resources
    );
}

#[test]
fn a_bgp_router_the_api_server_would_refuse_fails() {
    let router = "apiVersion: network.datumapis.com/v1alpha1\nkind: BGPRouter\nmetadata: {name: r, namespace: galactic-system}\nspec:\n  targetRef: {kind: Node, name: n}\n  localASN: 65001\n  routerID: 10.254.1.1\n";
    let msg = only_finding(&lint_fixture("routers.yaml", router));
    assert!(
        msg.contains("spec.addressFamilies: Required value"),
        "{msg}"
    );
    let good = format!("{router}  addressFamilies: [{{afi: l2vpn, safi: evpn}}]\n");
    assert!(lint_fixture("routers.yaml", &good).findings.is_empty());
    let bad_locator = format!("{good}  srv6Locator: 10.0.0.0/8\n");
    let msg = only_finding(&lint_fixture("routers.yaml", &bad_locator));
    assert!(msg.contains("srv6Locator must be an IPv6 CIDR"), "{msg}");
    // The older schema's `roles`: `kubectl apply` (strict field validation) refuses it.
    let with_roles = format!("{good}  roles: [tenant]\n");
    let msg = only_finding(&lint_fixture("routers.yaml", &with_roles));
    assert!(
        msg.contains("strict decoding error: unknown field \"spec.roles\""),
        "{msg}"
    );
    // The 16-bit Node-ID: 57343 is the last one.
    let last = format!("{good}  nodeID: 57343\n");
    assert!(lint_fixture("routers.yaml", &last).findings.is_empty());
    let msg = only_finding(&lint_fixture(
        "routers.yaml",
        &format!("{good}  nodeID: 57344\n"),
    ));
    assert!(
        msg.contains("spec.nodeID in body should be less than or equal to 57343"),
        "{msg}"
    );
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
    list["plugins"][1]["terminations"] = json!([{"network": "198.51.100.0/24", "gw": "10.0.0.1"}]);
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

/// Every file a kustomization at `dir` applies, through the directories it includes.
fn kustomized_files(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let doc: Value = serde_norway::from_str(&text).unwrap();
    let mut files = Vec::new();
    for resource in doc["resources"].as_array().unwrap() {
        let path = dir.join(resource.as_str().unwrap());
        if path.is_dir() {
            files.extend(kustomized_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The CRD names defined by `files`.
fn crds_in(files: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = files
        .iter()
        .flat_map(|f| documents(&std::fs::read_to_string(f).unwrap()))
        .filter_map(|d| serde_norway::from_str::<Value>(&d).ok())
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_production_kustomization_never_replaces_crds_and_the_dev_one_installs_ours() {
    let root = crate::workspace_root().join("deploy/kubernetes");
    let production = kustomized_files(&root);
    assert!(
        crds_in(&production).is_empty(),
        "deploy/kubernetes would replace the Galactic API's or Multus's CRDs: {production:?}"
    );
    assert!(production.iter().any(|f| f.ends_with("daemonset.yaml")));
    let dev = kustomized_files(&root.join("dev"));
    let mut ours: Vec<String> = galactic_kube::crds()
        .iter()
        .map(|(_, crd)| crd["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    ours.sort();
    assert_eq!(crds_in(&dev), ours, "deploy/kubernetes/dev");
    assert!(dev.iter().any(|f| f.ends_with("daemonset.yaml")));
}

#[test]
fn documents_split_only_at_column_zero_separators() {
    let docs = documents("a: 1\n---\nb: |\n  ---\n  x\n--- # c\nc: 3\n...\n");
    assert_eq!(docs.len(), 3, "{docs:?}");
    assert!(docs[1].contains("  ---"));
}

/// The DaemonSet under deploy/, as the lint reads it (anchors resolved).
fn shipped_daemonset() -> Value {
    let text =
        std::fs::read_to_string(crate::workspace_root().join("deploy/kubernetes/daemonset.yaml"))
            .unwrap();
    serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(&text).unwrap()).unwrap()
}

#[test]
fn the_shipped_daemonset_has_the_placement_mounts_and_privileges_a_datapath_needs() {
    let ds = shipped_daemonset();
    assert!(daemonset::is_ours(&ds));
    assert_eq!(daemonset::lint(&ds), Vec::<String>::new());
    let report = lint(
        &[crate::workspace_root().join("deploy/kubernetes")],
        &bin_dir(),
    )
    .unwrap();
    assert_eq!(report.daemonsets, 1, "{report:?}");
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
}

#[test]
fn a_daemonset_without_what_the_node_needs_fails_naming_it() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 13] = [
        (
            "no hostNetwork",
            |d| d["spec"]["template"]["spec"]["hostNetwork"] = false.into(),
            "hostNetwork",
        ),
        (
            "no affinity",
            |d| {
                d["spec"]["template"]["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("affinity");
            },
            "control-plane",
        ),
        (
            "control plane allowed",
            |d| {
                let exprs = d.pointer_mut("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions").unwrap();
                exprs.as_array_mut().unwrap().remove(0);
            },
            "control-plane",
        ),
        (
            "every node",
            |d| {
                let exprs = d.pointer_mut("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions").unwrap();
                exprs.as_array_mut().unwrap().remove(1);
            },
            "compute",
        ),
        (
            "no bpffs",
            |d| {
                let c = datapath_of(d);
                c["volumeMounts"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|m| m["mountPath"] != "/sys/fs/bpf");
            },
            "bpffs",
        ),
        (
            "bpffs created when absent",
            |d| {
                for v in d
                    .pointer_mut("/spec/template/spec/volumes")
                    .unwrap()
                    .as_array_mut()
                    .unwrap()
                {
                    if v["name"] == "bpf-fs" {
                        v["hostPath"]["type"] = "DirectoryOrCreate".into();
                    }
                }
            },
            "type Directory",
        ),
        (
            "no BPF capability",
            |d| {
                datapath_of(d)["securityContext"]["capabilities"]["add"] =
                    serde_json::json!(["NET_ADMIN"]);
            },
            "BPF",
        ),
        (
            "no PERFMON capability",
            |d| {
                datapath_of(d)["securityContext"]["capabilities"]["add"] =
                    serde_json::json!(["BPF", "NET_ADMIN"]);
            },
            "PERFMON",
        ),
        (
            "the datapath cannot rewrite its conflist",
            |d| {
                for m in datapath_of(d)["volumeMounts"].as_array_mut().unwrap() {
                    if m["mountPath"] == "/host/etc/cni/net.d" {
                        m["readOnly"] = true.into();
                    }
                }
            },
            "writable",
        ),
        (
            "a third writer of the datapath conflist",
            |d| {
                let refresh = d.pointer_mut("/spec/template/spec/containers/0").unwrap();
                assert_eq!(refresh["name"], "refresh-credentials");
                refresh["volumeMounts"].as_array_mut().unwrap().push(
                    serde_json::json!({"name": "galactic-etc", "mountPath": "/host/etc/galactic"}),
                );
            },
            "only install-cni and the datapath may write",
        ),
        (
            "privileged",
            |d| datapath_of(d)["securityContext"]["privileged"] = true.into(),
            "privileged",
        ),
        (
            "SYS_ADMIN",
            |d| {
                datapath_of(d)["securityContext"]["capabilities"]["add"] =
                    serde_json::json!(["BPF", "NET_ADMIN", "SYS_ADMIN"]);
            },
            "SYS_ADMIN",
        ),
        (
            "an upstream setting dropped",
            |d| {
                let install = d
                    .pointer_mut("/spec/template/spec/initContainers/0")
                    .unwrap();
                install["env"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|e| e["name"] != "GALACTIC_CNI_EGRESS_SHARD_SIDS");
            },
            "GALACTIC_CNI_EGRESS_SHARD_SIDS",
        ),
    ];
    for (what, edit, named) in cases {
        let mut ds = shipped_daemonset();
        edit(&mut ds);
        let problems = daemonset::lint(&ds);
        assert!(
            problems.iter().any(|p| p.contains(named)),
            "{what}: {problems:#?}"
        );
    }
}

fn datapath_of(ds: &mut Value) -> &mut Value {
    ds.pointer_mut("/spec/template/spec/containers")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "datapath")
        .unwrap()
}

#[test]
fn the_cluster_nads_as_kubectl_lists_them_are_linted_with_the_go_era_configs() {
    let nad_object = |name: &str, list: &Value| {
        json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
               "metadata": {"name": name, "namespace": "tenant"},
               "spec": {"config": list.to_string()}})
    };
    let mut zero_mtu = good_list("zero-mtu");
    zero_mtu["plugins"][0]["mtu"] = json!(0);
    let mut slash96 = good_list("slash96");
    slash96["plugins"][0]["ipam"]["ipv6_subnet"] = json!("fd20:10:ff01::/96");
    let mut extra_key = good_list("extra-key");
    extra_key["plugins"][1]["terminations"] =
        json!([{"network": "198.51.100.0/24", "gw": "10.0.0.1"}]);
    let listed = json!({"apiVersion": "v1", "kind": "List", "items": [
        nad_object("zero-mtu", &zero_mtu),
        nad_object("slash96", &slash96),
        nad_object("extra-key", &extra_key)]});
    // `kubectl get network-attachment-definitions -A -o json` (JSON is YAML).
    let report = lint_fixture("nads.yaml", &listed.to_string());
    assert_eq!(report.nads, 3, "every item of the List is a NAD");
    let finding = only_finding(&report);
    assert!(
        finding.contains("unknown key \"gw\"") && finding.contains("lint the NADs"),
        "{finding}"
    );
    assert!(
        report.findings[0].origin.contains("items[2] (extra-key)"),
        "{:?}",
        report.findings[0]
    );
}
