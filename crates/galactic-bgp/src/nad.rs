//! `galactic-bgp nad verify-chain` and `galactic-bgp nad annotate <host interface>`: the two
//! NetworkAttachmentDefinition calls the masters make with the Kubernetes publisher. The masters
//! exec them with their own environment and stdin (the pod's network configuration), so the NAD is
//! the one named like the network, in the pod's namespace, reached with the node's kubeconfig.
//! Keeping the Kubernetes client here keeps it out of every master call (docs/decisions/0014).

use crate::error::BgpError;
use galactic_core::cni::{run_step, CniError, Request};
use galactic_core::plugins;
use galactic_kube::{
    annotate_nad_host_interface, verify_chain_complete, ClientOptions, KubeClient,
};
use std::process::ExitCode;

/// Runs the NAD step named by `args` (what follows `nad`).
pub fn main(args: &[String]) -> ExitCode {
    match args {
        [step] if step == "verify-chain" => run_step(plugins::BGP, "ADD: NAD chain check", |req| {
            let (client, namespace) = client(req)?;
            verify_chain_complete(&client, namespace, &req.conf.name)?;
            Ok::<(), BgpError>(())
        }),
        [step, host_ifname] if step == "annotate" => {
            run_step(plugins::BGP, "ADD: NAD annotation", |req| {
                let (client, namespace) = client(req)?;
                annotate_nad_host_interface(&client, namespace, &req.conf.name, host_ifname)?;
                Ok::<(), BgpError>(())
            })
        }
        _ => {
            eprintln!("usage: galactic-bgp nad verify-chain | galactic-bgp nad annotate IFNAME");
            ExitCode::from(2)
        }
    }
}

fn client(req: &Request) -> Result<(KubeClient, &str), BgpError> {
    let namespace = req
        .env
        .args
        .get("K8S_POD_NAMESPACE")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| CniError::invalid_env("K8S_POD_NAMESPACE is not in CNI_ARGS"))?;
    let client = KubeClient::from_kubeconfig(&req.node.kubeconfig, ClientOptions::default())?;
    Ok((client, namespace))
}
