//! The pinned maps: their definitions (as the datapath object declares them), opening them from
//! the pin directory, and creating empty pinned ones (`cargo xtask bpf-pin-maps`).

use super::abi::*;
use super::BpfError;
use aya::maps::{Array, HashMap, LpmTrie, Map, MapData, MapError};
use std::path::Path;

/// Default pin directory of the datapath's maps and programs (node-config key `bpf_pin_dir`).
pub const DEFAULT_PIN_DIR: &str = crate::config::DEFAULT_BPF_PIN_DIR;
/// The environment name of the node-config key `bpf_pin_dir` (tests point it at a private
/// bpffs). Read by the node config resolver, never by this module.
pub const PIN_DIR_ENV: &str = "GALACTIC_CNI_BPF_PIN_DIR";
/// The environment name of the node-config key `ebpf_datapath` (`off`: a node with SRv6
/// settings but deliberately no datapath). Read by the node config resolver.
pub const DATAPATH_ENV: &str = "GALACTIC_CNI_EBPF_DATAPATH";

/// `locator_table`: (Block, Node-ID) → generation.
pub const LOCATOR_TABLE: &str = "locator_table";
/// `function_table`: (Block, Function) → behaviour.
pub const FUNCTION_TABLE: &str = "function_table";
/// `vrf_table`: (Block, Argument) → VRF table, egress kind, counters, generation.
pub const VRF_TABLE: &str = "vrf_table";
/// `ifindex_vrf_table`: host interface → (Block, Argument).
pub const IFINDEX_VRF_TABLE: &str = "ifindex_vrf_table";
/// `egress_route_table`: LPM (table, family, prefix) → encapsulation (or pass-through).
pub const EGRESS_ROUTE_TABLE: &str = "egress_route_table";
/// `node_src_addr_table`: this node's SRv6 source address.
pub const NODE_SRC_ADDR_TABLE: &str = "node_src_addr_table";
/// `public_uplink_table`: this node's public uplink.
pub const PUBLIC_UPLINK_TABLE: &str = "public_uplink_table";
/// `ifindex_egress_kind_table` (newest datapath): host interface → its redirect kind.
pub const IFINDEX_EGRESS_KIND_TABLE: &str = "ifindex_egress_kind_table";
/// `vpc_attribution_table` (newest datapath): (Block, Argument) → the attachment its VRF's
/// counters are billed to.
pub const VPC_ATTRIBUTION_TABLE: &str = "vpc_attribution_table";
/// `tenant_gw_table` (newest datapath): host interface → the attachment's IPAM gateways.
pub const TENANT_GW_TABLE: &str = "tenant_gw_table";
/// The pinned egress classifier attached to host interfaces.
pub const USID_EGRESS_PROG: &str = "usid_egress_prog";

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
/// `BPF_F_NO_PREALLOC` (required by LPM tries).
const BPF_F_NO_PREALLOC: u32 = 1;

/// A map as the datapath object defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapDef {
    /// Pin name (and kernel map name).
    pub name: &'static str,
    /// `BPF_MAP_TYPE_*`.
    pub map_type: u32,
    /// Key bytes.
    pub key_size: u32,
    /// Value bytes.
    pub value_size: u32,
    /// Capacity.
    pub max_entries: u32,
    /// `BPF_F_*` flags.
    pub flags: u32,
}

/// `map_type: 1, key_size: 4, value_size: 8, max_entries: 1024, map_flags: 0x1`, in the
/// kernel's (and bpftool's) terms; the name is the pin path's.
impl std::fmt::Display for MapDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "map_type: {}, key_size: {}, value_size: {}, max_entries: {}, map_flags: {:#x}",
            self.map_type, self.key_size, self.value_size, self.max_entries, self.flags
        )
    }
}

const fn def<K, V>(name: &'static str, map_type: u32, max_entries: u32, flags: u32) -> MapDef {
    MapDef {
        name,
        map_type,
        key_size: size_of::<K>() as u32,
        value_size: size_of::<V>() as u32,
        max_entries,
        flags,
    }
}

/// Every map the CNI chain writes, with the reference definitions (upstream §6.7).
pub const MAP_DEFS: [MapDef; 7] = [
    def::<LocatorKey, LocatorValue>(LOCATOR_TABLE, BPF_MAP_TYPE_HASH, 64, 0),
    def::<FunctionKey, FunctionValue>(FUNCTION_TABLE, BPF_MAP_TYPE_HASH, 128, 0),
    def::<VrfKey, VrfValue>(VRF_TABLE, BPF_MAP_TYPE_HASH, 8192, 0),
    def::<IfindexKey, IfindexVrfValue>(IFINDEX_VRF_TABLE, BPF_MAP_TYPE_HASH, 16384, 0),
    def::<EgressRouteKey, EgressRouteValue>(
        EGRESS_ROUTE_TABLE,
        BPF_MAP_TYPE_LPM_TRIE,
        32768,
        BPF_F_NO_PREALLOC,
    ),
    def::<NodeIndex, NodeSrcAddrValue>(NODE_SRC_ADDR_TABLE, BPF_MAP_TYPE_ARRAY, 1, 0),
    def::<NodeIndex, PublicUplinkValue>(PUBLIC_UPLINK_TABLE, BPF_MAP_TYPE_ARRAY, 1, 0),
];

/// The maps only upstream's newest datapath pins. The CNI writes them when they are pinned and
/// skips them when not (an older datapath has none of them); `pin_empty_maps` never creates
/// them, so a node is never made to look newer than its datapath.
pub const NEWEST_MAP_DEFS: [MapDef; 3] = [
    def::<IfindexKey, EgressKindValue>(IFINDEX_EGRESS_KIND_TABLE, BPF_MAP_TYPE_HASH, 16384, 0),
    def::<VpcAttributionKey, VpcAttributionValue>(
        VPC_ATTRIBUTION_TABLE,
        BPF_MAP_TYPE_HASH,
        8192,
        0,
    ),
    def::<IfindexKey, TenantGwValue>(TENANT_GW_TABLE, BPF_MAP_TYPE_HASH, 16384, 0),
];

/// Whether `err` means "no such pinned object".
fn is_missing(err: &MapError) -> bool {
    matches!(err, MapError::SyscallError(e) if e.io_error.kind() == std::io::ErrorKind::NotFound)
}

/// Opens the pinned map `name` under `dir`; a missing pin is [`BpfError::NotLoaded`].
pub fn open_map(dir: &Path, name: &'static str) -> Result<Map, BpfError> {
    let path = dir.join(name);
    let data = MapData::from_pin(&path).map_err(|source| {
        if is_missing(&source) {
            BpfError::NotLoaded { path: path.clone() }
        } else {
            BpfError::Map {
                map: name,
                op: "open",
                source: Box::new(source),
            }
        }
    })?;
    Map::from_map_data(data).map_err(|source| BpfError::Map {
        map: name,
        op: "open",
        source: Box::new(source),
    })
}

/// Opens a pinned map as a typed handle (checks key and value sizes against the ABI).
pub fn open_typed<T>(dir: &Path, name: &'static str) -> Result<T, BpfError>
where
    T: TryFrom<Map, Error = MapError>,
{
    T::try_from(open_map(dir, name)?).map_err(|source| BpfError::Map {
        map: name,
        op: "open (type or size mismatch with the ABI)",
        source: Box::new(source),
    })
}

/// Opens one of [`NEWEST_MAP_DEFS`]: `Ok(None)` when it is not pinned (an older datapath).
pub fn open_newest<T>(dir: &Path, name: &'static str) -> Result<Option<T>, BpfError>
where
    T: TryFrom<Map, Error = MapError>,
{
    match open_typed(dir, name) {
        Ok(map) => Ok(Some(map)),
        Err(BpfError::NotLoaded { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `locator_table`.
pub type LocatorTable = HashMap<MapData, LocatorKey, LocatorValue>;
/// `function_table`.
pub type FunctionTable = HashMap<MapData, FunctionKey, FunctionValue>;
/// `vrf_table`.
pub type VrfTable = HashMap<MapData, VrfKey, VrfValue>;
/// `ifindex_vrf_table`.
pub type IfindexVrfTable = HashMap<MapData, IfindexKey, IfindexVrfValue>;
/// `egress_route_table`.
pub type EgressRouteTable = LpmTrie<MapData, EgressRouteKeyData, EgressRouteValue>;
/// `node_src_addr_table`.
pub type NodeSrcAddrTable = Array<MapData, NodeSrcAddrValue>;
/// `public_uplink_table`.
pub type PublicUplinkTable = Array<MapData, PublicUplinkValue>;
/// `ifindex_egress_kind_table`.
pub type EgressKindTable = HashMap<MapData, IfindexKey, EgressKindValue>;
/// `vpc_attribution_table`.
pub type VpcAttributionTable = HashMap<MapData, VpcAttributionKey, VpcAttributionValue>;
/// `tenant_gw_table`.
pub type TenantGwTable = HashMap<MapData, IfindexKey, TenantGwValue>;

/// What [`pin_empty_maps`] did with one map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinOutcome {
    /// Created and pinned.
    Created,
    /// Already pinned with the same definition; left as is (entries kept).
    Present,
}

/// Creates and pins every map of [`MAP_DEFS`] that `dir` (a bpffs directory, created if absent)
/// lacks. A map already pinned must have the same definition, else [`BpfError::Incompatible`]:
/// replacing it would orphan the datapath's reference to the old one.
pub fn pin_empty_maps(dir: &Path) -> Result<Vec<(&'static str, PinOutcome)>, BpfError> {
    pin_maps(dir, &MAP_DEFS)
}

/// [`pin_empty_maps`] for any definitions (tests pin [`NEWEST_MAP_DEFS`] to stand in for the
/// newest datapath).
pub fn pin_maps(dir: &Path, defs: &[MapDef]) -> Result<Vec<(&'static str, PinOutcome)>, BpfError> {
    std::fs::create_dir_all(dir).map_err(|source| BpfError::Io {
        what: format!("create pin directory {}", dir.display()),
        source,
    })?;
    defs.iter()
        .map(|d| pin_one(dir, d).map(|outcome| (d.name, outcome)))
        .collect()
}

fn pin_one(dir: &Path, d: &MapDef) -> Result<PinOutcome, BpfError> {
    let path = dir.join(d.name);
    let err = |op: &'static str| {
        move |source| BpfError::Map {
            map: d.name,
            op,
            source: Box::new(source),
        }
    };
    match MapData::from_pin(&path) {
        Ok(existing) => {
            let info = existing.info().map_err(err("read info"))?;
            let found = MapDef {
                name: d.name,
                map_type: type_number(&info, d)?,
                key_size: info.key_size(),
                value_size: info.value_size(),
                max_entries: info.max_entries(),
                flags: info.map_flags(),
            };
            if found != *d {
                return Err(BpfError::Incompatible {
                    path,
                    want: Box::new(*d),
                    found: Box::new(found),
                });
            }
            Ok(PinOutcome::Present)
        }
        Err(e) if is_missing(&e) => {
            let obj = aya_obj::Map::new_from_params(
                d.map_type,
                d.key_size,
                d.value_size,
                d.max_entries,
                d.flags,
            );
            let map = MapData::create(obj, d.name, None).map_err(err("create"))?;
            map.pin(&path).map_err(|e| BpfError::Pin {
                path: path.clone(),
                source: Box::new(e),
            })?;
            Ok(PinOutcome::Created)
        }
        Err(e) => Err(err("open")(e)),
    }
}

/// The kernel's `BPF_MAP_TYPE_*` of a map (`MapInfo::map_type` gives an enum; the number is
/// what the definitions compare).
fn type_number(info: &aya::maps::MapInfo, d: &MapDef) -> Result<u32, BpfError> {
    let kind = info.map_type().map_err(|source| BpfError::Map {
        map: d.name,
        op: "read type",
        source: Box::new(source),
    })?;
    Ok(match kind {
        aya::maps::MapType::Hash => BPF_MAP_TYPE_HASH,
        aya::maps::MapType::Array => BPF_MAP_TYPE_ARRAY,
        aya::maps::MapType::LpmTrie => BPF_MAP_TYPE_LPM_TRIE,
        // Any other type differs from every definition here.
        _ => u32::MAX,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_match_the_reference() {
        let want: [(&str, u32, u32, u32, u32, u32); 7] = [
            ("locator_table", 1, 8, 8, 64, 0),
            ("function_table", 1, 8, 4, 128, 0),
            ("vrf_table", 1, 8, 48, 8192, 0),
            ("ifindex_vrf_table", 1, 4, 16, 16384, 0),
            ("egress_route_table", 11, 25, 32, 32768, 1),
            ("node_src_addr_table", 2, 4, 16, 1, 0),
            ("public_uplink_table", 2, 4, 16, 1, 0),
        ];
        for (d, w) in MAP_DEFS.iter().zip(want) {
            assert_eq!(
                (
                    d.name,
                    d.map_type,
                    d.key_size,
                    d.value_size,
                    d.max_entries,
                    d.flags
                ),
                w
            );
        }
    }

    #[test]
    fn the_newest_datapaths_maps_have_its_key_and_value_sizes() {
        let want = [
            ("ifindex_egress_kind_table", 1, 4, 4, 16384, 0),
            ("vpc_attribution_table", 1, 8, 24, 8192, 0),
            ("tenant_gw_table", 1, 4, 20, 16384, 0),
        ];
        for (d, w) in NEWEST_MAP_DEFS.iter().zip(want) {
            let got = (
                d.name,
                d.map_type,
                d.key_size,
                d.value_size,
                d.max_entries,
                d.flags,
            );
            assert_eq!(got, w);
        }
        assert!(NEWEST_MAP_DEFS
            .iter()
            .all(|n| MAP_DEFS.iter().all(|d| d.name != n.name)));
    }

    #[test]
    fn a_definition_reads_as_its_numbers_in_messages() {
        let text = MAP_DEFS[4].to_string();
        assert_eq!(
            text,
            "map_type: 11, key_size: 25, value_size: 32, max_entries: 32768, map_flags: 0x1"
        );
    }
}
