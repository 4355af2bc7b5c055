//! The per-pod EndpointSlice: the pod's IPv6 address, its tenant, and its VRF's uSID.

use crate::annotations::{SRV6_SID, TENANT_ID};
use crate::error::BgpError;
use crate::publish::MAX_ATTEMPTS;
use crate::store::{Documents, Kind, ObjectStore};
use galactic_core::cni::CniArgs;
use galactic_core::log;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;
use std::net::Ipv6Addr;

/// The pod an attachment belongs to (`K8S_POD_NAME`, `K8S_POD_NAMESPACE` in `CNI_ARGS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// Pod name (also the EndpointSlice name).
    pub name: String,
    /// Pod namespace (also the EndpointSlice namespace).
    pub namespace: String,
    /// The pod's uid when the runtime passes it (`K8S_POD_UID`: containerd and CRI-O do), so
    /// ADD needs no read of the Pod for its owner reference.
    pub uid: Option<String>,
}

impl PodRef {
    /// The pod named in `args`, if both keys are present and non-empty.
    pub fn from_args(args: &CniArgs) -> Option<Self> {
        let get = |k| args.get(k).filter(|v| !v.is_empty()).map(str::to_owned);
        Some(Self {
            name: get("K8S_POD_NAME")?,
            namespace: get("K8S_POD_NAMESPACE")?,
            uid: get("K8S_POD_UID"),
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

fn tenant_label(object: &EndpointSlice) -> Option<&str> {
    object
        .metadata
        .labels
        .as_ref()?
        .get(TENANT_ID)
        .map(String::as_str)
}

/// Applies the desired fields onto `object` (new or existing), keeping foreign labels,
/// annotations and owner references.
fn apply_fields(object: &mut EndpointSlice, input: &SliceInput<'_>) {
    let pod = input.pod;
    let meta = &mut object.metadata;
    meta.name = Some(pod.name.clone());
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(TENANT_ID.into(), input.tenant.into());
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(TENANT_ID.into(), input.tenant.into());
    match input.sid {
        Some(sid) => annotations.insert(SRV6_SID.into(), sid.to_string()),
        None => annotations.remove(SRV6_SID),
    };
    let mut target = ObjectReference {
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        ..ObjectReference::default()
    };
    if let Some(uid) = input.pod_uid {
        target.uid = Some(uid.to_owned());
        let owners = meta.owner_references.get_or_insert_with(Vec::new);
        owners.retain(|o| !(o.kind == "Pod" && o.api_version == "v1"));
        owners.push(OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod.name.clone(),
            uid: uid.to_owned(),
            ..OwnerReference::default()
        });
    }
    object.address_type = "IPv6".into();
    object.endpoints = Some(vec![Endpoint {
        addresses: vec![input.address.to_string()],
        conditions: Some(EndpointConditions {
            ready: Some(true),
            ..EndpointConditions::default()
        }),
        target_ref: Some(target),
        ..Endpoint::default()
    }]);
}

/// The pod's EndpointSlice as an ADD creates it when there is none: the first write of every
/// ADD is this create (no read before it); one that meets an existing slice goes on with
/// [`apply`].
pub fn first_slice(input: &SliceInput<'_>) -> EndpointSlice {
    let mut object = EndpointSlice::default();
    apply_fields(&mut object, input);
    object
}

/// What a write of the slice left: its uid, and whether the write created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceApplied {
    /// Its uid.
    pub uid: String,
    /// The write was its create.
    pub created: bool,
}

impl SliceApplied {
    /// What the write that answered `object` left.
    pub fn of(object: &EndpointSlice, created: bool) -> Self {
        Self {
            uid: object.metadata.uid.clone().unwrap_or_default(),
            created,
        }
    }
}

/// Creates or updates the pod's EndpointSlice, reading it first; refuses one without the tenant
/// label (not ours). What the write left.
pub fn apply(store: &dyn ObjectStore, input: &SliceInput<'_>) -> Result<SliceApplied, BgpError> {
    let pod = input.pod;
    for _ in 1..=MAX_ATTEMPTS {
        let outcome = match store.get_typed::<EndpointSlice>(&pod.namespace, &pod.name)? {
            Some(existing) if tenant_label(&existing).is_none() => {
                return Err(BgpError::NotOwned {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                })
            }
            Some(mut existing) => {
                apply_fields(&mut existing, input);
                store
                    .replace_typed(&pod.namespace, &existing)
                    .map(|o| SliceApplied::of(&o, false))
            }
            None => store
                .create_typed(&pod.namespace, &first_slice(input))
                .map(|o| SliceApplied::of(&o, true)),
        };
        match outcome {
            Ok(applied) => {
                log::debug(
                    "ADD: EndpointSlice applied",
                    json!({"pod": format!("{}/{}", pod.namespace, pod.name), "created": applied.created}),
                );
                return Ok(applied);
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

/// Deletes the pod's EndpointSlice if it carries this attachment's tenant id (reading it
/// first). Returns whether something was deleted.
pub fn delete_owned(store: &dyn ObjectStore, pod: &PodRef, tenant: &str) -> Result<bool, BgpError> {
    let Some(existing) = store.get_typed::<EndpointSlice>(&pod.namespace, &pod.name)? else {
        return Ok(false);
    };
    let label = tenant_label(&existing);
    if label != Some(tenant) {
        log::debug(
            "DEL: EndpointSlice is not this attachment's; left alone",
            json!({"pod": pod.name, "tenant": label}),
        );
        return Ok(false);
    }
    let uid = existing.metadata.uid.as_deref().unwrap_or_default();
    store.delete(Kind::EndpointSlice, &pod.namespace, &pod.name, uid)?;
    Ok(true)
}

/// CHECK: the slice exists with this address, tenant and SID.
pub fn check(store: &dyn ObjectStore, input: &SliceInput<'_>) -> Result<(), BgpError> {
    let pod = input.pod;
    let name = format!("EndpointSlice {}/{}", pod.namespace, pod.name);
    let object = store
        .get_typed::<EndpointSlice>(&pod.namespace, &pod.name)?
        .ok_or_else(|| BgpError::Check(format!("{name} does not exist")))?;
    let address = object
        .endpoints
        .as_ref()
        .and_then(|e| e.first())
        .and_then(|e| e.addresses.first())
        .map(String::as_str);
    if address != Some(input.address.to_string().as_str()) {
        return Err(BgpError::Check(format!(
            "{name} publishes {}, the pod has {}",
            shown(address),
            input.address
        )));
    }
    let meta = &object.metadata;
    for (what, map) in [("label", &meta.labels), ("annotation", &meta.annotations)] {
        let value = map
            .as_ref()
            .and_then(|m| m.get(TENANT_ID))
            .map(String::as_str);
        if value != Some(input.tenant) {
            return Err(BgpError::Check(format!(
                "{name} {what} {TENANT_ID} is {}, want \"{}\"",
                shown(value),
                input.tenant
            )));
        }
    }
    let sid = meta
        .annotations
        .as_ref()
        .and_then(|m| m.get(SRV6_SID))
        .map(String::as_str);
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
