//! `test-kernel`: the production-kernel tier (Debian 12's LTS kernel, with VRF, in a VM). The
//! tier itself is the lab's (`galactic_lab::tier::kernel`: its suites, the guest, the run);
//! here are its command line and what it needs installed.

use anyhow::{Context, Result};
use galactic_lab::tier::kernel::{self, Plan};

/// `cargo xtask test-kernel`: boots Debian 12's LTS kernel (6.1, with VRF) in a VM and runs the
/// routing-domain suites and the demo there with `routing_domain=vrf`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Run only this suite (repeatable; `demo` for the demo, which then runs only if named)
    #[arg(long, value_name = "PACKAGE/TEST")]
    pub only: Vec<String>,
    /// Leave the demo out
    #[arg(long)]
    pub no_demo: bool,
    /// Use KVM instead of TCG (nested guests hang on the development machine kind)
    #[arg(long)]
    pub kvm: bool,
    /// Print the selected suites and exit
    #[arg(long)]
    pub list: bool,
}

/// Runs the tier.
pub fn run(args: &Args) -> Result<()> {
    let plan = Plan::new(&args.only, args.no_demo, args.kvm)?;
    if args.list {
        for id in plan.ids() {
            println!("{id}");
        }
        return Ok(());
    }
    preflight()?;
    kernel::run(&plan, &crate::workspace())?;
    Ok(())
}

/// Whether this machine can run the tier, installing what it lacks (`cargo xtask setup`'s part
/// for the tier, with the native suites' tools: the guest runs those suites on the host's root).
/// Runs before anything is built, so `cargo xtask test` fails at once rather than after the
/// native suites.
pub fn preflight() -> Result<()> {
    require_root()?;
    crate::setup::ensure(&[
        crate::setup::Part::Demo,
        crate::setup::Part::Native,
        crate::setup::Part::Kernel,
    ])
    .context("the production-kernel tier cannot run")?;
    Ok(())
}

/// The tier runs the privileged suites in the guest as the invoking user.
pub fn require_root() -> Result<()> {
    Ok(kernel::require_root()?)
}
