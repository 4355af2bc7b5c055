//! `demo`: the whole chain on one machine, no cluster needed.
//!
//! Builds and stages the plugins into a temporary CNI bin dir with a temporary node config (local
//! publisher, `auto` routing domain unless `--routing-domain vrf|table` names one), then attaches network namespaces standing in for pods the
//! way a runtime does (master → route → bgp, prevResult threaded), shows their addresses, pings
//! inside a VPC and across VPCs, the VPC routing table, the published advertisements and the CHECK
//! results, DELs everything in reverse and verifies nothing is left. The plugins' "host" is a
//! namespace of its own, so the machine's own routes, rules, sysctls and firewall are never
//! touched. Ctrl-C stops at the next step and still cleans up. `--prebuilt DIR` stages the
//! plugins already built in DIR instead of building them (the production-kernel tier's guest
//! cannot build).

use crate::proc;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// One demo pod: its namespace, VPC, attachment and chain.
struct PodSpec {
    name: &'static str,
    vpc: &'static str,
    att: &'static str,
    ipam: Value,
    terminations: Option<Value>,
}

/// A pod after ADD.
struct Attached {
    spec: PodSpec,
    result: Value,
}

/// Everything the demo created, removed on drop in any case.
struct Scene {
    work: tempfile::TempDir,
    host: String,
    pods: Vec<String>,
    bins: PathBuf,
    routing_domain: String,
}

impl Drop for Scene {
    fn drop(&mut self) {
        for ns in self.pods.iter().chain(std::iter::once(&self.host)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

pub fn run(args: &[String]) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the demo creates network namespaces: run it as root (sudo -E cargo xtask demo)");
    }
    install_interrupt_handler();
    let release = args.iter().any(|a| a == "--release");
    let routing_domain = option(args, "--routing-domain")?.unwrap_or("auto");
    if !matches!(routing_domain, "auto" | "vrf" | "table") {
        bail!("--routing-domain {routing_domain:?}: expected auto, vrf or table");
    }
    let plugins = match option(args, "--prebuilt")? {
        Some(dir) => PathBuf::from(dir),
        None => step("build and stage the plugins", || stage(release))?,
    };
    let scene = Scene::new(plugins, routing_domain)?;
    let outcome = scene.play();
    let cleanup = scene.teardown_check();
    drop(scene);
    outcome?;
    cleanup?;
    println!("\ndemo: PASS (everything it created is gone)");
    Ok(())
}

/// The value of `--name VALUE`, if given.
fn option<'a>(args: &'a [String], name: &str) -> Result<Option<&'a str>> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .map(|v| Some(v.as_str()))
            .with_context(|| format!("{name} needs a value")),
    }
}

fn install_interrupt_handler() {
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_interrupt),
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let _ = unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGINT, &action) };
}

fn stage(release: bool) -> Result<PathBuf> {
    let dir = crate::stage::build_plugins(release)?;
    if !dir.join("galactic-cni").is_file() {
        bail!("build produced no galactic-cni in {}", dir.display());
    }
    Ok(dir)
}

/// Prints one step with PASS/FAIL.
fn step<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    let out = f();
    println!("[{}] {what}", if out.is_ok() { "PASS" } else { "FAIL" });
    out
}

fn pod_specs() -> Vec<PodSpec> {
    let dual =
        |v6: &str, v4: &str| json!({"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4});
    vec![
        PodSpec {
            name: "pod-a1",
            vpc: "A",
            att: "1",
            ipam: dual("fd10:a::/64", "10.10.0.0/24"),
            terminations: None,
        },
        PodSpec {
            name: "pod-a2",
            vpc: "A",
            att: "2",
            ipam: dual("fd10:a::/64", "10.10.0.0/24"),
            terminations: Some(json!([{"network": "fd10:ff::/64"}, {"network": "10.10.255.0/24"}])),
        },
        PodSpec {
            name: "pod-b1",
            vpc: "B",
            att: "1",
            ipam: json!({"type": "galactic-ipam", "ipv6_subnet": "fd20:b::/64"}),
            terminations: None,
        },
    ]
}

impl Scene {
    fn new(built: PathBuf, routing_domain: &str) -> Result<Self> {
        let work = tempfile::tempdir()?;
        let bins = work.path().join("opt/cni/bin");
        std::fs::create_dir_all(&bins)?;
        for plugin in crate::stage::PLUGINS {
            std::fs::copy(built.join(plugin), bins.join(plugin))
                .with_context(|| format!("stage {plugin}"))?;
        }
        let host = format!("galactic-demo-host-{}", std::process::id());
        ip(&["netns", "add", &host])?;
        ip(&["-n", &host, "link", "set", "lo", "up"])?;
        let mut scene = Self {
            work,
            host,
            pods: Vec::new(),
            bins,
            routing_domain: routing_domain.to_owned(),
        };
        scene.node_sysctls()?;
        scene.write_node_config()?;
        for spec in pod_specs() {
            let ns = format!("galactic-demo-{}-{}", spec.name, std::process::id());
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            scene.pods.push(ns);
        }
        println!(
            "[PASS] staged {} plugins into {}",
            crate::stage::PLUGINS.len(),
            scene.bins.display()
        );
        Ok(scene)
    }

    /// What a node running the plugins has: before 6.17 there is no per-interface
    /// `net.ipv6.conf.*.force_forwarding`, so IPv6 forwarding must be on for the whole host.
    fn node_sysctls(&self) -> Result<()> {
        if std::path::Path::new("/proc/sys/net/ipv6/conf/default/force_forwarding").exists() {
            return Ok(());
        }
        ip(&[
            "netns",
            "exec",
            &self.host,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.forwarding=1",
        ])?;
        println!(
            "[PASS] host: net.ipv6.conf.all.forwarding=1 (this kernel has no force_forwarding)"
        );
        Ok(())
    }

    fn state(&self) -> PathBuf {
        self.work.path().join("var/lib/galactic")
    }

    fn node_config(&self) -> PathBuf {
        self.work.path().join("etc/galactic/node.json")
    }

    fn write_node_config(&self) -> Result<()> {
        let config = json!({"node_name": "demo-node", "publisher": "local", "routing_domain": self.routing_domain,
            "state_dir": self.state(), "log_file": self.work.path().join("var/log/galactic/galactic-cni.log"),
            "log_level": "info"});
        std::fs::create_dir_all(self.node_config().parent().context("node config dir")?)?;
        std::fs::write(self.node_config(), serde_json::to_string_pretty(&config)?)?;
        // This node's router settings, as a router on the node would read them.
        let router = self.state().join("bgp/galactic-system/bgprouters");
        std::fs::create_dir_all(&router)?;
        std::fs::write(
            router.join("demo-router.json"),
            json!({
            "apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
            "metadata": {"name": "demo-router", "namespace": "galactic-system"},
            "spec": {"targetRef": {"kind": "Node", "name": "demo-node"}, "roles": ["tenant"],
                     "localASN": 65000, "routerID": "192.0.2.1"}})
            .to_string(),
        )?;
        Ok(())
    }

    fn chain(&self, spec: &PodSpec) -> Vec<Value> {
        let mut ipam = spec.ipam.clone();
        ipam["data_dir"] = json!(self.state().join("ipam"));
        let mut chain = vec![
            json!({"type": "galactic-cni", "vpc": spec.vpc, "vpcattachment": spec.att, "ipam": ipam}),
        ];
        if let Some(t) = &spec.terminations {
            chain.push(json!({"type": "galactic-route", "vpc": spec.vpc, "vpcattachment": spec.att, "terminations": t}));
        }
        chain.push(json!({"type": "galactic-bgp", "vpc": spec.vpc, "vpcattachment": spec.att}));
        chain
    }

    /// Runs one plugin of a pod's chain.
    fn call(
        &self,
        i: usize,
        spec: &PodSpec,
        stanza: &Value,
        command: &str,
        prev: Option<&Value>,
    ) -> Result<Value> {
        let mut conf = stanza.clone();
        conf["cniVersion"] = json!("1.1.0");
        conf["name"] = json!(format!("vpc-{}", spec.vpc.to_ascii_lowercase()));
        if let Some(prev) = prev {
            conf["prevResult"] = prev.clone();
        }
        let plugin = stanza["type"].as_str().unwrap_or_default();
        let env = vec![
            ("CNI_COMMAND", command.to_owned()),
            ("CNI_CONTAINERID", format!("demo-{}", spec.name)),
            ("CNI_NETNS", format!("/var/run/netns/{}", self.pods[i])),
            ("CNI_IFNAME", "eth0".to_owned()),
            ("CNI_PATH", self.bins.display().to_string()),
            (
                "CNI_ARGS",
                format!("K8S_POD_NAMESPACE=demo;K8S_POD_NAME={}", spec.name),
            ),
            (
                "GALACTIC_CNI_NODE_CONFIG",
                self.node_config().display().to_string(),
            ),
        ];
        let run = proc::run(
            &[&self.bins.join(plugin)],
            Some(&self.host),
            &env,
            conf.to_string().as_bytes(),
        )?;
        let out: Value = if run.stdout.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&run.stdout)?
        };
        if !run.status.success() {
            bail!(
                "{plugin} {command}: {}",
                out["msg"].as_str().unwrap_or("failed")
            );
        }
        Ok(out)
    }

    fn add(&self, i: usize, spec: PodSpec) -> Result<Attached> {
        let mut prev: Option<Value> = None;
        for stanza in self.chain(&spec) {
            prev = Some(self.call(i, &spec, &stanza, "ADD", prev.as_ref())?);
        }
        Ok(Attached {
            result: prev.unwrap_or(Value::Null),
            spec,
        })
    }

    fn each(&self, i: usize, pod: &Attached, command: &str) -> Result<()> {
        let mut chain = self.chain(&pod.spec);
        if command == "DEL" {
            chain.reverse();
        }
        for stanza in chain {
            self.call(i, &pod.spec, &stanza, command, Some(&pod.result))?;
        }
        Ok(())
    }

    fn play(&self) -> Result<()> {
        let mut attached = Vec::new();
        let result = self.play_steps(&mut attached);
        // DEL whatever was attached, in reverse, whatever happened above.
        let mut del_errors = Vec::new();
        for (i, pod) in attached.iter().enumerate().rev() {
            if let Err(e) = self.each(i, pod, "DEL") {
                del_errors.push(format!("{}: {e}", pod.spec.name));
            }
        }
        println!(
            "[{}] DEL every attachment (chain in reverse)",
            if del_errors.is_empty() {
                "PASS"
            } else {
                "FAIL"
            }
        );
        result?;
        step(
            "GC with no valid attachments removes the now unused routing domains",
            || self.gc(),
        )?;
        if !del_errors.is_empty() {
            bail!("DEL failed: {}", del_errors.join("; "));
        }
        Ok(())
    }

    fn play_steps(&self, attached: &mut Vec<Attached>) -> Result<()> {
        for (i, spec) in pod_specs().into_iter().enumerate() {
            let name = spec.name;
            let pod = step(
                &format!("ADD {name} (VPC {}, attachment {})", spec.vpc, spec.att),
                || self.add(i, spec),
            )?;
            attached.push(pod);
        }
        print_addresses(attached);
        self.connectivity(attached)?;
        self.show_table(&attached[0])?;
        self.show_advertisements()?;
        for (i, pod) in attached.iter().enumerate() {
            step(
                &format!("CHECK {} (every plugin of its chain)", pod.spec.name),
                || self.each(i, pod, "CHECK"),
            )?;
        }
        Ok(())
    }

    /// CNI GC through the master, as a runtime sends it when it knows of no attachment.
    fn gc(&self) -> Result<()> {
        for vpc in ["A", "B"] {
            let spec = pod_specs()
                .into_iter()
                .find(|p| p.vpc == vpc)
                .context("a pod of the VPC")?;
            let mut master = self.chain(&spec)[0].clone();
            master["cni.dev/valid-attachments"] = json!([]);
            master["cniVersion"] = json!("1.1.0");
            master["name"] = json!(format!("vpc-{}", vpc.to_ascii_lowercase()));
            let env = vec![
                ("CNI_COMMAND", "GC".to_owned()),
                ("CNI_PATH", self.bins.display().to_string()),
                (
                    "GALACTIC_CNI_NODE_CONFIG",
                    self.node_config().display().to_string(),
                ),
            ];
            let run = proc::run(
                &[&self.bins.join("galactic-cni")],
                Some(&self.host),
                &env,
                master.to_string().as_bytes(),
            )?;
            if !run.status.success() {
                bail!("GC: {}", String::from_utf8_lossy(&run.stdout));
            }
        }
        let domains = std::fs::read_dir(self.state().join("routing"))?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("vpc-"))
            .count();
        if domains > 0 {
            bail!("{domains} routing domain(s) left after GC");
        }
        Ok(())
    }

    fn ping(&self, from: usize, target: &str) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.pods[from],
                "ping",
                family,
                "-c",
                "1",
                "-W",
                "1",
                target,
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn connectivity(&self, pods: &[Attached]) -> Result<()> {
        println!(
            "\n{:<10} {:<10} {:<26} {:<10} {:<10} result",
            "from", "to", "address", "expected", "got"
        );
        let mut failures = 0;
        let checks = [(0, 1, true), (1, 0, true), (2, 0, false), (0, 2, false)];
        for (from, to, expected) in checks {
            for ip in addresses(&pods[to].result) {
                let got = self.ping(from, &ip);
                let ok = got == expected;
                failures += usize::from(!ok);
                println!(
                    "{:<10} {:<10} {:<26} {:<10} {:<10} {}",
                    pods[from].spec.name,
                    pods[to].spec.name,
                    ip,
                    if expected { "reach" } else { "isolated" },
                    if got { "reached" } else { "no reply" },
                    if ok { "PASS" } else { "FAIL" }
                );
            }
        }
        println!(
            "[{}] pods of one VPC talk; VPCs are isolated",
            if failures == 0 { "PASS" } else { "FAIL" }
        );
        if failures > 0 {
            bail!("{failures} connectivity check(s) failed");
        }
        Ok(())
    }

    fn show_table(&self, pod: &Attached) -> Result<()> {
        let vpc = galactic_core::ident::VpcId::parse(pod.spec.vpc)?;
        let record = self.state().join(format!("routing/vpc-{}.json", vpc.hex()));
        let domain: Value = serde_json::from_slice(&std::fs::read(record)?)?;
        let table = domain["table"].to_string();
        println!(
            "\nVPC {} routing domain: backend {}, table {table}",
            pod.spec.vpc, domain["backend"]
        );
        if self.routing_domain != "auto" && domain["backend"] != self.routing_domain.as_str() {
            bail!(
                "routing_domain is {} but the domain's backend is {}",
                self.routing_domain,
                domain["backend"]
            );
        }
        for family in ["-4", "-6"] {
            let out = Command::new("ip")
                .args(["-n", &self.host, family, "route", "show", "table", &table])
                .output()?;
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                println!("  {line}");
            }
        }
        Ok(())
    }

    fn show_advertisements(&self) -> Result<()> {
        let dir = self.state().join("bgp/galactic-system/bgpadvertisements");
        println!("\n{:<16} {:<14} prefixes", "advertisement", "communities");
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("read {}", dir.display()))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let doc: Value = serde_json::from_slice(&std::fs::read(entry.path())?)?;
            let list = |v: &Value| {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default()
            };
            println!(
                "{:<16} {:<14} {}",
                doc["metadata"]["name"].as_str().unwrap_or(""),
                list(&doc["spec"]["communities"]),
                list(&doc["spec"]["prefixes"])
            );
        }
        Ok(())
    }

    /// After DEL: no pod interface, no attachment record, no allocation, no rule for a pod.
    fn teardown_check(&self) -> Result<()> {
        step(
            "nothing is left: no interface, rule, record or allocation",
            || {
                let links = Command::new("ip")
                    .args(["-n", &self.host, "-o", "link", "show"])
                    .output()?;
                let leftover_links = String::from_utf8_lossy(&links.stdout)
                    .lines()
                    .filter(|l| l.contains(": G"))
                    .count();
                let rules = Command::new("ip")
                    .args(["-n", &self.host, "rule", "show"])
                    .output()?;
                let leftover_rules = String::from_utf8_lossy(&rules.stdout)
                    .lines()
                    .filter(|l| l.contains("iif G"))
                    .count();
                let records = std::fs::read_dir(self.state().join("attachments"))
                    .map(|d| d.count())
                    .unwrap_or(0);
                let verify = Command::new(self.bins.join("galactic-ipam"))
                    .args([
                        "verify",
                        "--data-dir",
                        &self.state().join("ipam").display().to_string(),
                    ])
                    .output()?;
                let report: Value = serde_json::from_slice(&verify.stdout).unwrap_or(Value::Null);
                let leases = report["leases"].as_u64().unwrap_or(u64::MAX);
                if leftover_links + leftover_rules + records > 0
                    || leases > 0
                    || !verify.status.success()
                {
                    bail!("left behind: {leftover_links} interface(s), {leftover_rules} rule(s), {records} record(s), {leases} allocation(s); store report: {report}");
                }
                Ok(())
            },
        )
    }
}

fn addresses(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .map(|ips| {
            ips.iter()
                .filter_map(|ip| ip["address"].as_str())
                .map(|a| a.split('/').next().unwrap_or(a).to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn print_addresses(pods: &[Attached]) {
    println!(
        "\n{:<8} {:<4} {:<4} {:<16} {:<6} addresses",
        "pod", "VPC", "att", "host interface", "iface"
    );
    for pod in pods {
        let ips: Vec<&str> = pod.result["ips"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["address"].as_str()).collect())
            .unwrap_or_default();
        println!(
            "{:<8} {:<4} {:<4} {:<16} {:<6} {}",
            pod.spec.name,
            pod.spec.vpc,
            pod.spec.att,
            pod.result["interfaces"][0]["name"].as_str().unwrap_or(""),
            pod.result["interfaces"][1]["name"].as_str().unwrap_or(""),
            ips.join(", ")
        );
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let status = Command::new("ip").args(args).status().context("run ip")?;
    if !status.success() {
        bail!("ip {} failed", args.join(" "));
    }
    Ok(())
}
