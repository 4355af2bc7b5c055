//! `crash-campaign`: the full chain run as a runtime runs it, with plugin processes SIGKILLed at
//! random moments and at every named failpoint, and the node's invariants checked after every
//! recovery and at the end, over the local publisher, the Kubernetes one (the test kit's HTTPS
//! loopback API server) or both (harness and its self-tests: `galactic_lab::campaign::crash`).
//! Debug builds: failpoints exist only there.

use anyhow::Result;
use galactic_lab::campaign::crash::{campaign, Rng};
use galactic_lab::campaign::{Lab, Publisher};

/// `cargo xtask crash-campaign [--iterations N] [--seconds S] [--seed HEX]
/// [--publisher local|kubernetes|both]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Steps to run (per publisher)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub iterations: usize,
    /// Stop after S seconds (per publisher) even when steps remain
    #[arg(long, value_name = "S")]
    pub seconds: Option<u64>,
    /// Random seed, hexadecimal with or without 0x (default: from the clock); a report names
    /// its seed, so a campaign replays
    #[arg(long, value_name = "HEX", value_parser = hex_seed)]
    pub seed: Option<u64>,
    /// Where galactic-bgp publishes: `local` (files under the state directory), `kubernetes`
    /// (the loopback API server) or `both`, one campaign after the other with the same seed
    #[arg(long, value_enum, default_value_t = Publishers::Both)]
    pub publisher: Publishers,
}

/// `--publisher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Publishers {
    Local,
    Kubernetes,
    Both,
}

impl Publishers {
    fn each(self) -> &'static [Publisher] {
        match self {
            Self::Local => &[Publisher::Local],
            Self::Kubernetes => &[Publisher::Kubernetes],
            Self::Both => &[Publisher::Local, Publisher::Kubernetes],
        }
    }
}

/// `--seed`: hexadecimal, `0x` optional.
fn hex_seed(text: &str) -> Result<u64, String> {
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .map_err(|e| format!("takes a hex number: {e}"))
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let seed = args.seed.unwrap_or_else(Rng::time_seed);
    let built = crate::stage::build_plugins(false)?;
    let mut verdicts = Vec::new();
    for publisher in args.publisher.each() {
        let lab = Lab::publishing_with_plugins_from("crash", &built, *publisher)?;
        let report = campaign(&lab, args.iterations, args.seconds, seed)?;
        println!("{report}");
        verdicts.push(report.verdict());
    }
    // Every publisher's report is printed before the first failure is returned.
    for verdict in verdicts {
        verdict?;
    }
    Ok(())
}
