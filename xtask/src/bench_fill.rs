//! `bench-fill`: a probe pod's ADD, CHECK, DEL and GC as the node fills with live attachments
//! spread over VPCs, our full chain against the reference plugins (Debian's `bridge` +
//! `host-local`, installed with apt when missing) at the same attachment counts. The harness is
//! `galactic_lab::bench::fill`; this command builds what it measures.

use anyhow::Result;
use galactic_lab::bench::fill::{self, Backend, Options, Paths};

/// The routing-domain backend of our nodes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum BackendArg {
    /// Per-VPC routing tables and policy rules
    Table,
    /// A VRF device per VPC (the kernel must have VRF)
    Vrf,
}

/// `cargo xtask bench-fill [--levels L,...] [--vpcs V,...] [--iterations N] [--backend B]
/// [--workers N]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Live attachments to probe at, comma-separated (0: the empty node)
    #[arg(
        long,
        value_name = "L,...",
        value_delimiter = ',',
        default_value = "0,250,1000"
    )]
    pub levels: Vec<usize>,
    /// VPC counts our live attachments are spread over, comma-separated (one node each)
    #[arg(
        long,
        value_name = "V,...",
        value_delimiter = ',',
        default_value = "1,50,250"
    )]
    pub vpcs: Vec<usize>,
    /// Probe rounds (ADD, CHECK, DEL, GC) per level (GC at 250 VPCs takes tens of seconds)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub iterations: usize,
    /// Routing-domain backend of our nodes (default: what the node chooses, `auto`)
    #[arg(long, value_enum, value_name = "B")]
    pub backend: Option<BackendArg>,
    /// Runtimes filling a node at once
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub workers: usize,
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let ours = crate::stage::build_release()?;
    let reference = crate::debian::reference_chain()?;
    let paths = Paths {
        ours: Some(&ours),
        reference: Some(reference),
    };
    let options = Options {
        levels: args.levels.clone(),
        vpcs: args.vpcs.clone(),
        iterations: args.iterations,
        backend: args.backend.map(|b| match b {
            BackendArg::Table => Backend::Table,
            BackendArg::Vrf => Backend::Vrf,
        }),
        workers: args.workers,
    };
    let started = std::time::Instant::now();
    let report = fill::run(&paths, &options, &|step| eprintln!("bench-fill: {step}"))?;
    print!("{}", fill::table(&report));
    println!("\nwhole run: {:.0} s", started.elapsed().as_secs_f64());
    if !report.leftovers.is_empty() {
        anyhow::bail!(
            "the bench left things behind: {}",
            report.leftovers.join("; ")
        );
    }
    Ok(())
}
