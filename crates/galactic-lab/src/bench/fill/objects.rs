//! The kernel objects of a host namespace, counted the way an operator would list them: links,
//! policy rules and routes of every table per family, and nftables rules.

use galactic_testkit::privileged::TestNetns;
use serde_json::Value;

/// Counts of one namespace's kernel objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Objects {
    /// Links (`lo` included).
    pub links: usize,
    /// IPv4 policy rules (the kernel's three defaults included).
    pub rules4: usize,
    /// IPv6 policy rules (the kernel's two defaults included).
    pub rules6: usize,
    /// IPv4 routes of every table (`local` included).
    pub routes4: usize,
    /// IPv6 routes of every table (`local` and link-local included).
    pub routes6: usize,
    /// nftables rules of every table.
    pub nft_rules: usize,
}

impl Objects {
    /// The counts of `ns` now.
    pub fn count(ns: &TestNetns) -> Self {
        let items = |args: &[&str]| ns.ip_json(args).as_array().map_or(0, Vec::len);
        Self {
            links: items(&["link", "show"]),
            rules4: items(&["-4", "rule", "show"]),
            rules6: items(&["-6", "rule", "show"]),
            routes4: items(&["-4", "route", "show", "table", "all"]),
            routes6: items(&["-6", "route", "show", "table", "all"]),
            nft_rules: nft_rules(ns),
        }
    }

    /// The counts as a row: links, rules (4, 6), routes (4, 6), nft rules.
    pub fn as_array(&self) -> [usize; 6] {
        [
            self.links,
            self.rules4,
            self.rules6,
            self.routes4,
            self.routes6,
            self.nft_rules,
        ]
    }
}

/// Rules in `nft -j list ruleset` (0 when nft is missing or lists nothing).
fn nft_rules(ns: &TestNetns) -> usize {
    let out = ns.exec(&["nft", "-j", "list", "ruleset"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    listed["nftables"].as_array().map_or(0, |items| {
        items.iter().filter(|i| i.get("rule").is_some()).count()
    })
}
