//! The datapath tests' node: a throwaway host (the test kit's `Host`) with the veth master, IPAM
//! and galactic-bgp in `CNI_PATH`, a private bpffs with the maps pinned, and a BGPRouter with an
//! SRv6 locator in the local store. The chain master → galactic-bgp is run by the test kit's
//! runtime; the rest reads the maps back with aya.

#![allow(dead_code)] // each test file uses a different part of the fixture
#![allow(clippy::unwrap_used)] // a fixture panics to report a failed precondition

use galactic_core::bpf::abi::IfindexVrfValue;
use galactic_core::bpf::maps::{self, pin_empty_maps};
use galactic_core::ident::VpcId;
use galactic_core::net::domain::Domains;
use galactic_testkit::bpffs::PrivateBpffs;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Conflist, Runtime};
use galactic_testkit::Outcome;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const NS: &str = "galactic-system";

/// The host, its bpffs, and what every call adds: the runtime's environment and keys merged
/// into galactic-bgp's entry.
pub struct Node {
    pub host: Host,
    pub bpffs: PrivateBpffs,
    /// A namespace behind the host's uplink, when a test wires one.
    pub fabric: Option<TestNetns>,
    pub env: Vec<(String, String)>,
    /// galactic-bgp's `egress` block, when its stanza has one.
    pub egress: std::cell::RefCell<Option<Value>>,
}

impl Node {
    /// A node with the local publisher and `node_extra` in node.json.
    pub fn new(tag: &str, node_extra: Value) -> Self {
        let bpffs = PrivateBpffs::mount();
        pin_empty_maps(&bpffs.pin_dir()).unwrap();
        let mut config = json!({"publisher": "local", "node_name": "node-a"});
        if let (Some(map), Value::Object(extra)) = (config.as_object_mut(), node_extra) {
            map.extend(extra);
        }
        let host = Host::new(
            tag,
            config,
            &[
                "galactic-cni",
                "galactic-tap-cni",
                "galactic-ipam",
                "galactic-bgp",
            ],
        );
        let dir = host.path("state").join("bgp").join(NS).join("bgprouters");
        std::fs::create_dir_all(&dir).unwrap();
        let router = json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
            "metadata": {"name": "router-a", "namespace": NS},
            "spec": {"targetRef": {"kind": "Node", "name": "node-a"},
                     "localASN": 65000, "routerID": "10.0.2.1",
                     "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                     "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}});
        std::fs::write(dir.join("router-a.json"), router.to_string()).unwrap();
        Self {
            host,
            bpffs,
            fabric: None,
            env: Vec::new(),
            egress: std::cell::RefCell::new(None),
        }
    }

    /// [`Node::new`] with the maps only upstream's newest datapath pins pinned too.
    pub fn newest(tag: &str, node_extra: Value) -> Self {
        let node = Self::new(tag, node_extra);
        maps::pin_maps(&node.bpffs.pin_dir(), &maps::NEWEST_MAP_DEFS).unwrap();
        node
    }

    /// The host's runtime with this node's environment.
    pub fn runtime(&self) -> Runtime<'_> {
        self.env
            .iter()
            .fold(self.host.runtime(), |rt, (k, v)| rt.env(k, v))
    }

    /// The master's entry for VPC `jU`'s attachment `att`.
    pub fn master_conf(&self, att: &str) -> Value {
        json!({"type": "galactic-cni", "vpc": "jU", "vpcattachment": att,
               "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff01::/64",
                        "ipv4_subnet": "172.21.1.0/24"}})
    }

    /// The chain of attachment `att`: the master, then galactic-bgp.
    pub fn list(&self, att: &str) -> Conflist {
        let mut bgp = json!({"type": "galactic-bgp", "vpc": "jU", "vpcattachment": att});
        if let Some(egress) = self.egress.borrow().clone() {
            bgp["egress"] = egress;
        }
        Conflist::new("1.1.0", "tenant", vec![self.master_conf(att), bgp])
    }

    /// The chain of attachment `att` of `vpc` with the master `master`, then galactic-bgp.
    pub fn chain(&self, vpc: &str, att: &str, master: &str) -> Conflist {
        let mut list = self.list(att);
        list.plugins[0]["type"] = json!(master);
        for entry in &mut list.plugins {
            entry["vpc"] = json!(vpc);
        }
        list
    }

    /// The chain of a VM's attachment `att`: the tap master, then galactic-bgp.
    pub fn tap_list(&self, att: &str) -> Conflist {
        let mut list = self.list(att);
        list.plugins[0]["type"] = json!("galactic-tap-cni");
        list
    }

    /// ADD through the chain, which must succeed; the final result.
    pub fn add(&self, pod: &Pod, att: &str) -> Value {
        self.add_list(pod, &self.list(att))
    }

    /// ADD through `list`, which must succeed; the final result.
    pub fn add_list(&self, pod: &Pod, list: &Conflist) -> Value {
        self.runtime()
            .add(list, &pod.attachment())
            .unwrap_or_else(|e| panic!("chain ADD: {e}"))
    }

    /// DEL through the chain, in reverse, by a runtime holding `result`.
    pub fn del(&self, pod: &Pod, att: &str, result: &Value) {
        self.del_list(pod, &self.list(att), result)
    }

    /// DEL through `list`, in reverse, by a runtime holding `result`.
    pub fn del_list(&self, pod: &Pod, list: &Conflist, result: &Value) {
        let (rt, pod) = (self.runtime(), pod.attachment());
        rt.remember(list, &pod, result);
        rt.del(list, &pod)
            .unwrap_or_else(|e| panic!("chain DEL: {e}"));
    }

    /// The master alone, which must succeed; its result.
    pub fn master_add(&self, pod: &Pod, att: &str) -> Value {
        self.runtime()
            .plugin(&self.list(att), 0, "ADD", &pod.attachment(), None)
            .expect_result()
    }

    /// The master's DEL alone, with `result`.
    pub fn master_del(&self, pod: &Pod, att: &str, result: &Value) {
        self.runtime()
            .plugin(&self.list(att), 0, "DEL", &pod.attachment(), Some(result))
            .expect_quiet_success();
    }

    /// galactic-bgp's `command` alone, after the master, with `prev` (and `extra` variables).
    pub fn bgp(
        &self,
        command: &str,
        pod: &Pod,
        att: &str,
        prev: &Value,
        extra: &[(&str, &str)],
    ) -> Outcome {
        let rt = extra.iter().fold(self.runtime(), |rt, (k, v)| rt.env(k, v));
        rt.plugin(&self.list(att), 1, command, &pod.attachment(), Some(prev))
    }

    /// galactic-bgp's CHECK with `result`.
    pub fn check(&self, pod: &Pod, att: &str, result: &Value) -> Outcome {
        self.bgp("CHECK", pod, att, result, &[])
    }

    /// The master's GC with nothing valid, by a runtime that lost its cache.
    pub fn gc_nothing_valid(&self) {
        let rt = self.runtime();
        rt.lose_cache();
        let gc = Conflist::new("1.1.0", "tenant", vec![self.master_conf("Z")]);
        rt.gc(&gc, &[]).unwrap_or_else(|e| panic!("GC: {e}"));
    }

    /// The VPC's routing table.
    pub fn table(&self) -> u32 {
        Domains::new(&self.host.path("state"))
            .get(&VpcId::parse("jU").unwrap())
            .unwrap()
            .expect("the master created the routing domain")
            .table
    }

    /// The stanza's internet egress from now on: `Some(mode)` or no `egress` block.
    pub fn internet_egress(&self, mode: Option<&str>) {
        *self.egress.borrow_mut() = mode.map(|m| json!({"internet": {"mode": m}}));
    }

    /// The index of link `name` on the host.
    pub fn ifindex(&self, name: &str) -> u32 {
        let link = self.host.netns.ip_json(&["link", "show", name]);
        u32::try_from(link[0]["ifindex"].as_u64().unwrap()).unwrap()
    }

    /// The pinned map `name`.
    pub fn map<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
        &self,
        name: &'static str,
    ) -> T {
        maps::open_typed(&self.bpffs.pin_dir(), name).unwrap()
    }

    /// Every ifindex row.
    pub fn ifindex_rows(&self) -> BTreeMap<u32, IfindexVrfValue> {
        let m: maps::IfindexVrfTable = self.map(maps::IFINDEX_VRF_TABLE);
        m.iter().map(Result::unwrap).collect()
    }

    /// Every egress entry as (prefixlen, table, family, address bytes) → value bytes.
    pub fn egress_rows(&self) -> BTreeMap<(u32, u32, u8, [u8; 16]), Vec<u8>> {
        galactic_testkit::bpffs::egress_rows(&self.map(maps::EGRESS_ROUTE_TABLE))
    }
}
