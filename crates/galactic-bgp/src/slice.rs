//! The per-pod EndpointSlice: the pod's IPv6 address, its tenant, and its VRF's uSID.

use crate::annotations::{SRV6_SID, TENANT_ID};
use crate::error::BgpError;
use crate::publish::MAX_ATTEMPTS;
use crate::store::{meta_str, Kind, ObjectStore};
use galactic_core::cni::CniArgs;
use galactic_core::log;
use serde_json::{json, Value};
use std::net::Ipv6Addr;

/// The pod an attachment belongs to (`K8S_POD_NAME`, `K8S_POD_NAMESPACE` in `CNI_ARGS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// Pod name (also the EndpointSlice name).
    pub name: String,
    /// Pod namespace (also the EndpointSlice namespace).
    pub namespace: String,
}

impl PodRef {
    /// The pod named in `args`, if both keys are present and non-empty.
    pub fn from_args(args: &CniArgs) -> Option<Self> {
        let get = |k| args.get(k).filter(|v| !v.is_empty()).map(str::to_owned);
        Some(Self {
            name: get("K8S_POD_NAME")?,
            namespace: get("K8S_POD_NAMESPACE")?,
        })
    }
}

/// What the EndpointSlice says.
pub struct SliceInput<'a> {
    /// The pod.
    pub pod: &'a PodRef,
    /// The pod's uid (owner reference), when the pod object is known.
    pub pod_uid: Option<&'a str>,
    /// The pod's IPv6 address.
    pub address: Ipv6Addr,
    /// `<vpc>-<attachment>`.
    pub tenant: &'a str,
    /// The VRF's uSID, when SRv6 is configured.
    pub sid: Option<Ipv6Addr>,
}

fn is_owned(object: &Value) -> bool {
    object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(TENANT_ID))
        .is_some()
}

/// Applies the desired fields onto `object` (new or existing), keeping foreign labels,
/// annotations and owner references.
fn apply_fields(object: &mut Value, input: &SliceInput<'_>) {
    let pod = input.pod;
    object["apiVersion"] = json!("discovery.k8s.io/v1");
    object["kind"] = json!("EndpointSlice");
    let meta = &mut object["metadata"];
    meta["name"] = json!(pod.name);
    meta["labels"][TENANT_ID] = json!(input.tenant);
    meta["annotations"][TENANT_ID] = json!(input.tenant);
    match input.sid {
        Some(sid) => meta["annotations"][SRV6_SID] = json!(sid.to_string()),
        None => {
            if let Some(a) = meta["annotations"].as_object_mut() {
                a.remove(SRV6_SID);
            }
        }
    }
    let mut target = json!({"kind": "Pod", "name": pod.name, "namespace": pod.namespace});
    if let Some(uid) = input.pod_uid {
        target["uid"] = json!(uid);
        let mut owners: Vec<Value> = meta["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        owners.retain(|o| !(o["kind"] == "Pod" && o["apiVersion"] == "v1"));
        owners.push(json!({"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": uid}));
        meta["ownerReferences"] = json!(owners);
    }
    object["addressType"] = json!("IPv6");
    object["endpoints"] = json!([{"addresses": [input.address.to_string()], "conditions": {"ready": true}, "targetRef": target}]);
}

/// Creates or updates the pod's EndpointSlice; refuses one without the tenant label (not ours).
/// Returns the uid when this call created it.
pub fn apply(store: &dyn ObjectStore, input: &SliceInput<'_>) -> Result<Option<String>, BgpError> {
    let pod = input.pod;
    for _ in 1..=MAX_ATTEMPTS {
        let outcome = match store.get(Kind::EndpointSlice, &pod.namespace, &pod.name)? {
            Some(existing) if !is_owned(&existing) => {
                return Err(BgpError::NotOwned {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                })
            }
            Some(mut existing) => {
                apply_fields(&mut existing, input);
                store
                    .replace(Kind::EndpointSlice, &pod.namespace, &existing)
                    .map(|_| None)
            }
            None => {
                let mut object = json!({"metadata": {}});
                apply_fields(&mut object, input);
                store
                    .create(Kind::EndpointSlice, &pod.namespace, &object)
                    .map(|o| meta_str(&o, "uid").map(str::to_owned))
            }
        };
        match outcome {
            Ok(created) => {
                log::debug(
                    "ADD: EndpointSlice applied",
                    json!({"pod": format!("{}/{}", pod.namespace, pod.name), "created": created.is_some()}),
                );
                return Ok(created);
            }
            Err(e) if e.is_exists() || e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(BgpError::Contended {
        what: format!("EndpointSlice {}/{}", pod.namespace, pod.name),
        attempts: MAX_ATTEMPTS,
    })
}

/// Deletes the pod's EndpointSlice if it carries this attachment's tenant id. Returns whether
/// something was deleted.
pub fn delete_owned(store: &dyn ObjectStore, pod: &PodRef, tenant: &str) -> Result<bool, BgpError> {
    let Some(existing) = store.get(Kind::EndpointSlice, &pod.namespace, &pod.name)? else {
        return Ok(false);
    };
    let label = existing
        .pointer("/metadata/labels")
        .and_then(|l| l.get(TENANT_ID))
        .and_then(Value::as_str);
    if label != Some(tenant) {
        log::debug(
            "DEL: EndpointSlice is not this attachment's; left alone",
            json!({"pod": pod.name, "tenant": label}),
        );
        return Ok(false);
    }
    let uid = meta_str(&existing, "uid").unwrap_or_default();
    store.delete(Kind::EndpointSlice, &pod.namespace, &pod.name, uid)?;
    Ok(true)
}

/// CHECK: the slice exists with this address, tenant and SID.
pub fn check(store: &dyn ObjectStore, input: &SliceInput<'_>) -> Result<(), BgpError> {
    let pod = input.pod;
    let name = format!("EndpointSlice {}/{}", pod.namespace, pod.name);
    let object = store
        .get(Kind::EndpointSlice, &pod.namespace, &pod.name)?
        .ok_or_else(|| BgpError::Check(format!("{name} does not exist")))?;
    let address = object
        .pointer("/endpoints/0/addresses/0")
        .and_then(Value::as_str);
    if address != Some(input.address.to_string().as_str()) {
        return Err(BgpError::Check(format!(
            "{name} publishes {}, the pod has {}",
            shown(address),
            input.address
        )));
    }
    for (what, pointer) in [
        ("label", "/metadata/labels"),
        ("annotation", "/metadata/annotations"),
    ] {
        let value = object
            .pointer(pointer)
            .and_then(|m| m.get(TENANT_ID))
            .and_then(Value::as_str);
        if value != Some(input.tenant) {
            return Err(BgpError::Check(format!(
                "{name} {what} {TENANT_ID} is {}, want \"{}\"",
                shown(value),
                input.tenant
            )));
        }
    }
    let sid = object
        .pointer("/metadata/annotations")
        .and_then(|m| m.get(SRV6_SID))
        .and_then(Value::as_str);
    let want = input.sid.map(|s| s.to_string());
    if sid != want.as_deref() {
        return Err(BgpError::Check(format!(
            "{name} annotation {SRV6_SID} is {}, want {}",
            shown(sid),
            shown(want.as_deref())
        )));
    }
    Ok(())
}

/// A published value for a message: quoted, or `absent`.
fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "absent".to_owned(), |v| format!("\"{v}\""))
}
