//! What the demo prints about its scene: addresses, the connectivity matrix, a VPC routing
//! table and the published advertisements.

use super::Attached;
use anyhow::{bail, Context, Result};
use galactic_testkit::host::Host;
use serde_json::Value;
use std::path::Path;

/// The bare addresses of a result.
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

/// One line per pod: VPC, attachment, interfaces, addresses.
pub fn addresses_table(pods: &[Attached]) {
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

/// Pings every address of `to` from `from` for each `(from, to, expected)`; prints the matrix
/// and returns the number of pings whose outcome was not the expected one.
pub fn connectivity(
    pods: &[Attached],
    checks: &[(usize, usize, bool)],
    ping: impl Fn(usize, &str) -> bool,
) -> usize {
    println!(
        "\n{:<10} {:<10} {:<26} {:<10} {:<10} result",
        "from", "to", "address", "expected", "got"
    );
    let mut failures = 0;
    for &(from, to, expected) in checks {
        for ip in addresses(&pods[to].result) {
            let got = ping(from, &ip);
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
    failures
}

/// The routing domain of `pod`'s VPC and its table, as the host has it.
pub fn routing_table(host: &Host, state: &Path, pod: &Attached) -> Result<()> {
    let vpc = galactic_core::ident::VpcId::parse(pod.spec.vpc)?;
    let record = state.join(format!("routing/vpc-{}.json", vpc.hex()));
    let domain: Value = serde_json::from_slice(&std::fs::read(record)?)?;
    let table = domain["table"].to_string();
    println!(
        "\nVPC {} routing domain: backend {}, table {table}",
        pod.spec.vpc, domain["backend"]
    );
    let asked = serde_json::from_slice::<Value>(&std::fs::read(host.node.node_config.as_path())?)?
        ["routing_domain"]
        .clone();
    if asked != "auto" && asked != domain["backend"] {
        bail!(
            "routing_domain is {asked} but the domain's backend is {}",
            domain["backend"]
        );
    }
    for family in ["-4", "-6"] {
        let (_, routes) = host
            .netns
            .try_ip(&[family, "route", "show", "table", &table]);
        for line in routes.lines() {
            println!("  {line}");
        }
    }
    Ok(())
}

/// The BGPAdvertisements the local publisher wrote.
pub fn advertisements(state: &Path) -> Result<()> {
    let dir = state.join("bgp/galactic-system/bgpadvertisements");
    println!("\n{:<32} {:<14} prefixes", "advertisement", "communities");
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
            "{:<32} {:<14} {}",
            doc["metadata"]["name"].as_str().unwrap_or(""),
            list(&doc["spec"]["communities"]),
            list(&doc["spec"]["prefixes"])
        );
    }
    Ok(())
}
