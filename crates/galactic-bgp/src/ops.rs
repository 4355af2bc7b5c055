//! ADD and STATUS (CHECK: `check`; DEL and GC: `retract`).

use crate::annotations::{self, ContainerRecord};
use crate::attachments::vpc_lock;
use crate::conf::Stanza;
use crate::crds;
use crate::datapath::{self, Attachment};
use crate::error::{BgpError, NodeNameError, PrevResultError};
use crate::netns;
use crate::prev::{self, Facts};
use crate::publications::{
    forget_and_retire, AttachmentKey, Publication, Publications, Published, RecordedVrf, SliceRef,
};
use crate::publish::{self, AdvertisementInput, Router};
use crate::slice::{self, PodRef, SliceInput};
use crate::store::kube::{InstalledCrd, KubeStore};
use crate::store::local::{LocalStore, LOCAL_LOCK_WAIT};
use crate::store::{document, parse, Documents, Done, Kind, ObjectStore, Op, StoreError};
use galactic_core::attachment::ChainPosition;
use galactic_core::bpf::usid::Usid;
use galactic_core::cni::{CniResult, Request};
use galactic_core::config::{NodeConfig, Publisher};
use galactic_core::ident::{
    bgp_advertisement_name, bgp_vrf_instance_name, check_node_name, legacy_advertisement_name,
    route_target, tenant_identifier, ChainIds, VpcId,
};
use galactic_core::log;
use galactic_core::rollback::Rollback;
use galactic_kube::{detect_node_name, local_addresses, ClientOptions, KubeClient, RetryPolicy};
use galactic_kube::{BGPAdvertisement, BGPRouter, BGPVRFInstance};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::net::Ipv6Addr;
use std::time::Duration;

/// The publication backend chosen by the node config.
pub enum Backend {
    /// The Kubernetes API (boxed: the client with its runtime is far larger than the local store).
    Kube(Box<KubeStore>),
    /// Files under the state directory.
    Local(LocalStore),
}

impl Backend {
    /// Opens the node's backend with `options` for the Kubernetes client.
    pub fn open(node: &NodeConfig, options: ClientOptions) -> Result<Self, BgpError> {
        Ok(match node.publisher {
            Publisher::Kubernetes => {
                let client = KubeClient::from_kubeconfig(&node.kubeconfig, options)
                    .map_err(StoreError::Kube)?;
                Self::Kube(Box::new(KubeStore::new(client)))
            }
            Publisher::Local => Self::Local(LocalStore::open(&node.state_dir, LOCAL_LOCK_WAIT)?),
        })
    }

    /// The store.
    pub fn store(&self) -> &dyn ObjectStore {
        match self {
            Self::Kube(k) => k.as_ref(),
            Self::Local(l) => l,
        }
    }

    pub(crate) fn is_kube(&self) -> bool {
        matches!(self, Self::Kube(_))
    }
}

/// This node's name: the node config (or `NODE_NAME`), else the Node whose InternalIP is local
/// (Kubernetes), else the host name (local backend). Checked once here for every name built
/// from it (VRF instance and advertisement).
pub(crate) fn node_name(node: &NodeConfig, backend: &Backend) -> Result<String, BgpError> {
    let name = find_node_name(node, backend)?;
    check_node_name(&name).map_err(|e| BgpError::NodeName(NodeNameError::Invalid(e)))?;
    Ok(name)
}

fn find_node_name(node: &NodeConfig, backend: &Backend) -> Result<String, BgpError> {
    if let Some(name) = &node.node_name {
        return Ok(name.clone());
    }
    match backend {
        Backend::Kube(k) => {
            let local = local_addresses()
                .map_err(|e| BgpError::NodeName(NodeNameError::LocalAddresses(e)))?;
            let name = detect_node_name(k.client(), &local)
                .map_err(|e| BgpError::NodeName(NodeNameError::Detect(e)))?;
            log::info(
                "Auto-detected node name from Kubernetes API",
                json!({"nodeName": name}),
            );
            Ok(name)
        }
        Backend::Local(_) => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_ascii_lowercase())
            .ok()
            .filter(|h| !h.is_empty())
            .ok_or(BgpError::NodeName(NodeNameError::NoHostName)),
    }
}

/// Everything an ADD or CHECK works from.
pub(crate) struct Plan {
    pub(crate) stanza: Stanza,
    pub(crate) facts: Facts,
    prev: CniResult,
    pub(crate) pod: Option<PodRef>,
}

impl Plan {
    fn ids(&self) -> ChainIds {
        ChainIds {
            vpc: self.stanza.vpc.clone(),
            att: self.stanza.att.clone(),
        }
    }
}

pub(crate) fn plan(req: &Request) -> Result<Plan, BgpError> {
    let stanza = Stanza::parse(&req.conf.raw)?;
    let prev = req.conf.prev_result().map_err(PrevResultError::Decode)?;
    let facts = prev::infer(prev.as_ref())?;
    Ok(Plan {
        stanza,
        facts,
        prev: prev.unwrap_or_default(),
        pod: PodRef::from_args(&req.env.args),
    })
}

/// Before anything is published: the stanza must name this chain's own attachment (the one the
/// master recorded for this container), or a NetworkAttachmentDefinition could advertise this
/// pod's prefixes in another VPC.
pub(crate) fn verify_chain(req: &Request, plan: &Plan) -> Result<(), BgpError> {
    let ids = plan.ids();
    ChainPosition {
        ids: &ids,
        prev_hosts: &[plan.facts.host_ifname.as_str()],
        network: &req.conf.name,
        container_id: req.env.container_id()?.as_str(),
        ifname: req.env.ifname()?.as_str(),
    }
    .verify(&req.node.state_dir)?;
    Ok(())
}

fn vrf_route_target(router: &Router, stanza: &Stanza) -> String {
    route_target(router.asn, &stanza.vpc)
}

pub(crate) fn usid_of(router: &Router, vrf_id: u32) -> Result<Option<Usid>, BgpError> {
    Ok(router
        .srv6
        .as_ref()
        .map(|(locator, node_id)| Usid::compute(locator, *node_id, i64::from(vrf_id)))
        .transpose()?)
}

pub(crate) fn sid_of(router: &Router, vrf_id: u32) -> Result<Option<Ipv6Addr>, BgpError> {
    Ok(usid_of(router, vrf_id)?.map(Usid::to_addr))
}

/// The datapath's view of this attachment.
pub(crate) fn attachment<'a>(
    req: &'a Request,
    plan: &'a Plan,
    prefixes: &'a [String],
) -> Attachment<'a> {
    Attachment {
        node: &req.node,
        internet_egress: plan.stanza.internet_egress,
        vpc: &plan.stanza.vpc,
        facts: &plan.facts,
        prefixes,
    }
}

/// `cid` off the attachment's shared advertisement of older chains (decision 0018).
fn leave_legacy(
    store: &dyn ObjectStore,
    ns: &str,
    ids: &ChainIds,
    cid: &str,
) -> Result<(), BgpError> {
    let left = publish::leave_legacy_advertisement(store, ns, ids, cid)?;
    if left != publish::Retraction::NotListed {
        log::info(
            "BGP: container moved off the shared BGPAdvertisement of an older chain",
            json!({"advertisement": legacy_advertisement_name(ids.vpc.raw(), ids.att.raw()),
                   "retraction": left.as_str()}),
        );
    }
    Ok(())
}

/// Records `input`'s container on this node's advertisement (its undo pushed when this call
/// created the object), then takes it off the attachment's shared advertisement of older chains
/// (decision 0018): after the per-node record exists, so the container is never unadvertised,
/// and with no undo, since a container recorded in both places would be advertised twice. ADD,
/// and the moves CHECK and GC make for an older chain's container, all publish through here.
pub(crate) fn advertise_here<'a>(
    store: &'a dyn ObjectStore,
    input: &AdvertisementInput<'_>,
    ids: &ChainIds,
    rollback: &mut Rollback<'a>,
) -> Result<(), BgpError> {
    let applied = publish::publish_advertisement(store, input, &netns::alive)?;
    undo_advertisement(store, input, &applied, rollback);
    leave_legacy(store, input.namespace, ids, input.container_id)
}

/// The undo of an advertisement this call created.
fn undo_advertisement<'a>(
    store: &'a dyn ObjectStore,
    input: &AdvertisementInput<'_>,
    applied: &publish::Applied,
    rollback: &mut Rollback<'a>,
) {
    if let Some(uid) = applied.created_uid.clone() {
        let (ns, name) = (input.namespace.to_owned(), input.name.to_owned());
        rollback.push(format!("delete BGPAdvertisement {name}"), move || {
            store.delete(Kind::Advertisement, &ns, &name, &uid)
        });
    }
}

/// The pod's uid for the owner reference from the Pod as read (`found`): required from the
/// API, optional locally.
fn pod_uid(
    backend: &Backend,
    pod: &PodRef,
    found: Option<Pod>,
) -> Result<Option<String>, BgpError> {
    match found {
        Some(object) => Ok(object.metadata.uid),
        None if backend.is_kube() => Err(BgpError::Store(StoreError::NotFound {
            what: format!("get owning Pod {}/{}", pod.namespace, pod.name),
        })),
        None => Ok(None),
    }
}

/// ADD: publish, then print `prevResult` unchanged. Its publication record first; then, under
/// the VPC's lock, every read at once ([`FirstRound`]: the node's routers, the VPC's VRF
/// instances unless another record of the VPC names its instance, the legacy advertisement,
/// the pod) and the VRF instance (reused, or claimed: [`VrfStep`]); then the datapath rows, and
/// the advertisement and EndpointSlice created together, with a claimed instance (each read and
/// rewritten only when it exists already); each
/// write pushing its undo, so a failure removes only what this ADD created. What the writes
/// answered goes into the record last (what DEL deletes by).
pub fn add(req: &Request) -> Result<CniResult, BgpError> {
    let plan = plan(req)?;
    verify_chain(req, &plan)?;
    let backend = Backend::open(&req.node, ClientOptions::default())?;
    if backend.is_kube() && plan.facts.v6.is_some() && plan.pod.is_none() {
        return Err(BgpError::NoPod {
            step: "publish EndpointSlice",
        });
    }
    let node = node_name(&req.node, &backend)?;
    let key = AttachmentKey {
        network: &req.conf.name,
        container_id: req.env.container_id()?.as_str(),
        ifname: req.env.ifname()?.as_str(),
    };
    Publications::new(&req.node.state_dir).ensure_seeded(&req.node, &node, Some(&key))?;
    let mut rollback = Rollback::new();
    // The plan: the intent recorded, everything read in one round, the VRF instance chosen.
    let (target, vrf, round) = Target::publish_vrf(req, &plan, &backend, node, &mut rollback)?;
    // Applied: the datapath rows, then the objects in one round, then the record of the writes.
    let sid = target.register_datapath(vrf.id(), &mut rollback)?;
    target.migrate_local_legacy()?;
    // Debug builds: a test stops the ADD here to prove the rollback removes only this ADD's rows.
    galactic_core::failpoint::hit("bgp-after-datapath")?;
    galactic_core::failpoint::hit("bgp-before-slice")?;
    let (published, vrf) = target.publish_objects(vrf, sid, round, &mut rollback)?;
    // Debug builds: a test kills the ADD here, its objects (and a claimed instance) created and
    // its record still the intent, to prove the runtime's DEL deletes them by that intent.
    galactic_core::failpoint::hit("bgp-after-objects")?;
    target.record(published)?;
    rollback.commit();
    log::info(
        "ADD: BGP state published",
        json!({"vrfInstance": target.vrf_name, "vrfID": vrf.vrf_id,
               "advertisement": target.advertisement_name(), "nodeName": target.node}),
    );
    drop(target);
    Ok(plan.prev)
}

/// The VPC's VRF instance after ADD's first round: there already (reused, or created by a
/// round of its own), or claimed and to be created in the round of the advertisement and the
/// EndpointSlice.
pub(crate) enum VrfStep {
    /// The instance exists.
    Present(publish::VrfInstance),
    /// The instance this ADD creates together with the objects that name its id (boxed: the
    /// instance's document is large next to a reused instance's id and uid).
    Pending(Box<PendingInstance>),
}

impl VrfStep {
    /// The VRF id, final in both cases.
    fn id(&self) -> u32 {
        match self {
            Self::Present(vrf) => vrf.vrf_id,
            Self::Pending(p) => p.claim.vrf_id,
        }
    }
}

/// A claimed VRF instance not created yet, and the node's VRF id lock that keeps its id final
/// until its create is answered (decision 0077): while it is held no other ADD of the node
/// lists the router's instances, so none can choose the same id.
pub(crate) struct PendingInstance {
    claim: publish::PlannedClaim,
    ids_lock: galactic_core::lockfile::LockGuard,
}

/// What ADD's first round read, in flight together.
pub(crate) struct FirstRound {
    /// The attachment's shared advertisement of older chains (decision 0018).
    legacy: Option<BGPAdvertisement>,
    /// The owning Pod, when the runtime did not pass its uid.
    pod: Option<Pod>,
}

/// Where and what an ADD publishes, resolved before anything is written.
pub(crate) struct Target<'a> {
    req: &'a Request,
    plan: &'a Plan,
    backend: &'a Backend,
    /// The BGP namespace.
    pub(crate) ns: &'a str,
    pub(crate) node: String,
    pub(crate) router: Router,
    /// The VPC's route target on this node.
    pub(crate) rt: String,
    pub(crate) vrf_name: String,
    pub(crate) container_id: String,
    netns: String,
    /// This ADD's publication record.
    intent: Option<Publication>,
    /// Set when the VPC's instance turned out to be another writer's ([`Theirs`]).
    theirs: Theirs,
}

/// Whether the VPC's instance this ADD meets is another writer's, created since the first
/// round's list with another VRF id than this ADD claimed: shared with the undo of the
/// publication record, which then forgets the record and keeps that instance. It is not this
/// ADD's to delete, and the runtime's retry of the contended ADD reuses its id.
#[derive(Clone, Default)]
struct Theirs(std::rc::Rc<std::cell::Cell<bool>>);

impl Theirs {
    fn mark(&self) {
        self.0.set(true);
    }

    fn marked(&self) -> bool {
        self.0.get()
    }
}

/// The node's lock of VRF id allocation: an ADD that may claim an id holds it from its list of
/// the router's instances to its create, so two ADDs of the node never claim the same id and
/// a created instance needs no re-list (decision 0077).
fn vrf_id_lock(
    node: &galactic_core::config::NodeConfig,
) -> Result<galactic_core::lockfile::LockGuard, BgpError> {
    let path = node.state_dir.join("locks").join("bgp-vrf-ids");
    galactic_core::lockfile::acquire(&path, LOCAL_LOCK_WAIT)
        .map_err(|e| BgpError::Store(StoreError::Lock(e)))
}

/// This ADD's publication record, its intent, written (under the VPC's lock) before any object
/// so a killed ADD leaves what its DEL deletes by. When this ADD created the record, its undo
/// is pushed first so that it runs last, after everything else the ADD published: the record
/// goes and, with the VPC's last record, the instance ([`forget_and_retire`]), unless `theirs`
/// says the instance is another writer's.
fn record_intent<'a>(
    node: &'a NodeConfig,
    store: &'a dyn ObjectStore,
    records: &Publications,
    vpc: &VpcId,
    intent: &Publication,
    theirs: &Theirs,
    rollback: &mut Rollback<'a>,
) -> Result<(), BgpError> {
    if records.put(vpc, intent)? {
        let (vpc, intent, theirs) = (vpc.clone(), intent.clone(), theirs.clone());
        rollback.push(
            format!("forget the publication record of {}", intent.host_ifname),
            move || match theirs.marked() {
                true => forget_keeping_instance(node, &vpc, &intent),
                false => forget_and_retire(node, store, &vpc, Some(&intent), &intent.vrf_instance)
                    .map(|_| ()),
            },
        );
    }
    Ok(())
}

/// The undo of a contended ADD's record ([`Theirs`]): the record goes, under the VPC's lock,
/// and the other writer's instance stays.
fn forget_keeping_instance(
    node: &NodeConfig,
    vpc: &VpcId,
    intent: &Publication,
) -> Result<(), BgpError> {
    let _held = vpc_lock(node, vpc)?;
    Publications::new(&node.state_dir).remove(vpc, intent)
}

/// What ADD's first round answered: the node's routers, the VPC's VRF instances (when no
/// other record of the VPC names its instance) and what publishing the objects needs.
struct FirstAnswers {
    routers: Vec<Result<BGPRouter, StoreError>>,
    instances: Option<Vec<Result<BGPVRFInstance, StoreError>>>,
    round: FirstRound,
}

/// ADD's first round: every read in one batch, so they cost one round trip together. The
/// VPC's instances are listed only when `list_instances` (no record names the instance).
fn first_round(
    store: &dyn ObjectStore,
    ns: &str,
    plan: &Plan,
    list_instances: bool,
) -> Result<FirstAnswers, BgpError> {
    let ids = plan.ids();
    let legacy = legacy_advertisement_name(ids.vpc.raw(), ids.att.raw());
    // The Pod is read only for the EndpointSlice's owner (IPv6), when the runtime passed no uid.
    let pod = plan
        .pod
        .as_ref()
        .filter(|p| p.uid.is_none() && plan.facts.v6.is_some());
    let ops = first_round_ops(ns, &legacy, pod, list_instances);
    let answers = store.batch(&ops).into_iter();
    first_answers(answers, pod.is_some(), list_instances)
}

/// The first round's requests, in the order [`first_answers`] reads their answers: the
/// routers, the legacy advertisement, the Pod (`pod`), the VPC's instances (`list_instances`).
fn first_round_ops<'b>(
    ns: &'b str,
    legacy: &'b str,
    pod: Option<&'b PodRef>,
    list_instances: bool,
) -> Vec<Op<'b>> {
    let mut ops = vec![
        Op::List {
            kind: Kind::Router,
            namespace: ns,
        },
        Op::Get {
            kind: Kind::Advertisement,
            namespace: ns,
            name: legacy,
        },
    ];
    if let Some(pod) = pod {
        ops.push(Op::Get {
            kind: Kind::Pod,
            namespace: &pod.namespace,
            name: &pod.name,
        });
    }
    if list_instances {
        ops.push(Op::List {
            kind: Kind::VrfInstance,
            namespace: ns,
        });
    }
    ops
}

/// The first round's `answers`, in the order of [`first_round_ops`]'s requests (`pod`: the Pod
/// was asked for; `instances`: the VPC's instances were).
fn first_answers(
    mut answers: impl Iterator<Item = Result<Done, StoreError>>,
    pod: bool,
    instances: bool,
) -> Result<FirstAnswers, BgpError> {
    let routers = listed(answers.next())?;
    let round = FirstRound {
        legacy: found(answers.next())?,
        pod: match pod {
            true => found(answers.next())?,
            false => None,
        },
    };
    let instances = match instances {
        true => Some(listed(answers.next())?),
        false => None,
    };
    Ok(FirstAnswers {
        routers,
        instances,
        round,
    })
}

/// `answer` as the typed objects it listed.
fn listed<D: crate::store::Document>(
    answer: Option<Result<Done, StoreError>>,
) -> Result<Vec<Result<D, StoreError>>, BgpError> {
    let objects = answer.ok_or_else(missing_answer)??.listed()?;
    Ok(objects.into_iter().map(parse).collect())
}

/// `answer` as the typed object it found.
fn found<D: crate::store::Document>(
    answer: Option<Result<Done, StoreError>>,
) -> Result<Option<D>, BgpError> {
    let object = answer.ok_or_else(missing_answer)??.found()?;
    Ok(object.map(parse).transpose()?)
}

fn missing_answer() -> StoreError {
    StoreError::Shape {
        what: "a batch of requests".into(),
        why: "fewer answers than requests".into(),
    }
}

impl<'a> Target<'a> {
    pub(crate) fn resolve(
        req: &'a Request,
        plan: &'a Plan,
        backend: &'a Backend,
    ) -> Result<Self, BgpError> {
        let node = node_name(&req.node, backend)?;
        let ns = req.node.namespace.as_str();
        let router = publish::lookup_router(backend.store(), ns, &node, backend.is_kube())?;
        Self::new(req, plan, backend, node, router)
    }

    fn new(
        req: &'a Request,
        plan: &'a Plan,
        backend: &'a Backend,
        node: String,
        router: Router,
    ) -> Result<Self, BgpError> {
        let netns = req.env.netns.as_ref();
        Ok(Self {
            rt: vrf_route_target(&router, &plan.stanza),
            vrf_name: bgp_vrf_instance_name(plan.stanza.vpc.raw(), &node),
            container_id: req.env.container_id()?.as_str().to_owned(),
            netns: netns.map(|p| p.display().to_string()).unwrap_or_default(),
            req,
            plan,
            backend,
            ns: req.node.namespace.as_str(),
            node,
            router,
            intent: None,
            theirs: Theirs::default(),
        })
    }

    /// ADD up to the VPC's VRF instance, under the VPC's lock: this attachment's publication
    /// record (its intent: what this ADD will publish), then the first round's reads, then the
    /// VPC's BGPVRFInstance on this node when it is the VPC's first attachment here: under the
    /// node's VRF id lock too when no other record of the VPC names the instance, and then
    /// only claimed, to be created in the round of the objects naming its id ([`VrfStep`]).
    /// Another record of the VPC that names the instance it published, for this router and
    /// route target, stands for it: while that record is there the instance is not retired.
    /// A record this ADD created is undone last, after everything else it published: the
    /// record goes and, with the VPC's last record, the instance ([`forget_and_retire`]), unless
    /// the instance is another writer's ([`Theirs`]).
    fn publish_vrf(
        req: &'a Request,
        plan: &'a Plan,
        backend: &'a Backend,
        node: String,
        rollback: &mut Rollback<'a>,
    ) -> Result<(Self, VrfStep, FirstRound), BgpError> {
        let ns = req.node.namespace.as_str();
        let vpc = &plan.stanza.vpc;
        let records = Publications::new(&req.node.state_dir);
        let intent = publication(req, plan, ns, &node)?;
        let held = vpc_lock(&req.node, vpc)?;
        let theirs = Theirs::default();
        let store = backend.store();
        record_intent(&req.node, store, &records, vpc, &intent, &theirs, rollback)?;
        // Debug builds: a test kills the ADD here, after the intent and before any object.
        galactic_core::failpoint::hit("bgp-after-intent")?;
        let recorded = records.recorded_vrf(vpc, &intent)?;
        let ids_lock = match recorded {
            None => Some(vrf_id_lock(&req.node)?),
            Some(_) => None,
        };
        let read = first_round(backend.store(), ns, plan, recorded.is_none())?;
        let router = publish::router_of(read.routers, ns, &node, backend.is_kube())?;
        let mut target = Self::new(req, plan, backend, node, router)?;
        target.theirs = theirs;
        let vrf = target.choose_vrf(recorded, read.instances, ids_lock)?;
        drop(held);
        target.intent = Some(intent);
        Ok((target, vrf, read.round))
    }

    /// The VPC's instance after the first round: the one another record of the VPC names, when
    /// it is for this router and route target (the record stands for it, so nothing is read);
    /// else the one [`Self::vrf_step`] makes sure of from the router's instances it listed.
    fn choose_vrf(
        &self,
        recorded: Option<RecordedVrf>,
        listed: Option<Vec<Result<BGPVRFInstance, StoreError>>>,
        ids_lock: Option<galactic_core::lockfile::LockGuard>,
    ) -> Result<VrfStep, BgpError> {
        let reusable =
            recorded.filter(|r| r.router == self.router.name && r.route_target == self.rt);
        match reusable {
            Some(r) => Ok(VrfStep::Present(publish::VrfInstance {
                vrf_id: r.vrf_id,
                created_uid: None,
                uid: r.uid,
            })),
            None => {
                let mine = listed.map(|i| publish::routers_instances(i, &self.router));
                self.vrf_step(mine, ids_lock)
            }
        }
    }

    /// The VPC's instance when no record names it: with the node's VRF id lock (`ids_lock`)
    /// and the router's instances it listed (`mine`), a missing instance is only claimed, to be
    /// created with the objects naming its id, the lock kept until then; otherwise it is made
    /// sure of now ([`publish::ensure_vrf_instance`]: reused, or claimed against rivals).
    fn vrf_step(
        &self,
        mine: Option<Vec<BGPVRFInstance>>,
        ids_lock: Option<galactic_core::lockfile::LockGuard>,
    ) -> Result<VrfStep, BgpError> {
        let vrf_target = self.vrf_target();
        let ids_lock = match (ids_lock, &mine) {
            (Some(lock), Some(listed)) => match publish::plan_claim(&vrf_target, listed)? {
                Some(claim) => {
                    let pending = PendingInstance {
                        claim,
                        ids_lock: lock,
                    };
                    return Ok(VrfStep::Pending(Box::new(pending)));
                }
                None => Some(lock),
            },
            (lock, _) => lock,
        };
        let allocation = match ids_lock {
            Some(_) => publish::Allocation::Locked,
            None => publish::Allocation::Contended,
        };
        let vrf =
            publish::ensure_vrf_instance(self.backend.store(), &vrf_target, mine, allocation)?;
        drop(ids_lock);
        Ok(VrfStep::Present(vrf))
    }

    /// The VPC's BGPVRFInstance on this node, as ADD makes sure of it.
    fn vrf_target(&self) -> publish::VrfTarget<'_> {
        publish::VrfTarget {
            namespace: self.ns,
            name: &self.vrf_name,
            router: &self.router,
            route_target: &self.rt,
        }
    }

    /// The advertisement and the EndpointSlice (an attachment with an IPv6 address and a pod),
    /// and a claimed VRF instance, all created in one round: each object create that meets an
    /// existing object reads it and rewrites it. Then the container off the attachment's shared
    /// advertisement of older chains, when it is recorded there. What the writes left, and the
    /// VRF instance.
    fn publish_objects(
        &self,
        vrf: VrfStep,
        sid: Option<Ipv6Addr>,
        round: FirstRound,
        rollback: &mut Rollback<'a>,
    ) -> Result<(Published, publish::VrfInstance), BgpError> {
        let name = self.advertisement_name();
        let input = self.advertisement_input(&name, vrf.id());
        let docs = self.objects_round(&input, &vrf, sid, round.pod)?;
        let answers = self.backend.store().batch(&docs.ops(self.ns));
        let (vrf, adv, slice_uid) = self.objects_answers(&docs, &input, vrf, answers, rollback)?;
        self.leave_legacy_recorded(round.legacy)?;
        Ok((self.published(&vrf, adv, slice_uid), vrf))
    }

    /// The documents of the objects round, all built before it so that it is one batch: the
    /// advertisement's, the EndpointSlice's (with an IPv6 address and a pod) and a claimed VRF
    /// instance's.
    fn objects_round(
        &self,
        input: &AdvertisementInput<'_>,
        vrf: &VrfStep,
        sid: Option<Ipv6Addr>,
        pod: Option<Pod>,
    ) -> Result<ObjectsRound<'a>, BgpError> {
        let advertisement = document(&publish::first_advertisement(input))?;
        let slice = match self.slice_input(sid, pod)? {
            Some(s) => {
                let doc = document(&slice::first_slice(&s.input()))?;
                Some((s, doc))
            }
            None => None,
        };
        let instance = match vrf {
            VrfStep::Pending(p) => Some(document(&p.claim.instance)?),
            VrfStep::Present(_) => None,
        };
        Ok(ObjectsRound {
            advertisement,
            slice,
            instance,
        })
    }

    /// The objects round's `answers`, in the order of [`ObjectsRound::ops`]: every create that
    /// succeeded gets its undo before any failure is returned; a created instance's undo is the
    /// publication record's (it retires the VPC's instance with the VPC's last record). The VRF
    /// instance, the advertisement as written and the EndpointSlice's uid.
    fn objects_answers(
        &self,
        docs: &ObjectsRound<'_>,
        input: &AdvertisementInput<'_>,
        vrf: VrfStep,
        answers: Vec<Result<Done, StoreError>>,
        rollback: &mut Rollback<'a>,
    ) -> Result<(publish::VrfInstance, publish::Applied, Option<String>), BgpError> {
        let mut answers = answers.into_iter();
        let instance_answer = match docs.instance {
            Some(_) => Some(answers.next().ok_or_else(missing_answer)?),
            None => None,
        };
        let adv_answer = answers.next().ok_or_else(missing_answer)?;
        let slice_answer = answers.next();
        let adv = self.advertised(input, adv_answer, rollback);
        let slice_uid = match (&docs.slice, slice_answer) {
            (Some((s, _)), Some(answer)) => Some(self.sliced(s, answer, rollback)),
            _ => None,
        };
        let vrf = self.instance_of(vrf, instance_answer)?;
        let slice_uid = slice_uid.transpose()?;
        Ok((vrf, adv?, slice_uid))
    }

    /// The container off the attachment's shared advertisement of older chains, when the first
    /// round found it recorded there (`legacy`): after this node's advertisement exists, so
    /// the container is never unadvertised, and with no request when it is not there.
    fn leave_legacy_recorded(&self, legacy: Option<BGPAdvertisement>) -> Result<(), BgpError> {
        if legacy
            .and_then(|o| o.metadata.annotations)
            .is_some_and(|a| annotations::records(&a, &self.container_id))
        {
            let store = self.backend.store();
            leave_legacy(store, self.ns, &self.plan.ids(), &self.container_id)?;
        }
        Ok(())
    }

    /// What the writes left, for the publication record (what DEL deletes by).
    fn published(
        &self,
        vrf: &publish::VrfInstance,
        adv: publish::Applied,
        slice_uid: Option<String>,
    ) -> Published {
        Published {
            vrf: RecordedVrf {
                uid: vrf.uid.clone(),
                vrf_id: vrf.vrf_id,
                router: self.router.name.clone(),
                route_target: self.rt.clone(),
            },
            advertisement_uid: adv.uid,
            advertisement_sole_version: adv.sole_version,
            endpoint_slice_uid: slice_uid,
        }
    }

    /// The VPC's instance after the round that created a claimed one (`answer`), the node's VRF
    /// id lock released once it is answered. An instance of the name that appeared since the
    /// list (a writer outside this node's lock) is reused when it has the claimed id; with
    /// another id the objects just created name the wrong one, so the ADD fails as contended
    /// (its rollback removes them and keeps that instance: [`Theirs`]) and the runtime's retry
    /// reuses the instance's id.
    fn instance_of(
        &self,
        vrf: VrfStep,
        answer: Option<Result<Done, StoreError>>,
    ) -> Result<publish::VrfInstance, BgpError> {
        let pending = match vrf {
            VrfStep::Present(vrf) => return Ok(vrf),
            VrfStep::Pending(pending) => pending,
        };
        let vrf_id = pending.claim.vrf_id;
        match answer.ok_or_else(missing_answer)? {
            Ok(done) => {
                drop(pending.ids_lock);
                let created: BGPVRFInstance = parse(done.created()?)?;
                let uid = created.metadata.uid.unwrap_or_default();
                log::debug(
                    "BGP: BGPVRFInstance created",
                    json!({"name": self.vrf_name, "vrfID": vrf_id}),
                );
                Ok(publish::VrfInstance {
                    vrf_id,
                    created_uid: Some(uid.clone()),
                    uid,
                })
            }
            Err(e) if e.is_exists() => {
                let store = self.backend.store();
                let locked = publish::Allocation::Locked;
                let found = publish::ensure_vrf_instance(store, &self.vrf_target(), None, locked)?;
                drop(pending.ids_lock);
                if found.vrf_id == vrf_id {
                    return Ok(found);
                }
                // Found, not created by this ADD: the other writer's, kept by the rollback.
                if found.created_uid.is_none() {
                    self.theirs.mark();
                }
                Err(BgpError::Contended {
                    what: format!(
                        "VRF id of BGPVRFInstance {}/{}: created meanwhile with id {} (claimed {vrf_id})",
                        self.ns, self.vrf_name, found.vrf_id
                    ),
                    attempts: 1,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The advertisement after its create's `answer`: created, or (it exists) read and
    /// rewritten.
    fn advertised(
        &self,
        input: &AdvertisementInput<'_>,
        answer: Result<Done, StoreError>,
        rollback: &mut Rollback<'a>,
    ) -> Result<publish::Applied, BgpError> {
        let store = self.backend.store();
        let applied = match answer {
            Ok(done) => publish::Applied::of(&parse(done.created()?)?, true),
            Err(e) if e.is_exists() => publish::publish_advertisement(store, input, &netns::alive)?,
            Err(e) => return Err(e.into()),
        };
        undo_advertisement(store, input, &applied, rollback);
        Ok(applied)
    }

    /// The EndpointSlice after its create's `answer`: created, or (it exists) read, checked
    /// to be ours and rewritten. Its uid.
    fn sliced(
        &self,
        s: &SliceTarget<'_>,
        answer: Result<Done, StoreError>,
        rollback: &mut Rollback<'a>,
    ) -> Result<String, BgpError> {
        let store = self.backend.store();
        let applied = match answer {
            Ok(done) => slice::SliceApplied::of(&parse(done.created()?)?, true),
            Err(e) if e.is_exists() => slice::apply(store, &s.input())?,
            Err(e) => return Err(e.into()),
        };
        if applied.created {
            let (pod, uid) = (s.pod.clone(), applied.uid.clone());
            rollback.push(
                format!("delete EndpointSlice {}/{}", pod.namespace, pod.name),
                move || store.delete(Kind::EndpointSlice, &pod.namespace, &pod.name, &uid),
            );
        }
        Ok(applied.uid)
    }

    /// What this ADD's writes left, into its publication record (under the VPC's lock).
    fn record(&self, published: Published) -> Result<(), BgpError> {
        let Some(intent) = &self.intent else {
            return Ok(());
        };
        let vpc = &self.plan.stanza.vpc;
        let mut done = intent.clone();
        done.published = Some(published);
        let _held = vpc_lock(&self.req.node, vpc)?;
        Publications::new(&self.req.node.state_dir).put(vpc, &done)?;
        Ok(())
    }

    /// The attachment's BGPAdvertisement name on this node.
    fn advertisement_name(&self) -> String {
        let stanza = &self.plan.stanza;
        bgp_advertisement_name(stanza.vpc.raw(), stanza.att.raw(), &self.node)
    }

    /// What the advertisement `name` is built from.
    fn advertisement_input<'b>(&'b self, name: &'b str, vrf_id: u32) -> AdvertisementInput<'b> {
        AdvertisementInput {
            namespace: self.ns,
            name,
            router: &self.router,
            route_target: &self.rt,
            vrf_id,
            container_id: &self.container_id,
            record: ContainerRecord::of(&self.netns, &self.plan.facts),
            host_ifname: &self.plan.facts.host_ifname,
        }
    }

    /// What the pod's EndpointSlice says, for an attachment with an IPv6 address and a pod.
    fn slice_input(
        &self,
        sid: Option<Ipv6Addr>,
        read: Option<Pod>,
    ) -> Result<Option<SliceTarget<'a>>, BgpError> {
        let (Some(address), Some(pod)) = (self.plan.facts.v6, self.plan.pod.as_ref()) else {
            return Ok(None);
        };
        let pod_uid = match &pod.uid {
            Some(uid) => Some(uid.clone()),
            None => pod_uid(self.backend, pod, read)?,
        };
        Ok(Some(SliceTarget {
            pod,
            pod_uid,
            address: address.ip(),
            tenant: tenant_identifier(&self.plan.stanza.vpc, &self.plan.stanza.att),
            sid,
        }))
    }

    /// The attachment's eBPF datapath rows, when the node's router has a uSID; its SID.
    fn register_datapath(
        &self,
        vrf_id: u32,
        rollback: &mut Rollback<'a>,
    ) -> Result<Option<Ipv6Addr>, BgpError> {
        let usid = usid_of(&self.router, vrf_id)?;
        let sid = usid.map(Usid::to_addr);
        match usid {
            Some(_) if !self.req.node.ebpf_datapath => log::info(
                "ADD: eBPF datapath switched off on this node; SID published without registration",
                json!({"sid": sid.map(|s| s.to_string())}),
            ),
            Some(usid) => {
                let prefixes = annotations::own_prefixes(&self.plan.facts);
                datapath::register(&attachment(self.req, self.plan, &prefixes), usid)?;
                // Only this attachment's rows go; the shared node rows stay, and the VPC's egress
                // rows go only when no other attachment of the VPC is registered.
                let state_dir = self.req.node.state_dir.clone();
                let host = self.plan.facts.host_ifname.clone();
                rollback.push(format!("unregister {host} from the eBPF datapath"), move || {
                    galactic_core::bpf::unregister_attachment(&state_dir, &host).map(|_| ())
                });
            }
            None => log::debug(
                "ADD: this node's BGPRouter has no srv6Locator/nodeID; eBPF datapath registration skipped",
                json!({"router": self.router.name}),
            ),
        }
        Ok(sid)
    }

    /// Local publisher: the attachment's two-segment document of our chain before decision 0018
    /// becomes this node's per-node document, so its other containers stay advertised once.
    fn migrate_local_legacy(&self) -> Result<(), BgpError> {
        if self.backend.is_kube() {
            return Ok(());
        }
        let ids = self.plan.ids();
        let legacy = legacy_advertisement_name(ids.vpc.raw(), ids.att.raw());
        let store = self.backend.store();
        if publish::migrate_local_legacy(store, self.ns, &legacy, &self.node)? {
            log::info(
                "ADD: two-segment advertisement migrated to the per-node name",
                json!({"advertisement": legacy}),
            );
        }
        Ok(())
    }

    /// The attachment's BGPAdvertisement, with or without addresses: the router keeps the VPC's
    /// VRF on this node only while an advertisement of it exists (decision 0016); then the
    /// container off the attachment's shared advertisement of older chains. Its name.
    fn advertise(&self, vrf_id: u32, rollback: &mut Rollback<'a>) -> Result<String, BgpError> {
        let name = self.advertisement_name();
        let input = self.advertisement_input(&name, vrf_id);
        advertise_here(self.backend.store(), &input, &self.plan.ids(), rollback)?;
        Ok(name)
    }

    /// CHECK of a container an older chain published on the attachment's shared advertisement
    /// alone (a pod the Go chain attached before the switch: Kubernetes never re-adds a running
    /// pod, so no ADD would ever move it) completes the move an ADD makes, through ADD's own
    /// [`Self::advertise`]: this node's advertisement records it with its prefixes from
    /// `prevResult` and this node's router, then the shared object lets it go. The masters'
    /// CHECK adopts the Go chain's attachments the same way (decision 0061). A container on
    /// both objects is left for CHECK to report (decision 0018). Whether it moved.
    pub(crate) fn adopt_legacy(&self, vrf_id: u32) -> Result<bool, BgpError> {
        let store = self.backend.store();
        let stanza = &self.plan.stanza;
        let (vpc, att) = (stanza.vpc.raw(), stanza.att.raw());
        let cid = self.container_id.as_str();
        let here = bgp_advertisement_name(vpc, att, &self.node);
        if records_container(store, self.ns, &here, cid)?
            || !records_container(store, self.ns, &legacy_advertisement_name(vpc, att), cid)?
        {
            return Ok(false);
        }
        let mut rollback = Rollback::new();
        self.advertise(vrf_id, &mut rollback)?;
        rollback.commit();
        log::info(
            "CHECK: container of an older chain moved to this node's BGPAdvertisement",
            json!({"advertisement": here}),
        );
        Ok(true)
    }
}

/// The documents of ADD's objects round ([`Target::objects_round`]).
struct ObjectsRound<'a> {
    /// The advertisement's.
    advertisement: serde_json::Value,
    /// What the EndpointSlice says, and its document.
    slice: Option<(SliceTarget<'a>, serde_json::Value)>,
    /// A claimed VRF instance's.
    instance: Option<serde_json::Value>,
}

impl ObjectsRound<'_> {
    /// The round's creates, in the order [`Target::objects_answers`] reads their answers: the
    /// claimed instance, the advertisement, the EndpointSlice.
    fn ops<'b>(&'b self, ns: &'b str) -> Vec<Op<'b>> {
        let mut ops = Vec::with_capacity(3);
        if let Some(doc) = &self.instance {
            ops.push(Op::Create {
                kind: Kind::VrfInstance,
                namespace: ns,
                object: doc,
            });
        }
        ops.push(Op::Create {
            kind: Kind::Advertisement,
            namespace: ns,
            object: &self.advertisement,
        });
        if let Some((s, doc)) = &self.slice {
            ops.push(Op::Create {
                kind: Kind::EndpointSlice,
                namespace: &s.pod.namespace,
                object: doc,
            });
        }
        ops
    }
}

/// What ADD's EndpointSlice says.
struct SliceTarget<'a> {
    pod: &'a PodRef,
    pod_uid: Option<String>,
    address: Ipv6Addr,
    tenant: String,
    sid: Option<Ipv6Addr>,
}

impl SliceTarget<'_> {
    fn input(&self) -> SliceInput<'_> {
        SliceInput {
            pod: self.pod,
            pod_uid: self.pod_uid.as_deref(),
            address: self.address,
            tenant: &self.tenant,
            sid: self.sid,
        }
    }
}

/// What an ADD publishes, by name: its publication record.
fn publication(req: &Request, plan: &Plan, ns: &str, node: &str) -> Result<Publication, BgpError> {
    let key = AttachmentKey {
        network: &req.conf.name,
        container_id: req.env.container_id()?.as_str(),
        ifname: req.env.ifname()?.as_str(),
    };
    let mut p = Publication::named(&key, &plan.ids(), ns, node);
    p.endpoint_slice = plan.pod.as_ref().map(|pod| SliceRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    });
    Ok(p)
}

/// Whether the advertisement `name` exists and records container `cid`.
pub(crate) fn records_container(
    store: &dyn ObjectStore,
    ns: &str,
    name: &str,
    cid: &str,
) -> Result<bool, BgpError> {
    Ok(store
        .get_typed::<BGPAdvertisement>(ns, name)?
        .and_then(|o| o.metadata.annotations)
        .is_some_and(|a| annotations::records(&a, cid)))
}

/// STATUS: the API server answers (one quick attempt), or the state directory is writable.
pub fn status(req: &Request) -> Result<(), BgpError> {
    let options = ClientOptions {
        call_timeout: Duration::from_secs(2),
        retry: RetryPolicy::once(),
    };
    let backend = Backend::open(&req.node, options)?;
    backend.store().probe(&req.node.namespace)?;
    if let Backend::Kube(kube) = &backend {
        installed_crds_suffice(kube)?;
    }
    Ok(())
}

/// The installed CRDs have every property and enum value galactic-bgp reads or writes
/// ([`crds::NEEDED`]). A node whose RBAC may not read CRDs cannot judge: logged, not refused.
fn installed_crds_suffice(kube: &KubeStore) -> Result<(), BgpError> {
    for (name, needed) in crds::NEEDED {
        let crd = match kube.installed_crd(name)? {
            InstalledCrd::Found(crd) => crd,
            InstalledCrd::Missing => return Err(BgpError::CrdMissing((*name).to_owned())),
            InstalledCrd::Forbidden => {
                log::warn(
                    "STATUS: may not read the installed CRDs (RBAC); their fields are not checked",
                    json!({"crd": name}),
                );
                return Ok(());
            }
        };
        let lacking = crds::lacking(&crd, needed);
        if !lacking.is_empty() {
            return Err(BgpError::CrdLacks {
                crd: (*name).to_owned(),
                lacking,
            });
        }
    }
    Ok(())
}
