//! `galactic-bgp`: the last plugin of a Galactic chain. It learns the attachment from
//! `prevResult` and publishes it for BGP: the VPC's BGPVRFInstance on this node (VRF id
//! allocation), the attachment's BGPAdvertisement, and the pod's EndpointSlice — to the
//! Kubernetes API, or as files under the state directory (`publisher: local`). It passes
//! `prevResult` on unchanged. When the node's BGPRouter has SRv6 settings it also registers the
//! attachment in the eBPF uSID datapath's pinned maps. See `docs/kubernetes.md`, `docs/ebpf.md`.
//!
//! `galactic-bgp nad …` performs the masters' NetworkAttachmentDefinition calls (see `nad`);
//! `export-annotations …` and `check-node …` are the node installer's (see `export`,
//! `node_identity`).

mod annotations;
mod attachments;
mod check;
mod conf;
mod crds;
mod datapath;
mod error;
mod export;
mod legacy;
mod nad;
mod netns;
mod node_identity;
mod ops;
mod prev;
mod publications;
mod publish;
mod retract;
mod slice;
mod store;

use error::BgpError;
use galactic_core::cni::{run, CniResult, Plugin, Request};
use galactic_core::plugins;
use std::process::ExitCode;

struct GalacticBgp;

impl Plugin for GalacticBgp {
    type Error = BgpError;

    fn name(&self) -> &'static str {
        plugins::BGP
    }
    fn add(&self, req: &Request) -> Result<CniResult, BgpError> {
        ops::add(req)
    }
    fn del(&self, req: &Request) -> Result<(), BgpError> {
        retract::del(req)
    }
    fn check(&self, req: &Request) -> Result<(), BgpError> {
        check::check(req)
    }
    fn status(&self, req: &Request) -> Result<(), BgpError> {
        ops::status(req).map_err(|e| BgpError::NotReady(Box::new(e)))
    }
    fn gc(&self, req: &Request) -> Result<(), BgpError> {
        retract::gc(req)
    }
}

fn main() -> ExitCode {
    if let Some(code) = galactic_core::cni::version_flag(plugins::BGP) {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((first, rest)) if first == "nad" => nad::main(rest),
        Some((first, rest)) if first == "export-annotations" => export::main(rest),
        Some((first, rest)) if first == "check-node" => node_identity::main(rest),
        _ => run(&GalacticBgp),
    }
}

/// musl's allocator returns freed memory to the kernel eagerly; dlmalloc keeps it for reuse
/// (decision 0071). Test and debug builds (glibc) keep the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
