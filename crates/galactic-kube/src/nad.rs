//! The masters' NetworkAttachmentDefinition steps: the host-interface annotation and the
//! chain-completeness check.

use super::client::KubeClient;
use super::crd::NetworkAttachmentDefinition;
use super::error::{ChainError, KubeError};
use galactic_core::plugins;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

/// The annotation naming the attachment's host interface (`G…H`).
pub const HOST_INTERFACE_ANNOTATION: &str = "k8s.v1.cni.cncf.io/host-interface";

/// Sets the host-interface annotation on the NAD `namespace/name`, and only that annotation
/// (a JSON merge patch: every other annotation and field is kept; upstream's JSON patch replaced
/// the whole annotation map).
pub fn annotate_nad_host_interface(
    client: &KubeClient,
    namespace: &str,
    name: &str,
    host_ifname: &str,
) -> Result<(), KubeError> {
    let patch = json!({"metadata": {"annotations": {HOST_INTERFACE_ANNOTATION: host_ifname}}});
    let what = format!("annotate NetworkAttachmentDefinition {namespace}/{name}");
    client.call(&what, |c| {
        let api: Api<NetworkAttachmentDefinition> = Api::namespaced(c, namespace);
        let patch = patch.clone();
        async move {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    })
}

/// Refuses (code 7 through [`KubeError::ChainIncomplete`]) a NAD whose conflist does not run
/// `galactic-bgp` after the master: such an attachment would succeed with no path to its VPC.
/// Call it before creating any kernel state.
pub fn verify_chain_complete(
    client: &KubeClient,
    namespace: &str,
    name: &str,
) -> Result<(), KubeError> {
    let what = format!("get NetworkAttachmentDefinition {namespace}/{name}");
    let nad = client.call(&what, |c| {
        let api: Api<NetworkAttachmentDefinition> = Api::namespaced(c, namespace);
        async move { api.get(name).await }
    })?;
    check_chain(nad.spec.config.as_deref()).map_err(|source| KubeError::ChainIncomplete {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    })
}

/// Checks a NAD's `spec.config`: a conflist whose `plugins` has a `galactic-bgp` entry after the
/// first master entry (or anywhere, when the master runs under a type name that is not one of
/// ours or an upstream alias). A single-plugin config has no chain and fails.
pub fn check_chain(config: Option<&str>) -> Result<(), ChainError> {
    let config = config
        .filter(|c| !c.trim().is_empty())
        .ok_or(ChainError::NoConfig)?;
    let value: Value =
        serde_json::from_str(config).map_err(|e| ChainError::NotJson(e.to_string()))?;
    let types: Vec<&str> = value
        .get("plugins")
        .and_then(Value::as_array)
        .map(|plugins| {
            plugins
                .iter()
                .map(|p| p.get("type").and_then(Value::as_str).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    let master = types.iter().position(|t| plugins::is_master(t));
    let after = master.map_or(0, |m| m + 1);
    if types[after.min(types.len())..].contains(&plugins::BGP) {
        Ok(())
    } else {
        Err(ChainError::MissingBgp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflist(types: &[&str]) -> String {
        let plugins: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
        json!({"cniVersion": "1.1.0", "name": "n", "plugins": plugins}).to_string()
    }

    #[test]
    fn bgp_must_follow_the_master() {
        check_chain(Some(&conflist(&[
            "galactic-cni",
            "galactic-route",
            "galactic-bgp",
        ])))
        .unwrap();
        check_chain(Some(&conflist(&["galactic-veth", "galactic-bgp"]))).unwrap();
        check_chain(Some(&conflist(&["my-renamed-master", "galactic-bgp"]))).unwrap();
        for bad in [
            conflist(&["galactic-cni", "galactic-route"]),
            conflist(&["galactic-bgp", "galactic-tap-cni"]),
            conflist(&[]),
            json!({"cniVersion": "1.1.0", "name": "n", "type": "galactic-cni"}).to_string(),
        ] {
            assert_eq!(
                check_chain(Some(&bad)),
                Err(ChainError::MissingBgp),
                "{bad}"
            );
        }
        assert_eq!(check_chain(None), Err(ChainError::NoConfig));
        assert_eq!(check_chain(Some(" ")), Err(ChainError::NoConfig));
        assert!(matches!(
            check_chain(Some("{")),
            Err(ChainError::NotJson(_))
        ));
    }
}
