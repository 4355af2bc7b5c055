//! `demo`: the whole chain on one machine, no cluster needed.
//!
//! Builds and stages the plugins into a temporary CNI bin dir with a temporary node config (local
//! publisher, `auto` routing domain unless `--routing-domain` names one), then attaches network namespaces standing in for pods the
//! way a runtime does (master → route → bgp, prevResult threaded), shows their addresses, pings
//! inside a VPC and across VPCs, the VPC routing table, the published advertisements and the CHECK
//! results, DELs everything in reverse and verifies nothing is left. The plugins' "host" is a
//! namespace of its own, so the machine's own routes, rules, sysctls and firewall are never
//! touched. Ctrl-C stops at the next step and still cleans up.
//!
//! Before anything is built, [`preflight`] checks for root and runs `cargo xtask setup`'s demo
//! part, which installs every external command the demo needs that is missing.
//!
//! The scene is the test kit's: the host is a [`Host`], the pods are [`Pod`]s (throwaway
//! namespaces, deleted on drop whatever happens), and the chain runs through the test kit's
//! libcni-faithful [`Runtime`].

mod preflight;
mod show;

use anyhow::{bail, Context, Result};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// `cargo xtask demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build and stage release binaries (default: debug)
    #[arg(long)]
    pub release: bool,
    /// The node's routing-domain backend (`vrf` needs a kernel with VRF)
    #[arg(long, default_value = "auto", value_parser = ["auto", "vrf", "table"])]
    pub routing_domain: String,
    /// Stage the plugins already built in DIR instead of building them (the production-kernel
    /// tier's guest cannot build)
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
}

/// One demo pod: its name, VPC, attachment and chain.
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

/// The pods and the runtime attaching them, on a throwaway host.
struct Scene<'a> {
    host: &'a Host,
    runtime: Runtime<'a>,
    pods: Vec<Pod>,
}

pub fn run(args: &Args) -> Result<()> {
    // Before anything is built: a build takes minutes and is wasted when `nft` is missing.
    preflight::check_here(args.release && args.prebuilt.is_none())?;
    install_interrupt_handler();
    let plugins = match &args.prebuilt {
        Some(dir) => dir.clone(),
        None => step("build and stage the plugins", || stage(args.release))?,
    };
    let host = stage_host(&plugins, &args.routing_domain)?;
    let scene = Scene::new(&host);
    let outcome = scene.play();
    let cleanup = scene.teardown_check();
    drop(scene);
    drop(host);
    outcome?;
    cleanup?;
    println!("\ndemo: PASS (everything it created is gone)");
    Ok(())
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

/// The host namespace, the node (local publisher, the routing-domain backend, this node's router
/// settings) and a bin dir with the plugins.
fn stage_host(built: &Path, routing_domain: &str) -> Result<Host> {
    let host = Host::with_plugins_from(
        "demo-host",
        json!({"node_name": "demo-node", "routing_domain": routing_domain, "log_level": "info"}),
        built,
        &crate::stage::PLUGINS,
    )?;
    // This node's router settings, as a router on the node would read them.
    let router = state(&host).join("bgp/galactic-system/bgprouters");
    std::fs::create_dir_all(&router)?;
    std::fs::write(
        router.join("demo-router.json"),
        json!({
        "apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "demo-router", "namespace": "galactic-system"},
        "spec": {"targetRef": {"kind": "Node", "name": "demo-node"},
                 "localASN": 65000, "routerID": "192.0.2.1",
                 "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}]}})
        .to_string(),
    )?;
    println!(
        "[PASS] staged {} plugins into {}",
        crate::stage::PLUGINS.len(),
        host.bin_dir.display()
    );
    Ok(host)
}

/// The node's state directory (the test node's `state_dir`).
fn state(host: &Host) -> PathBuf {
    host.path("state")
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

impl<'a> Scene<'a> {
    fn new(host: &'a Host) -> Self {
        let pods = pod_specs()
            .iter()
            .map(|spec| Pod::new(&format!("demo-{}", spec.name)))
            .collect();
        Self {
            host,
            runtime: host.runtime(),
            pods,
        }
    }

    fn state(&self) -> PathBuf {
        state(self.host)
    }

    /// A pod's chain: master (with its IPAM) → route (when it terminates networks) → bgp.
    fn conflist(&self, spec: &PodSpec) -> Conflist {
        let ipam = spec.ipam.clone();
        let mut chain = vec![
            json!({"type": "galactic-cni", "vpc": spec.vpc, "vpcattachment": spec.att, "ipam": ipam}),
        ];
        if let Some(t) = &spec.terminations {
            chain.push(json!({"type": "galactic-route", "vpc": spec.vpc, "vpcattachment": spec.att, "terminations": t}));
        }
        chain.push(json!({"type": "galactic-bgp", "vpc": spec.vpc, "vpcattachment": spec.att}));
        Conflist::new(
            "1.1.0",
            &format!("vpc-{}", spec.vpc.to_ascii_lowercase()),
            chain,
        )
    }

    /// Pod `i` as the runtime sees it, with the Kubernetes-style `CNI_ARGS` a kubelet sends.
    fn attachment(&self, i: usize, spec: &PodSpec) -> Attachment {
        let mut att = self.pods[i].attachment();
        att.args = vec![
            ("K8S_POD_NAMESPACE".into(), "demo".into()),
            ("K8S_POD_NAME".into(), spec.name.into()),
        ];
        att
    }

    fn add(&self, i: usize, spec: PodSpec) -> Result<Attached> {
        let result = self
            .runtime
            .add(&self.conflist(&spec), &self.attachment(i, &spec))?;
        Ok(Attached { spec, result })
    }

    fn check(&self, i: usize, pod: &Attached) -> Result<()> {
        let list = self.conflist(&pod.spec);
        Ok(self.runtime.check(&list, &self.attachment(i, &pod.spec))?)
    }

    fn del(&self, i: usize, pod: &Attached) -> Result<()> {
        let list = self.conflist(&pod.spec);
        Ok(self.runtime.del(&list, &self.attachment(i, &pod.spec))?)
    }

    fn play(&self) -> Result<()> {
        let mut attached = Vec::new();
        let result = self.play_steps(&mut attached);
        // DEL whatever was attached, in reverse, whatever happened above.
        let mut del_errors = Vec::new();
        for (i, pod) in attached.iter().enumerate().rev() {
            if let Err(e) = self.del(i, pod) {
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
        show::addresses_table(attached);
        self.connectivity(attached)?;
        show::routing_table(self.host, &self.state(), &attached[0])?;
        show::advertisements(&self.state())?;
        for (i, pod) in attached.iter().enumerate() {
            step(
                &format!("CHECK {} (every plugin of its chain)", pod.spec.name),
                || self.check(i, pod),
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
            let mut master = self.conflist(&spec);
            master.plugins.truncate(1);
            self.runtime.gc(&master, &[])?;
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

    fn connectivity(&self, pods: &[Attached]) -> Result<()> {
        let checks = [(0, 1, true), (1, 0, true), (2, 0, false), (0, 2, false)];
        let failures = show::connectivity(pods, &checks, |from, ip| self.pods[from].ping(ip));
        println!(
            "[{}] pods of one VPC talk; VPCs are isolated",
            if failures == 0 { "PASS" } else { "FAIL" }
        );
        if failures > 0 {
            bail!("{failures} connectivity check(s) failed");
        }
        Ok(())
    }

    /// After DEL: no pod interface, no attachment record, no allocation, no rule for a pod.
    fn teardown_check(&self) -> Result<()> {
        step(
            "nothing is left: no interface, rule, record or allocation",
            || {
                let (_, links) = self.host.netns.try_ip(&["-o", "link", "show"]);
                let leftover_links = links.lines().filter(|l| l.contains(": G")).count();
                let (_, rules) = self.host.netns.try_ip(&["rule", "show"]);
                let leftover_rules = rules.lines().filter(|l| l.contains("iif G")).count();
                // Records and any temporary a write left (its empty staging directory is none).
                let records =
                    galactic_testkit::inspect::state_entries(&self.state().join("attachments"))
                        .len();
                let verify = Command::new(self.host.bin_dir.join("galactic-ipam"))
                    .args(["verify", "--data-dir"])
                    .arg(self.host.node.ipam_dir())
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
