//! The campaign's checks on the lab: CHECK of every live attachment, and the invariant
//! ([`super::invariant`]) over what the node holds, read from the lab (files, published
//! documents, `ip -j`, `nft`, `galactic-ipam verify` and `list`).

use super::invariant::{self, Found, Ident, Kind, Population};
use super::{Campaign, Subject};
use crate::campaign::{Lab, CHAIN};
use galactic_testkit::harness::{io, json, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

impl Campaign<'_> {
    /// CHECK of every live attachment must pass; then the invariant.
    pub(super) fn check_live(&mut self) -> Result<()> {
        let failed: Vec<String> = self
            .live
            .iter()
            .flat_map(|a| chain_check(self.lab, a))
            .collect();
        self.report.violations.extend(failed);
        self.check("after ADD", false)
    }

    /// CHECK of the newest live attachment must pass; then the invariant.
    pub(super) fn check_newest(&mut self) -> Result<()> {
        let failed = self.live.last().map(|a| chain_check(self.lab, a));
        self.report.violations.extend(failed.into_iter().flatten());
        self.check("after ADD", false)
    }

    /// The live and gone attachments now.
    fn population(&self) -> Result<Population> {
        let live: Vec<Ident> = self
            .live
            .iter()
            .map(Subject::ident)
            .collect::<Result<_>>()?;
        let cids: BTreeSet<&str> = live.iter().map(|i| i.cid.as_str()).collect();
        let gone = self.all.iter().filter(|i| !cids.contains(i.cid.as_str()));
        let gone = gone.cloned().collect();
        Ok(Population { live, gone })
    }

    /// The invariant, `when` naming the moment; `after_gc` when a GC has just run (routing
    /// domains of VPCs without attachments are GC's to remove, not DEL's).
    pub(super) fn check(&mut self, when: &str, after_gc: bool) -> Result<()> {
        let pop = self.population()?;
        let mut found = self.ipam_duplicates(when)?;
        let holdings = ipam_holdings(self.lab)?;
        found.extend(node_leftovers(self.lab, &pop, after_gc)?);
        found.extend(invariant::ipam_allocations(&holdings, &pop));
        let mut allocated: BTreeSet<&str> = BTreeSet::new();
        allocated.extend(holdings.iter().filter_map(|h| h.split('/').next()));
        for live in &pop.live {
            if !allocated.contains(live.cid.as_str()) {
                let missing = format!("{when}: live {} has no IPAM allocation", live.cid);
                self.report.violations.push(missing);
            }
        }
        self.report.leftovers.observe(when, found);
        Ok(())
    }

    /// Addresses held twice: the store's own verification (its other problems are violations)
    /// and the live results.
    fn ipam_duplicates(&mut self, when: &str) -> Result<Vec<Found>> {
        let (_, _, problems) = self.lab.verify()?;
        let mut found = Vec::new();
        for p in problems {
            if p.contains("overlap") || p.contains("share") {
                found.push(Found::new(Kind::IpamDuplicates, p, None));
            } else {
                self.report.violations.push(format!("{when}: store: {p}"));
            }
        }
        let mut seen = BTreeMap::new();
        for a in &self.live {
            let result = a.result.as_ref();
            let ips = result.and_then(|r| r["ips"].as_array().cloned());
            for ip in ips.unwrap_or_default() {
                let addr = ip["address"].as_str().unwrap_or_default().to_owned();
                if let Some(other) = seen.insert(addr.clone(), a.cid.clone()) {
                    let item = format!("{addr} held by {other} and {}", a.cid);
                    found.push(Found::new(Kind::IpamDuplicates, item, None));
                }
            }
        }
        Ok(found)
    }
}

/// CHECK of `a` by every plugin of the chain, with its cached result: what failed.
fn chain_check(lab: &Lab, a: &Subject) -> Vec<String> {
    let list = a.conflist(lab);
    let cached = a.result.clone().unwrap_or(Value::Null);
    let mut failed = Vec::new();
    for (stage, plugin) in CHAIN.iter().enumerate() {
        let binary = lab.binary(plugin);
        let out = a
            .invocation(lab, &binary, "CHECK")
            .stdin(
                list.plugin_conf(stage, Some(&cached), &a.attachment())
                    .to_string(),
            )
            .run();
        if !out.success {
            failed.push(format!("CHECK {} {plugin}: {}", a.cid, out.stdout.trim()));
        }
    }
    failed
}

/// Every leftover the node holds but the IPAM store's: records, documents, temporaries, eBPF
/// registrations and rows, interfaces, kernel references and any other file naming a gone
/// attachment.
pub(super) fn node_leftovers(lab: &Lab, pop: &Population, after_gc: bool) -> Result<Vec<Found>> {
    let state = lab.state_dir();
    let mut found = invariant::master_records(&state, pop);
    if after_gc {
        found.extend(invariant::domain_records(&state, pop));
    }
    found.extend(invariant::route_entries(&state, pop));
    found.extend(invariant::vrf_instances(
        &lab.documents("bgpvrfinstances"),
        pop,
    ));
    found.extend(invariant::advertisements(
        &lab.documents("bgpadvertisements"),
        pop,
    ));
    found.extend(invariant::endpoint_slices(
        &lab.documents("endpointslices"),
        pop,
    ));
    // The tap's directories are the node's too: no attachment here writes them, and any
    // temporary or file naming one of ours there would be a leak all the same.
    let roots: Vec<PathBuf> = vec![state, lab.host.path("ra"), lab.host.path("dans")];
    let mut with_store = roots.clone();
    with_store.push(lab.ipam_dir());
    found.extend(invariant::temporaries(&with_store));
    found.extend(bpf_leftovers(lab, pop)?);
    let links = lab.host_links();
    found.extend(invariant::host_interfaces(&links, pop));
    let (rules, routes, nft) = kernel_items(lab);
    found.extend(invariant::kernel_references(
        &rules, &routes, &nft, &links, pop,
    ));
    let counted: BTreeSet<PathBuf> = found.iter().filter_map(|f| f.file.clone()).collect();
    found.extend(invariant::other_files(&roots, pop, &counted));
    Ok(found)
}

/// The eBPF registrations of gone attachments: their records, and the rows of the pinned maps
/// no live attachment owns.
fn bpf_leftovers(lab: &Lab, pop: &Population) -> Result<Vec<Found>> {
    let records = lab.bpf_records()?;
    let mut found = invariant::bpf_records(&lab.state_dir(), &records, pop);
    let ifindexes = lab.host_ifindexes();
    found.extend(invariant::ifindex_rows(
        &lab.ifindex_rows()?,
        &ifindexes,
        pop,
    ));
    found.extend(invariant::egress_rows(&lab.egress_rows()?, &records, pop));
    Ok(found)
}

/// The host's policy rules and routes of every table (one `ip -j` item each) and its nftables
/// ruleset.
fn kernel_items(lab: &Lab) -> (Vec<String>, Vec<String>, String) {
    let items = |argvs: [&[&str]; 2]| -> Vec<String> {
        let lists = argvs.map(|argv| lab.host.netns.ip_json(argv));
        let items = lists
            .iter()
            .flat_map(|l| l.as_array().into_iter().flatten());
        items.map(Value::to_string).collect()
    };
    let rules = items([&["-4", "rule", "show"], &["-6", "rule", "show"]]);
    let routes = items([
        &["-4", "route", "show", "table", "all"],
        &["-6", "route", "show", "table", "all"],
    ]);
    let nft = lab.host.netns.exec(&["nft", "list", "ruleset"]);
    (
        rules,
        routes,
        String::from_utf8_lossy(&nft.stdout).into_owned(),
    )
}

/// Every allocation of the lab's IPAM store as `<containerId>/<ifname>/<network>: <addresses>`
/// (`galactic-ipam list`); none before the store exists.
fn ipam_holdings(lab: &Lab) -> Result<Vec<String>> {
    if !lab.ipam_dir().join("ipam.db").exists() {
        return Ok(Vec::new());
    }
    let out = Command::new(lab.binary("galactic-ipam"))
        .args(["list", "--data-dir"])
        .arg(lab.ipam_dir())
        .output()
        .map_err(io("run galactic-ipam list"))?;
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).map_err(json(format!(
        "galactic-ipam list did not answer with a list: {}",
        String::from_utf8_lossy(&out.stderr)
    )))?;
    let line = |h: &Value| {
        let addresses: Vec<&str> = h["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let field = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
        let (cid, ifname, network) = (field("containerId"), field("ifname"), field("network"));
        format!("{cid}/{ifname}/{network}: {}", addresses.join(" "))
    };
    Ok(list.iter().map(line).collect())
}
