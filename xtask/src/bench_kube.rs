//! `bench-kube`: galactic-bgp's Kubernetes publisher, a release process per call against the test
//! kit's HTTPS API server with 0, 1 and 5 ms added to every request: requests per ADD and DEL
//! next to upstream's, wall time medians, client start-up (harness: `galactic_lab::bench::kube`).

use anyhow::Result;
use galactic_lab::bench::kube;
use std::time::Duration;

/// `cargo xtask bench-kube [--runs N]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Calls per operation and latency
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub runs: usize,
    /// Measure this galactic-bgp instead of building the workspace's release plugins (e.g. an
    /// older build, for a before/after)
    #[arg(long, value_name = "PATH")]
    pub binary: Option<std::path::PathBuf>,
    /// Also measure this galactic-bgp (an older build), latency by latency in turn with the
    /// measured one, and print the two side by side
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<std::path::PathBuf>,
}

pub fn run(args: &Args) -> Result<()> {
    let binary = match &args.binary {
        Some(binary) => binary.clone(),
        None => crate::stage::build_release()?.join("galactic-bgp"),
    };
    let latencies = [0, 1, 5].map(Duration::from_millis);
    let Some(baseline) = &args.baseline else {
        let rows = kube::run(&binary, &latencies, args.runs)?;
        print!("{}", kube::table(&rows, args.runs));
        return Ok(());
    };
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for latency in latencies {
        base.extend(kube::run(baseline, &[latency], args.runs)?);
        ours.extend(kube::run(&binary, &[latency], args.runs)?);
    }
    println!("baseline {}:", baseline.display());
    print!("{}", kube::table(&base, args.runs));
    println!("measured {}:", binary.display());
    print!("{}", kube::table(&ours, args.runs));
    print!("{}", kube::compared(&ours, &base));
    Ok(())
}
