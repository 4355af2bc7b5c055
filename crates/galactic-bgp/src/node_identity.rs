//! `galactic-bgp check-node KUBECONFIG NODE`: the node installer's node-identity check. The
//! init container runs in the host's network namespace, so this machine's addresses are the
//! node's; NODE (the DaemonSet's `spec.nodeName`, or a setting that overrides it) must be the
//! Node that has one of them as an InternalIP, or every pod of this node would be published as
//! another node's.

use galactic_kube::{local_addresses, verify_node_identity, ClientOptions, KubeClient};
use std::path::Path;
use std::process::ExitCode;

/// Runs the check named by `args` (what follows `check-node`).
pub fn main(args: &[String]) -> ExitCode {
    let [kubeconfig, node] = args else {
        eprintln!("usage: galactic-bgp check-node KUBECONFIG NODE");
        return ExitCode::from(2);
    };
    match check(Path::new(kubeconfig), node) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("galactic-bgp check-node: {message}");
            ExitCode::FAILURE
        }
    }
}

fn check(kubeconfig: &Path, node: &str) -> Result<(), String> {
    let local = local_addresses().map_err(|e| format!("list this machine's addresses: {e}"))?;
    let client = KubeClient::from_kubeconfig(kubeconfig, ClientOptions::default())
        .map_err(|e| e.to_string())?;
    verify_node_identity(&client, node, &local).map_err(|e| e.to_string())
}
