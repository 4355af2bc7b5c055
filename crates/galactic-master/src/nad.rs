//! The masters' NetworkAttachmentDefinition steps, with the Kubernetes publisher only: refuse a
//! NAD whose chain lacks `galactic-bgp` before any state exists, and annotate the NAD with the
//! host interface once it exists. Nodes on the local publisher (the demo, Podman, nerdctl) have
//! no NAD, and a pod without `K8S_POD_NAMESPACE` in `CNI_ARGS` was not attached through Multus.
//!
//! The Kubernetes calls themselves run in `galactic-bgp` (`galactic-bgp nad verify-chain` and
//! `galactic-bgp nad annotate <host interface>`), exec'd from `CNI_PATH` like an IPAM delegate:
//! the chain needs galactic-bgp anyway, and keeping the Kubernetes client out of the master
//! binaries halves the code every master call maps (docs/decisions/0014).

use crate::delegate::Delegate;
use crate::error::MasterError;
use galactic_core::cni::{Command, Request};
use galactic_core::config::Publisher;
use galactic_core::log;
use galactic_core::plugins;
use serde_json::json;
use std::path::PathBuf;

/// The plugin that performs the NAD calls for the masters.
pub const NAD_HELPER: &str = plugins::BGP;

/// The pod's NAD, reachable through `galactic-bgp`.
pub struct Nad<'a> {
    req: &'a Request,
    helper: PathBuf,
}

impl<'a> Nad<'a> {
    /// The NAD of this attachment, when the node publishes to Kubernetes and the runtime said
    /// which namespace the pod is in. Code 7 when galactic-bgp is not in `CNI_PATH`.
    pub fn of(req: &'a Request) -> Result<Option<Self>, MasterError> {
        if req.node.publisher != Publisher::Kubernetes {
            return Ok(None);
        }
        if req
            .env
            .args
            .get("K8S_POD_NAMESPACE")
            .is_none_or(|n| n.is_empty())
        {
            return Ok(None);
        }
        let helper = helper(req)
            .find()
            .map_err(|source| MasterError::NadHelperMissing {
                helper: NAD_HELPER,
                source,
            })?;
        Ok(Some(Self { req, helper }))
    }

    /// Code 7 unless the NAD's conflist runs `galactic-bgp` after the master.
    pub fn verify_chain(&self) -> Result<(), MasterError> {
        self.step(&["nad", "verify-chain"])?;
        log::debug(
            "ADD: NAD chain complete",
            json!({"helper": self.helper.display().to_string()}),
        );
        Ok(())
    }

    /// Records the host interface on the NAD (that one annotation only).
    pub fn annotate(&self, host_ifname: &str) -> Result<(), MasterError> {
        self.step(&["nad", "annotate", host_ifname])?;
        log::debug("ADD: NAD annotated", json!({"hostIfname": host_ifname}));
        Ok(())
    }

    fn step(&self, args: &[&str]) -> Result<(), MasterError> {
        Ok(helper(self.req).call_step(args, Command::Add, &self.req.stdin)?)
    }
}

fn helper(req: &Request) -> Delegate<'_> {
    Delegate::new(NAD_HELPER, &req.env.path)
}
