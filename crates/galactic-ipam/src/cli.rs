//! Operator commands, used when the binary is run with arguments (a CNI runtime never passes
//! any): `migrate --annotations FILE [--data-dir DIR]`, `verify [--data-dir DIR]`,
//! `list [--data-dir DIR]` and `write-markers [--data-dir DIR] [--legacy-dir ROOT]`.

use crate::legacy;
use crate::rollback;
use crate::store::Store;
use galactic_core::config::{NodeConfig, DEFAULT_IPAM_LOCK_TIMEOUT as DEFAULT_LOCK_TIMEOUT};
use std::path::PathBuf;
use std::process::ExitCode;

/// The node config's `ipam_data_dir` and `ipam_legacy_dir` (what the plugin uses), or their
/// defaults when the node config cannot be read: the directories when no flag names them.
fn default_dirs() -> (PathBuf, PathBuf) {
    let node = NodeConfig::resolve(&serde_json::json!({}), &|k| std::env::var(k).ok())
        .unwrap_or_else(|_| NodeConfig::defaults());
    (node.ipam_data_dir, node.ipam_legacy_dir)
}

const USAGE: &str = "\
usage: galactic-ipam migrate --annotations FILE [--data-dir DIR]
           import the allocations recorded as BGPAdvertisement annotations; FILE is the output
           of `kubectl get bgpadvertisements -A -o json`. Safe to repeat.
       galactic-ipam verify [--data-dir DIR]
           check the store's consistency (read-only); exit status 1 when a problem is found
       galactic-ipam list [--data-dir DIR]
           every allocation (network, container id, interface, origin, addresses) as JSON
       galactic-ipam write-markers [--data-dir DIR] [--legacy-dir ROOT]
           before returning the node to the Go chain: every live allocation written as the Go
           allocator's marker files under ROOT, so it never hands out a live address; exit
           status 1 when an allocation could not be written or a marker names another container
Without arguments galactic-ipam is a CNI plugin (CNI_COMMAND selects the operation).
DIR defaults to the node config's ipam_data_dir (/var/lib/galactic/ipam), ROOT to its
ipam_legacy_dir (/var/lib/cni/galactic-ipam).
";

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments.
    #[error("{0}\n{USAGE}")]
    Usage(String),
    /// The annotations file cannot be read or parsed.
    #[error("cannot read annotations {path}: {why}")]
    Input {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The markers could not be written.
    #[error(transparent)]
    Rollback(#[from] crate::rollback::RollbackError),
}

struct Args {
    command: String,
    annotations: Option<PathBuf>,
    data_dir: PathBuf,
    legacy_dir: PathBuf,
}

fn parse_args(args: &[String]) -> Result<Args, CliError> {
    let mut it = args.iter();
    let command = it.next().cloned().unwrap_or_default();
    let (data_dir, legacy_dir) = default_dirs();
    let mut parsed = Args {
        command,
        annotations: None,
        data_dir,
        legacy_dir,
    };
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| CliError::Usage(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--annotations" => parsed.annotations = Some(PathBuf::from(value()?)),
            "--data-dir" => parsed.data_dir = PathBuf::from(value()?),
            "--legacy-dir" => parsed.legacy_dir = PathBuf::from(value()?),
            other => return Err(CliError::Usage(format!("unknown option {other:?}"))),
        }
    }
    Ok(parsed)
}

/// Runs the command in `args` (without the program name); prints a JSON report on stdout.
pub fn main(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e @ CliError::Usage(_)) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("galactic-ipam: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<bool, CliError> {
    let args = parse_args(args)?;
    match args.command.as_str() {
        "migrate" => migrate(&args).map(|()| true),
        "verify" => verify(&args),
        "list" => list(&args).map(|()| true),
        "write-markers" => write_markers(&args),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(true)
        }
        other => Err(CliError::Usage(format!("unknown command {other:?}"))),
    }
}

fn migrate(args: &Args) -> Result<(), CliError> {
    let path = args
        .annotations
        .clone()
        .ok_or_else(|| CliError::Usage("migrate needs --annotations FILE".into()))?;
    let input = |why: String| CliError::Input {
        path: path.clone(),
        why,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| input(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| input(e.to_string()))?;
    let parsed = legacy::read_annotations(&json);
    let mut store = Store::open_or_create(&args.data_dir, DEFAULT_LOCK_TIMEOUT)?;
    let mut report = store.import(&parsed.records)?;
    report.skipped = parsed.skipped;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(())
}

/// The existing store of `args` (an operator command never creates one).
fn existing(args: &Args) -> Result<Store, CliError> {
    Store::open_existing(&args.data_dir, DEFAULT_LOCK_TIMEOUT)?
        .ok_or_else(|| CliError::Usage(format!("no store at {}", args.data_dir.display())))
}

fn list(args: &Args) -> Result<(), CliError> {
    let holdings = existing(args)?.holdings()?;
    println!(
        "{}",
        serde_json::to_string_pretty(&holdings).unwrap_or_default()
    );
    Ok(())
}

fn verify(args: &Args) -> Result<bool, CliError> {
    let mut store = existing(args)?;
    let report = store.verify()?;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(report.problems.is_empty())
}

fn write_markers(args: &Args) -> Result<bool, CliError> {
    // No store: this node never allocated, and there is nothing the Go allocator must skip.
    let leases = match Store::open_existing(&args.data_dir, DEFAULT_LOCK_TIMEOUT)? {
        Some(mut store) => store.leases()?,
        None => Vec::new(),
    };
    let existing_pools = rollback::existing_pools(&args.legacy_dir)?;
    let (markers, unplaced) = rollback::plan(&leases, &existing_pools);
    let mut report = rollback::Report {
        unplaced,
        ..Default::default()
    };
    rollback::write(&args.legacy_dir, &markers, &mut report)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(report.complete())
}
