//! `galactic-bgp`: the last plugin of a Galactic chain. It learns the attachment from
//! `prevResult` and publishes it for BGP: the VPC's BGPVRFInstance on this node (VRF id
//! allocation), the attachment's BGPAdvertisement, and the pod's EndpointSlice — to the
//! Kubernetes API, or as files under the state directory (`publisher: local`). It passes
//! `prevResult` on unchanged. When the node's BGPRouter has SRv6 settings it also registers the
//! attachment in the eBPF uSID datapath's pinned maps. See `docs/kubernetes.md`, `docs/ebpf.md`.
//!
//! `galactic-bgp nad …` performs the masters' NetworkAttachmentDefinition calls (see `nad`).

mod annotations;
mod conf;
mod datapath;
mod error;
mod nad;
mod netns;
mod ops;
mod prev;
mod publish;
mod slice;
mod store;

use galactic_core::cni::{run, CniError, CniResult, Code, Plugin, Request};
use std::process::ExitCode;

struct GalacticBgp;

impl Plugin for GalacticBgp {
    fn name(&self) -> &'static str {
        "galactic-bgp"
    }
    fn add(&self, req: &Request) -> Result<CniResult, CniError> {
        ops::add(req).map_err(CniError::from)
    }
    fn del(&self, req: &Request) -> Result<(), CniError> {
        ops::del(req).map_err(CniError::from)
    }
    fn check(&self, req: &Request) -> Result<(), CniError> {
        ops::check(req).map_err(CniError::from)
    }
    fn status(&self, req: &Request) -> Result<(), CniError> {
        ops::status(req).map_err(|e| {
            CniError::new(
                Code::NOT_AVAILABLE,
                format!("publication backend not ready: {e}"),
            )
        })
    }
    fn gc(&self, _req: &Request) -> Result<(), CniError> {
        // Per-attachment state is the EndpointSlice (deleted by DEL, owned by its Pod); shared
        // per-VPC objects are reclaimed by the router's GC, as upstream.
        Ok(())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((first, rest)) if first == "nad" => nad::main(rest),
        _ => run(&GalacticBgp),
    }
}
