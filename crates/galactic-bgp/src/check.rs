//! CHECK: the VRF instance, this node's advertisement, the datapath rows and the EndpointSlice
//! against `prevResult`, after moving a container only an older chain's shared advertisement
//! records onto this node's ([`Target::adopt_legacy`], decision 0018).

use crate::annotations;
use crate::datapath;
use crate::error::BgpError;
use crate::ops::{
    attachment, plan, records_container, sid_of, usid_of, verify_chain, Backend, Target,
};
use crate::prev::Facts;
use crate::publish::Router;
use crate::slice::{self, SliceInput};
use crate::store::{Documents, ObjectStore};
use galactic_core::cni::Request;
use galactic_core::ident::{bgp_advertisement_name, legacy_advertisement_name, tenant_identifier};
use galactic_kube::{BGPAdvertisement, BGPVRFInstance, ClientOptions};

/// The VPC's VRF instance `name` refers to `router` and carries `rt`: its VRF id.
pub(crate) fn check_vrf(
    store: &dyn ObjectStore,
    ns: &str,
    name: &str,
    router: &Router,
    rt: &str,
) -> Result<u32, BgpError> {
    let object = store
        .get_typed::<BGPVRFInstance>(ns, name)?
        .ok_or_else(|| BgpError::Check(format!("BGPVRFInstance {ns}/{name} does not exist")))?;
    let routed = object.spec.router_ref.as_ref().map(|r| r.name.as_str());
    if routed != Some(router.name.as_str()) {
        return Err(BgpError::Check(format!(
            "BGPVRFInstance {name} refers to router {}, this node's is {}",
            routed.unwrap_or("none"),
            router.name
        )));
    }
    for (field, targets) in [
        ("importRouteTargets", &object.spec.import_route_targets),
        ("exportRouteTargets", &object.spec.export_route_targets),
    ] {
        if !targets.iter().any(|t| t.value == rt) {
            return Err(BgpError::Check(format!(
                "BGPVRFInstance {name} {field} lacks {rt}"
            )));
        }
    }
    u32::try_from(object.spec.vrf_id)
        .map_err(|_| BgpError::Check(format!("BGPVRFInstance {name} has no VRF id")))
}

fn check_advertisement(
    store: &dyn ObjectStore,
    ns: &str,
    name: &str,
    cid: &str,
    facts: &Facts,
) -> Result<(), BgpError> {
    let object = store
        .get_typed::<BGPAdvertisement>(ns, name)?
        .ok_or_else(|| BgpError::Check(format!("BGPAdvertisement {ns}/{name} does not exist")))?;
    for prefix in annotations::own_prefixes(facts) {
        if !object.spec.prefixes.contains(&prefix) {
            return Err(BgpError::Check(format!(
                "BGPAdvertisement {name} does not advertise {prefix}"
            )));
        }
    }
    let recorded = object
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| annotations::records(a, cid));
    if !recorded {
        return Err(BgpError::Check(format!(
            "BGPAdvertisement {name} has no record of this container ({})",
            annotations::cid41(cid)
        )));
    }
    Ok(())
}

/// The container is not also recorded on the shared advertisement of an older chain (its
/// prefixes would be advertised twice, there possibly from another node's router).
fn check_not_legacy(
    store: &dyn ObjectStore,
    ns: &str,
    name: &str,
    cid: &str,
) -> Result<(), BgpError> {
    if records_container(store, ns, name, cid)? {
        return Err(BgpError::Check(format!(
            "the shared BGPAdvertisement {name} of an older chain still records this container ({}); ADD moves it to the per-node advertisement",
            annotations::cid41(cid)
        )));
    }
    Ok(())
}

/// CHECK: the VRF instance, the advertisement's content and the EndpointSlice match, after
/// moving a container an older chain published onto this node's advertisement
/// ([`Target::adopt_legacy`]).
pub fn check(req: &Request) -> Result<(), BgpError> {
    let plan = plan(req)?;
    verify_chain(req, &plan)?;
    let backend = Backend::open(&req.node, ClientOptions::default())?;
    let store = backend.store();
    let target = Target::resolve(req, &plan, &backend)?;
    let (ns, router, cid) = (target.ns, &target.router, target.container_id.as_str());
    let vrf_id = check_vrf(store, ns, &target.vrf_name, router, &target.rt)?;
    if let Some(usid) = usid_of(router, vrf_id)?.filter(|_| req.node.ebpf_datapath) {
        let prefixes = annotations::own_prefixes(&plan.facts);
        datapath::check(&attachment(req, &plan, &prefixes), usid)?;
    }
    target.adopt_legacy(vrf_id)?;
    let (vpc, att) = (plan.stanza.vpc.raw(), plan.stanza.att.raw());
    let name = bgp_advertisement_name(vpc, att, &target.node);
    check_advertisement(store, ns, &name, cid, &plan.facts)?;
    check_not_legacy(store, ns, &legacy_advertisement_name(vpc, att), cid)?;
    if let (Some(address), Some(pod)) = (plan.facts.v6.map(|n| n.ip()), plan.pod.as_ref()) {
        let tenant = tenant_identifier(&plan.stanza.vpc, &plan.stanza.att);
        let input = SliceInput {
            pod,
            pod_uid: None,
            address,
            tenant: &tenant,
            sid: sid_of(router, vrf_id)?,
        };
        slice::check(store, &input)?;
    } else if backend.is_kube() && plan.facts.v6.is_some() {
        return Err(BgpError::NoPod {
            step: "EndpointSlice",
        });
    }
    Ok(())
}
