//! This node's BGPRouter.

use crate::error::BgpError;
use crate::store::{Documents, ObjectStore, StoreError};
use galactic_core::ident::speaking_asn;
use galactic_core::log;
use galactic_kube::BGPRouter;
use serde_json::json;

/// This node's router, as far as the CNI needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    /// The name VRF instances and advertisements refer to.
    pub name: String,
    /// The ASN the router speaks; `None` when no BGPRouter document exists (local backend
    /// only): route targets then take their ASN-free form.
    pub asn: Option<u32>,
    /// `(srv6Locator, nodeID)` when both are set.
    pub srv6: Option<(String, i64)>,
}

/// Finds the BGPRouter whose `spec.targetRef.name` is `node`. With `required` (the Kubernetes
/// backend), none is an error and a router document that does not parse is skipped (the API
/// server validated it: it is another schema's); otherwise (local files, written by hand) a
/// document that does not parse is an error, and without one a router named after the node,
/// without ASN or SRv6, stands in.
pub fn lookup_router(
    store: &dyn ObjectStore,
    namespace: &str,
    node: &str,
    required: bool,
) -> Result<Router, BgpError> {
    router_of(
        store.list_typed::<BGPRouter>(namespace)?,
        namespace,
        node,
        required,
    )
}

/// [`lookup_router`] over the routers `listed` in `namespace`.
pub fn router_of(
    listed: Vec<Result<BGPRouter, StoreError>>,
    namespace: &str,
    node: &str,
    required: bool,
) -> Result<Router, BgpError> {
    let mut matches = Vec::new();
    for parsed in listed {
        match parsed {
            Ok(router) if router.spec.target_ref.name == node => matches.push(router),
            Ok(_) => {}
            Err(e) if required => log::warn(
                "BGP: skipping a BGPRouter that does not parse",
                json!({"err": e.to_string()}),
            ),
            Err(e) => return Err(BgpError::BadRouter(e)),
        }
    }
    match matches.as_slice() {
        [] if required => Err(BgpError::NoRouter {
            node: node.into(),
            namespace: namespace.into(),
        }),
        [] => Ok(Router {
            name: node.to_owned(),
            asn: None,
            srv6: None,
        }),
        [router] => Ok(of(router, node)),
        many => Err(BgpError::AmbiguousRouter {
            count: many.len(),
            node: node.into(),
            namespace: namespace.into(),
        }),
    }
}

/// What the CNI takes from `router`.
fn of(router: &BGPRouter, node: &str) -> Router {
    let spec = &router.spec;
    let asn = speaking_asn(spec.local_asn);
    if i64::from(asn) != spec.local_asn {
        log::warn(
            "BGP: the router's localASN exceeds 32 bits; it speaks, and route targets use, the low 32",
            json!({"localASN": spec.local_asn, "asn": asn}),
        );
    }
    let srv6 = match (&spec.srv6_locator, spec.node_id) {
        (Some(locator), Some(id)) if !locator.is_empty() && id != 0 => {
            Some((locator.clone(), i64::from(id)))
        }
        _ => None,
    };
    let name = router.metadata.name.clone().unwrap_or_default();
    log::debug("BGP: router matched", json!({"router": name, "node": node}));
    Router {
        name,
        asn: Some(asn),
        srv6,
    }
}
