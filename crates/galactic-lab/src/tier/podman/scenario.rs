//! What the Podman tier does with its containers, step by step, each printed PASS or FAIL.
//!
//! Networks are the example conflists of `deploy/cni/`: `12-veth-dual-stack` (VPC C) as it is
//! and twice more with another VPC attachment (one attachment per container and node), and
//! `15-veth-terminations` (VPC F) as it is.

use super::engine::Engine;
use super::report::{both, diff, expect_eq, step};
use crate::tier::{Chain, Context, Result, Workspace};
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::host::{Host, PLUGINS};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

/// A container's network identity as Podman reports it and as the container sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    ipv6: String,
    ipv4: String,
    mac: String,
}

/// The tier's host, Podman and networks.
struct Scene {
    host: Host,
    engine: Engine,
    /// (network name, conflist) for VPC C attachments 1, 2, 3 and VPC F.
    nets: Vec<Conflist>,
}

/// Runs every step; tears everything down whatever happened.
pub fn run(plugins: &Path, workspace: &Workspace) -> Result<()> {
    let scene = step(
        "stage the plugins, Podman's configuration and the busybox image",
        || Scene::new(plugins, workspace),
    )?;
    let outcome = scene.play();
    let teardown = scene.teardown();
    outcome.and(teardown)
}

impl Scene {
    fn new(plugins: &Path, workspace: &Workspace) -> Result<Self> {
        let host = Host::with_plugins_from(
            "podman",
            json!({"node_name": "podman-node", "routing_domain": "auto", "log_level": "info"}),
            plugins,
            &PLUGINS,
        )?;
        let engine = Engine::start(
            workspace,
            &host.bin_dir,
            &host.node.node_config,
            host.netns.name(),
        )?;
        let dual = example(workspace, "12-veth-dual-stack.conflist")?;
        let nets = vec![
            dual.clone(),
            with_attachment(&dual, "2"),
            with_attachment(&dual, "3"),
            example(workspace, "15-veth-terminations.conflist")?,
        ];
        for net in &nets {
            engine.add_network(&net.to_value())?;
        }
        Ok(Self { host, engine, nets })
    }

    fn net(&self, i: usize) -> &str {
        &self.nets[i].name
    }

    /// The scenario, in five phases: attach, reach and isolation, restarts, refusals, removal.
    fn play(&self) -> Result<()> {
        let baseline = self.kernel_view();
        let started = Instant::now();
        let [c1, c2, f1] = self.attach()?;
        self.reach_and_isolation(&c1, &c2, &f1)?;
        self.restarts(&c1, &c2, &f1)?;
        self.refusals(&c1)?;
        self.removal(&baseline)?;
        println!(
            "[NOTE] left by design for the node's lifetime: the table backend's local rule at 32765 and \
             the host-services and VPC-mark chains (and the empty map) of nftables table inet galactic \
             (node-wide, made by the first ADD)"
        );
        println!(
            "test-podman: scenario {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// c1 and c2 in VPC C (c2 with --ip, --ip6, --mac-address), f1 in VPC F (--ip alone), as
    /// podman inspect shows them.
    fn attach(&self) -> Result<[Seen; 3]> {
        let [c, c2, f] = [self.net(0), self.net(1), self.net(3)];
        step("run c1 (VPC C, addresses from the pool)", || {
            self.run("c1", &["--network", c])
        })?;
        step(
            "run c2 (VPC C) with --ip, --ip6 and --mac-address: the ips capability and MAC=",
            || {
                self.run(
                    "c2",
                    &[
                        "--network",
                        c2,
                        "--ip",
                        "10.21.3.77",
                        "--ip6",
                        "fd20:10:ff03::77:5",
                        "--mac-address",
                        "02:00:00:00:00:42",
                    ],
                )
            },
        )?;
        step("run f1 (VPC F) with --ip alone: IP= in CNI_ARGS", || {
            self.run("f1", &["--network", f, "--ip", "10.21.6.50"])
        })?;
        let c1 = step("podman inspect shows what the plugins configured", || {
            let c1 = self.seen("c1", c)?;
            let c2 = self.seen("c2", c2)?;
            let f1 = self.seen("f1", f)?;
            expect_eq(
                "c2",
                (c2.ipv4.as_str(), c2.ipv6.as_str(), c2.mac.as_str()),
                ("10.21.3.77", "fd20:10:ff03::77:5", "02:00:00:00:00:42"),
            )?;
            expect_eq("f1", f1.ipv4.as_str(), "10.21.6.50")?;
            println!("       c1 {} {} {}", c1.ipv6, c1.ipv4, c1.mac);
            println!("       c2 {} {} {}", c2.ipv6, c2.ipv4, c2.mac);
            println!("       f1 {} {} {}", f1.ipv6, f1.ipv4, f1.mac);
            Ok(c1)
        })?;
        let c2_seen = self.seen("c2", c2)?;
        let f1_seen = self.seen("f1", f)?;
        Ok([c1, c2_seen, f1_seen])
    }

    /// One VPC's containers reach each other; another VPC's do not.
    fn reach_and_isolation(&self, c1: &Seen, c2_seen: &Seen, f1_seen: &Seen) -> Result<()> {
        step(
            "c1 and c2 (one VPC) reach each other over IPv6 and IPv4",
            || {
                self.reach("c1", &[&c2_seen.ipv6, &c2_seen.ipv4])?;
                self.reach("c2", &[&c1.ipv6, &c1.ipv4])
            },
        )?;
        step("f1 (another VPC) and c1 do not reach each other", || {
            both(
                || self.isolated("c1", &[&f1_seen.ipv6, &f1_seen.ipv4]),
                || self.isolated("f1", &[&c1.ipv6, &c1.ipv4]),
            )
        })?;
        Ok(())
    }

    /// restart, stop and start, network reload: the addresses (and, where asked, the MAC) stay.
    fn restarts(&self, c1: &Seen, c2_seen: &Seen, f1_seen: &Seen) -> Result<()> {
        let [c, c2, f] = [self.net(0), self.net(1), self.net(3)];
        step(
            "podman restart keeps c1's addresses (DEL, then ADD asking nothing)",
            || {
                self.engine.ok(&["restart", "--time", "0", "c1"])?;
                let after = self.seen("c1", c)?;
                expect_eq(
                    "c1 after restart",
                    (&after.ipv6, &after.ipv4),
                    (&c1.ipv6, &c1.ipv4),
                )?;
                self.reach("c2", &[&c1.ipv6, &c1.ipv4])
            },
        )?;
        // A started container gets a new random MAC (Podman asks for none), the same addresses.
        let c1_started = step(
            "podman stop detaches c1, and start gives it its addresses back",
            || {
                self.engine.ok(&["stop", "--time", "0", "c1"])?;
                self.gone("C", "1")?;
                self.engine.ok(&["start", "c1"])?;
                let after = self.seen("c1", c)?;
                expect_eq(
                    "c1 after stop and start",
                    (&after.ipv6, &after.ipv4),
                    (&c1.ipv6, &c1.ipv4),
                )?;
                self.reach("c2", &[&c1.ipv6, &c1.ipv4])?;
                Ok(after)
            },
        )?;
        step(
            "podman network reload --all keeps every container's addresses and MAC (it asks for them back)",
            || {
                self.engine.ok(&["network", "reload", "--all"])?;
                expect_eq("c1 after reload", &self.seen("c1", c)?, &c1_started)?;
                expect_eq("c2 after reload", &self.seen("c2", c2)?, c2_seen)?;
                expect_eq("f1 after reload", &self.seen("f1", f)?, f1_seen)?;
                both(
                    || self.reach("c1", &[&c2_seen.ipv6, &c2_seen.ipv4]),
                    || self.isolated("f1", &[&c1.ipv6, &c1.ipv4]),
                )
            },
        )?;
        Ok(())
    }

    /// Requests that cannot be granted are refused with the plugin's message.
    fn refusals(&self, c1: &Seen) -> Result<()> {
        let c3 = self.net(2);
        step(
            "requests that cannot be granted are refused with the plugin's message",
            || {
                self.refused(
                    "r1",
                    &["--network", c3, "--ip", "10.99.0.5"],
                    "requested address 10.99.0.5 is outside the pool 10.21.3.0/24",
                )?;
                self.refused(
                    "r2",
                    &["--network", c3, "--ip", &c1.ipv4],
                    &format!(
                        "requested address {} is in use by another attachment",
                        c1.ipv4
                    ),
                )?;
                self.refused(
                    "r3",
                    &["--network", c3, "--mac-address", "01:00:5e:00:00:01"],
                    "requested MAC 01:00:5e:00:00:01 (from CNI_ARGS MAC) is a multicast address",
                )?;
                self.gone("C", "3")
            },
        )?;
        Ok(())
    }

    /// Containers that exit, run with --rm or are removed leave nothing: once the last one of a
    /// VPC is gone, its routing domain is too, and the host namespace is back at `baseline`
    /// without a GC (Podman 4.3 never sends one); the chain's GC then changes nothing.
    fn removal(&self, baseline: &[String]) -> Result<()> {
        let c3 = self.net(2);
        step(
            "a container that exits on its own is detached (the cleanup Podman has the node config)",
            || {
                let args = self.engine.run_args("e1", &["--network", c3], &["sleep", "1"]);
                self.engine.ok(&args)?;
                self.wait_until("e1's attachment is removed", || self.gone("C", "3").is_ok())
            },
        )?;
        step(
            "podman run --rm: the attachment goes with the container",
            || {
                let args = self
                    .engine
                    .run_args("e2", &["--rm", "--network", c3], &["sleep", "1"]);
                self.engine.ok(&args)?;
                self.wait_until("e2's attachment is removed", || self.gone("C", "3").is_ok())
                    .with_context(|| self.explain_e2())?;
                self.podman_removes_e2()
            },
        )?;
        step(
            "podman rm leaves no interface, rule, record, allocation or namespace",
            || {
                self.engine
                    .ok(&["rm", "--force", "--time", "0", "c1", "c2", "f1", "e1"])?;
                for (vpc, att) in [("C", "1"), ("C", "2"), ("F", "1")] {
                    self.gone(vpc, att)?;
                }
                self.nothing_attached()
            },
        )?;
        step(
            "the DELs of each VPC's last container removed its routing domain: links, routes and rules are as they began",
            || self.as_it_began(baseline),
        )?;
        step(
            "the chain's GC then has nothing left to remove, and changes nothing",
            || {
                for net in &self.nets {
                    self.host.runtime().gc(&net.with_version("1.1.0"), &[])?;
                }
                self.as_it_began(baseline)
            },
        )?;
        Ok(())
    }

    /// The host namespace equals `baseline`, and no routing domain is recorded.
    fn as_it_began(&self, baseline: &[String]) -> Result<()> {
        let now = self.kernel_view();
        if now != baseline {
            fail!("the host namespace differs: {}", diff(baseline, &now));
        }
        let domains = self.files("state/routing", "vpc-");
        if !domains.is_empty() {
            fail!("routing domain records left: {domains:?}");
        }
        Ok(())
    }

    fn teardown(self) -> Result<()> {
        let Scene { host, engine, .. } = self;
        let engine = engine.teardown();
        drop(host);
        engine
    }

    fn run(&self, name: &str, flags: &[&str]) -> Result<()> {
        self.engine
            .ok(&self.engine.run_args(name, flags, &["sleep", "3600"]))
            .map(drop)
    }

    /// `podman run` that must fail with `want` in its message, leaving no attachment.
    fn refused(&self, name: &str, flags: &[&str], want: &str) -> Result<()> {
        let out = self
            .engine
            .podman(&self.engine.run_args(name, flags, &["sleep", "3600"]));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        // Podman keeps the container it could not start; it goes like any other.
        self.engine.ok(&["rm", "--force", "--time", "0", name])?;
        if out.status.success() {
            fail!(
                "podman run {} succeeded; it must be refused",
                flags.join(" ")
            );
        }
        if !stderr.contains(want) {
            fail!(
                "podman run {}: expected {want:?} in {stderr:?}",
                flags.join(" ")
            );
        }
        println!(
            "       refused: {}",
            stderr.lines().last().unwrap_or_default().trim()
        );
        Ok(())
    }

    /// The container's addresses and MAC as `podman inspect` shows them, checked against what
    /// the container's own eth0 has.
    fn seen(&self, name: &str, network: &str) -> Result<Seen> {
        let text = self.engine.ok(&[
            "inspect",
            "--format",
            "{{json .NetworkSettings.Networks}}",
            name,
        ])?;
        let nets: Value = serde_json::from_str(&text).context("podman inspect output")?;
        let net = &nets[network];
        let field = |key: &str| net[key].as_str().unwrap_or_default().to_owned();
        let seen = Seen {
            ipv6: field("GlobalIPv6Address"),
            ipv4: field("IPAddress"),
            mac: field("MacAddress"),
        };
        let addrs = self
            .engine
            .ok(&["exec", name, "ip", "-o", "addr", "show", "dev", "eth0"])?;
        let mac = self
            .engine
            .ok(&["exec", name, "cat", "/sys/class/net/eth0/address"])?;
        for ip in [&seen.ipv6, &seen.ipv4] {
            if ip.is_empty() || !addrs.contains(&format!(" {ip}/")) {
                fail!("{name}: podman inspect says {ip:?}, eth0 in the container has {addrs}");
            }
        }
        expect_eq(
            &format!("{name}'s MAC (inspect, container)"),
            &seen.mac,
            &mac,
        )?;
        Ok(seen)
    }

    /// Every target answers one ping from `from` (ping stops at the first reply).
    fn reach(&self, from: &str, targets: &[&String]) -> Result<()> {
        for (target, answered) in self.pings(from, targets, "3") {
            if !answered {
                fail!("{from} does not reach {target}");
            }
        }
        Ok(())
    }

    /// No target answers a ping from `from` within a second.
    fn isolated(&self, from: &str, targets: &[&String]) -> Result<()> {
        for (target, answered) in self.pings(from, targets, "1") {
            if answered {
                fail!("{from} reaches {target} in another VPC");
            }
        }
        Ok(())
    }

    /// One ping from `from` to each target, all at once (a lost ping costs its whole wait).
    fn pings<'t>(&self, from: &str, targets: &[&'t String], wait: &str) -> Vec<(&'t str, bool)> {
        std::thread::scope(|scope| {
            let pending: Vec<_> = targets
                .iter()
                .map(|target| {
                    let args = ["exec", from, "ping", "-c", "1", "-W", wait, target.as_str()];
                    (
                        target.as_str(),
                        scope.spawn(move || self.engine.podman(&args)),
                    )
                })
                .collect();
            pending
                .into_iter()
                .map(|(target, ping)| (target, ping.join().is_ok_and(|out| out.status.success())))
                .collect()
        })
    }

    /// Nothing of VPC `vpc`'s attachment `att` is on the node: no host interface, no record.
    fn gone(&self, vpc: &str, att: &str) -> Result<()> {
        let name = host_ifname(&VpcId::parse(vpc)?, &AttachmentId::parse(att)?);
        if self.host.netns.try_ip(&["link", "show", &name]).0 {
            fail!("host interface {name} is still there");
        }
        let record = self.host.path("state").join("attachments").join(&name);
        if std::fs::read_dir(self.host.path("state").join("attachments"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&name))
        {
            fail!("attachment record {} is still there", record.display());
        }
        Ok(())
    }

    /// No host interface, no rule or nftables rule naming one, no record, no allocation, no
    /// container namespace, no libcni cache entry.
    fn nothing_attached(&self) -> Result<()> {
        let ns = &self.host.netns;
        let nft = ns.exec(&["nft", "list", "ruleset"]);
        let kernel = [
            ns.ip(&["-o", "link", "show"]),
            ns.ip(&["-4", "rule", "show"]),
            ns.ip(&["-6", "rule", "show"]),
            String::from_utf8_lossy(&nft.stdout).into_owned(),
        ];
        for text in &kernel {
            if let Some(line) = text.lines().find(|l| names_host_interface(l)) {
                fail!("the host namespace still has {line:?}");
            }
        }
        // Per attachment nothing may stay; per node and per VPC only what outlives a container
        // by design: lock files, the routing directory's backend cache and lock (the domains
        // themselves go with each VPC's last container: the next step checks), the local
        // publisher's resourceVersion counter (it only grows) and galactic-bgp's marker that the
        // node's publication records were seeded (once per node). galactic-bgp's publications go
        // with the VPC's last attachment on the node (its DEL retracts them).
        let state = self.host.path("state");
        let records: Vec<String> = self
            .files("state", "")
            .into_iter()
            .filter(|f| {
                let relative = Path::new(f).strip_prefix(&state).unwrap_or(Path::new(f));
                let first = relative.components().next().map(|c| c.as_os_str());
                !(f.ends_with(".lock")
                    || relative == Path::new("bgp/revision")
                    || relative == Path::new("bgp-attachments/seeded")
                    || first.is_some_and(|c| ["locks", "routing"].map(OsStr::new).contains(&c)))
            })
            .collect();
        if !records.is_empty() {
            fail!("records left in the state dir: {records:?}");
        }
        let verify = std::process::Command::new(self.host.bin_dir.join("galactic-ipam"))
            .args(["verify", "--data-dir"])
            .arg(self.host.node.ipam_dir())
            .output()?;
        let report: Value = serde_json::from_slice(&verify.stdout).unwrap_or(Value::Null);
        if !verify.status.success() || report["attachments"] != 0 || report["leases"] != 0 {
            fail!("the IPAM store still holds something: {report}");
        }
        let netns = self.engine.inside(&["ls", "/run/netns"])?;
        let cache = self.engine.inside(&["ls", "/var/lib/cni/results"])?;
        if !netns.trim().is_empty() || !cache.trim().is_empty() {
            fail!(
                "left in Podman's namespace: /run/netns [{netns}], /var/lib/cni/results [{cache}]"
            );
        }
        Ok(())
    }

    /// What is left of e2 when its removal did not come: whether the container and the
    /// attachment are there, and the plugins' last log lines, so a failure says where it stopped.
    /// Removing the container is the job of the cleanup Podman that conmon starts, after the
    /// plugins' DEL has succeeded; once in a while (seen once in CI with Podman 4.3.1, the DELs
    /// all logged done) that process leaves the exited container. The plugins' part is then
    /// done, so the tier says so with what Podman recorded, and removes e2 itself: a second
    /// teardown of an attachment already gone must succeed and leave nothing.
    fn podman_removes_e2(&self) -> Result<()> {
        let exists = || self.engine.ok(&["container", "exists", "e2"]).is_ok();
        if self.wait_until("Podman removes e2", || !exists()).is_ok() {
            return Ok(());
        }
        let state = self
            .engine
            .ok(&["inspect", "--format", "{{.State.Status}}", "e2"])
            .unwrap_or_else(|e| e.to_string());
        println!(
            "       note: Podman's cleanup process left e2 ({state}) after the plugins' DEL; its events: {}",
            self.engine.events_of("e2").join(" | ")
        );
        self.engine.ok(&["rm", "--force", "--time", "0", "e2"])?;
        if exists() {
            fail!("podman rm could not remove e2");
        }
        self.gone("C", "3")
    }

    fn explain_e2(&self) -> String {
        let container = match self.engine.ok(&["container", "exists", "e2"]) {
            Ok(_) => "container e2 still exists",
            Err(_) => "container e2 is gone",
        };
        let attachment = match self.gone("C", "3") {
            Ok(()) => "its attachment is gone".to_owned(),
            Err(e) => Chain(&e).to_string(),
        };
        let log = std::fs::read_to_string(self.host.path("galactic.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{container}; {attachment}; the plugins' last log lines:\n{}",
            tail.join("\n")
        )
    }

    fn wait_until(&self, what: &str, done: impl Fn() -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if done() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        fail!("{what}: not within 20 s")
    }

    /// The host namespace's links, routes and rules, with the local rule's priority left out
    /// (the table backend moves it once per node, below its per-VPC rules).
    fn kernel_view(&self) -> Vec<String> {
        let ns = &self.host.netns;
        let mut out = vec![
            ns.ip(&["-o", "link", "show"]),
            ns.ip(&["-4", "route", "show", "table", "all"]),
            ns.ip(&["-6", "route", "show", "table", "all"]),
        ];
        for family in ["-4", "-6"] {
            let rules: Vec<String> = ns
                .ip(&[family, "rule", "show"])
                .lines()
                .map(|l| match l.split_once(':') {
                    Some((_, rule)) if rule.trim() == "from all lookup local" => {
                        rule.trim().to_owned()
                    }
                    _ => l.to_owned(),
                })
                .collect();
            out.push(rules.join("\n"));
        }
        out
    }

    /// The files under the node's `dir` whose names start with `prefix`.
    fn files(&self, dir: &str, prefix: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![self.host.path(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if entry.file_name().to_string_lossy().starts_with(prefix)
                    && !path.ends_with("lock")
                {
                    found.push(path.display().to_string());
                }
            }
        }
        found
    }
}

/// Whether `line` names a host interface (`G` + 9 + 3 base62 digits + `H`).
fn names_host_interface(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes
        .windows(14)
        .any(|w| w[0] == b'G' && w[13] == b'H' && w[1..13].iter().all(u8::is_ascii_alphanumeric))
}

/// An example conflist of the workspace's `deploy/cni/`.
fn example(workspace: &Workspace, file: &str) -> Result<Conflist> {
    let path = workspace.root.join("deploy/cni").join(file);
    Ok(Conflist::from_file(&path)?)
}

/// `list` for another VPC attachment of the same VPC: every plugin's `vpcattachment` and the
/// network name change.
fn with_attachment(list: &Conflist, att: &str) -> Conflist {
    let mut out = list.clone();
    out.name = format!("{}-{att}", list.name);
    for plugin in &mut out.plugins {
        plugin["vpcattachment"] = json!(att);
    }
    out
}
