//! The masters' NetworkAttachmentDefinition steps, with the Kubernetes publisher only: refuse a
//! NAD whose chain lacks `galactic-bgp` before any state exists, and annotate the NAD with the
//! host interface once it exists. Nodes on the local publisher (the demo, Podman, nerdctl) have
//! no NAD, and a pod without `K8S_POD_NAMESPACE` in `CNI_ARGS` was not attached through Multus.

use crate::cni::{CniError, Request};
use crate::config::Publisher;
use crate::kube::{annotate_nad_host_interface, verify_chain_complete, ClientOptions, KubeClient};
use crate::log;
use serde_json::json;

/// The pod's NAD, reachable through the cluster.
pub struct Nad {
    client: KubeClient,
    namespace: String,
    name: String,
}

impl Nad {
    /// The NAD of this attachment, when the node publishes to Kubernetes and the runtime said
    /// which namespace the pod is in. The NAD is named like the network.
    pub fn of(req: &Request) -> Result<Option<Self>, CniError> {
        if req.node.publisher != Publisher::Kubernetes {
            return Ok(None);
        }
        let Some(namespace) = req
            .env
            .args
            .get("K8S_POD_NAMESPACE")
            .filter(|n| !n.is_empty())
        else {
            return Ok(None);
        };
        let client = KubeClient::from_kubeconfig(&req.node.kubeconfig, ClientOptions::default())?;
        Ok(Some(Self {
            client,
            namespace: namespace.to_owned(),
            name: req.conf.name.clone(),
        }))
    }

    /// Code 7 unless the NAD's conflist runs `galactic-bgp` after the master.
    pub fn verify_chain(&self) -> Result<(), CniError> {
        verify_chain_complete(&self.client, &self.namespace, &self.name)?;
        log::debug(
            "ADD: NAD chain complete",
            json!({"nad": format!("{}/{}", self.namespace, self.name)}),
        );
        Ok(())
    }

    /// Records the host interface on the NAD (that one annotation only).
    pub fn annotate(&self, host_ifname: &str) -> Result<(), CniError> {
        annotate_nad_host_interface(&self.client, &self.namespace, &self.name, host_ifname)?;
        log::debug("ADD: NAD annotated", json!({"hostIfname": host_ifname}));
        Ok(())
    }
}
