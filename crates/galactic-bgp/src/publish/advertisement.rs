//! The attachment's BGPAdvertisement on this node: shared by every container of the (VPC,
//! attachment) here, each recorded in its annotations, its spec rebuilt from the records on
//! every write.

use super::{Router, MAX_ATTEMPTS};
use crate::annotations::{self, Annotations, ContainerRecord};
use crate::error::BgpError;
use crate::store::{Documents, ObjectStore};
use galactic_core::log;
use galactic_kube::{
    AddressFamily, BGPAdvertisement, BGPAdvertisementSpec, NameRef, OriginateFrom, SRv6Function,
};
use serde_json::json;

/// Everything the advertisement of this attachment is built from.
pub struct AdvertisementInput<'a> {
    /// Namespace of the BGP resources.
    pub namespace: &'a str,
    /// `BGPAdvertisement` name (`{hexvpc}-{hexatt}-{node}`).
    pub name: &'a str,
    /// This node's router.
    pub router: &'a Router,
    /// The VPC's route target.
    pub route_target: &'a str,
    /// The VPC's VRF id on this node.
    pub vrf_id: u32,
    /// This container's id.
    pub container_id: &'a str,
    /// This container's netns and addresses.
    pub record: ContainerRecord<'a>,
    /// The attachment's host interface (`G…H`).
    pub host_ifname: &'a str,
}

/// What an advertisement with the recorded `prefixes` originates: the prefixes, or without any
/// (an attachment without addresses) the routes of the attachment's host interface. The API
/// requires one of prefixes, redistribute or originateFrom, and the router must still see an
/// advertisement for the VPC on this node, or its GC reclaims the VPC's VRF instance and VRF
/// device (decision 0016).
pub(super) fn routes(
    prefixes: Vec<String>,
    host_ifname: Option<&str>,
) -> (Vec<String>, Option<OriginateFrom>) {
    let originate_from = if prefixes.is_empty() {
        host_ifname.map(OriginateFrom::interface)
    } else {
        None
    };
    (prefixes, originate_from)
}

/// The spec for the recorded `prefixes`.
fn spec(input: &AdvertisementInput<'_>, prefixes: Vec<String>) -> BGPAdvertisementSpec {
    let (prefixes, originate_from) = routes(prefixes, Some(input.host_ifname));
    BGPAdvertisementSpec {
        address_family: AddressFamily::L2VPN_EVPN,
        communities: vec![input.route_target.to_owned()],
        function: Some(SRv6Function::EndDt46),
        local_preference: None,
        originate_from,
        policy_ref: None,
        prefixes,
        redistribute: Vec::new(),
        router_ref: NameRef::to(&input.router.name),
        // At most 4095 (the VRF id range).
        vrf_id: Some(input.vrf_id as i32),
    }
}

/// What a write of the advertisement left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its uid when this call created it (what a rollback deletes).
    pub created_uid: Option<String>,
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion after the write, when the write left this container its only record.
    pub sole_version: Option<String>,
}

impl Applied {
    /// What the write that answered `object` left (`created`: the write was its create).
    pub fn of(object: &BGPAdvertisement, created: bool) -> Self {
        let meta = &object.metadata;
        let uid = meta.uid.clone().unwrap_or_default();
        let sole = meta
            .annotations
            .as_ref()
            .is_some_and(|a| annotations::containers(a) == 1);
        Self {
            created_uid: created.then(|| uid.clone()),
            uid,
            sole_version: meta.resource_version.clone().filter(|_| sole),
        }
    }
}

/// The advertisement as this container's ADD creates it when it is the attachment's first
/// container here: its record alone. The first write of every ADD is this create (no read
/// before it); one that meets an existing advertisement goes on with
/// [`publish_advertisement`].
pub fn first_advertisement(input: &AdvertisementInput<'_>) -> BGPAdvertisement {
    let mut ann = Annotations::default();
    annotations::record(&mut ann, input.container_id, &input.record);
    let mut object =
        BGPAdvertisement::new(input.name, spec(input, annotations::all_prefixes(&ann)));
    object.metadata.annotations = Some(ann);
    object
}

/// Records this container on the advertisement (pruning dead siblings) and rewrites its spec
/// from the records, reading it first. What the write left.
pub fn publish_advertisement(
    store: &dyn ObjectStore,
    input: &AdvertisementInput<'_>,
    alive: &dyn Fn(&str) -> bool,
) -> Result<Applied, BgpError> {
    for _ in 1..=MAX_ATTEMPTS {
        let current = store.get_typed::<BGPAdvertisement>(input.namespace, input.name)?;
        let mut ann: Annotations = current
            .as_ref()
            .and_then(|o| o.metadata.annotations.clone())
            .unwrap_or_default();
        let pruned = annotations::prune_dead(&mut ann, |p| alive(p));
        if !pruned.is_empty() {
            log::info(
                "BGP: pruned dead containers from the advertisement",
                json!({"name": input.name, "containers": pruned}),
            );
        }
        annotations::record(&mut ann, input.container_id, &input.record);
        let spec = spec(input, annotations::all_prefixes(&ann));
        let outcome = match current {
            None => {
                let mut object = BGPAdvertisement::new(input.name, spec);
                object.metadata.annotations = Some(ann);
                store
                    .create_typed(input.namespace, &object)
                    .map(|o| Applied::of(&o, true))
            }
            Some(mut object) => {
                object.metadata.annotations = Some(ann);
                object.spec = spec;
                store
                    .replace_typed(input.namespace, &object)
                    .map(|o| Applied::of(&o, false))
            }
        };
        match outcome {
            Ok(applied) => {
                log::debug(
                    "BGP: BGPAdvertisement applied",
                    json!({"name": input.name, "created": applied.created_uid.is_some()}),
                );
                return Ok(applied);
            }
            // Another container of this attachment wrote in between: re-read and re-apply.
            Err(e) if e.is_exists() || e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(BgpError::Contended {
        what: format!("BGPAdvertisement {}/{}", input.namespace, input.name),
        attempts: MAX_ATTEMPTS,
    })
}
