//! The registration records: what DEL and GC remove by, and where they live.

use super::*;
/// The on-disk record of one registered attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRecord {
    /// Host interface.
    pub host_ifname: String,
    /// Its ifindex at registration.
    pub ifindex: u32,
    /// uSID Block (48-bit value).
    pub block: u64,
    /// uSID Argument.
    pub argument: u16,
    /// VRF table the pass-through keys were written in.
    pub vrf_table_id: u32,
    /// Masked prefixes with pass-through entries.
    pub prefixes: Vec<IpNetwork>,
    /// Where the maps were.
    pub pin_dir: PathBuf,
    /// The interface's egress kind ([`EGRESS_KIND_VETH`] or [`EGRESS_KIND_TAP`]); absent in
    /// records of releases before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_kind: Option<u32>,
}

/// The record of one egress row last written in a VPC table: `::/0` (NAT66) or a NAT64 prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nat66Record {
    /// The VPC's table.
    pub vrf_table_id: u32,
    /// The routed prefix (absent in records written before NAT64: `::/0`).
    #[serde(default = "default_route")]
    pub prefix: Ipv6Network,
    /// Where the maps were.
    pub pin_dir: PathBuf,
    /// The row written.
    #[serde(flatten)]
    pub row: Nat66Row,
    /// The row it replaced. The record is written before the map, so after a failed or
    /// interrupted write the map may still hold this one; removal accepts either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Nat66Row>,
}

/// `::/0`.
pub const DEFAULT_ROUTE: Ipv6Network =
    match Ipv6Network::new_checked(std::net::Ipv6Addr::UNSPECIFIED, 0) {
        Some(net) => net,
        None => panic!("::/0 is a valid network"),
    };

fn default_route() -> Ipv6Network {
    DEFAULT_ROUTE
}

/// One egress row, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nat66Row {
    /// The shard SID.
    pub sid: std::net::Ipv6Addr,
    /// Output link.
    pub link_ifindex: u32,
    /// Next-hop MAC, `aa:bb:…`.
    pub dmac: String,
    /// Source MAC, `aa:bb:…`.
    pub smac: String,
}

impl Nat66Row {
    pub(super) fn new(value: &EgressRouteValue) -> Self {
        Self {
            sid: std::net::Ipv6Addr::from(value.sid_be),
            link_ifindex: value.link_ifindex,
            dmac: format_mac(&value.dmac),
            smac: format_mac(&value.smac),
        }
    }

    /// The map value it describes; `None` when a MAC does not parse (a hand-edited record).
    pub fn value(&self) -> Option<EgressRouteValue> {
        Some(EgressRouteValue {
            sid_be: self.sid.octets(),
            link_ifindex: self.link_ifindex,
            dmac: parse_mac(&self.dmac)?,
            smac: parse_mac(&self.smac)?,
        })
    }
}

/// The `egress_route_table` key of a VPC's NAT66 default: `(table, ::/0)`.
pub fn nat66_key(table_id: u32) -> EgressRouteKey {
    EgressRouteKey::new(
        EGRESS_KEY_PREFIX_BITS,
        EgressRouteKeyData {
            table_id,
            family: FAMILY_IPV6,
            addr_be: [0; 16],
        },
    )
}

pub(super) fn nat66_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bpf").join("nat66")
}

/// `{table}.json` for `::/0` (the name records had before NAT64), `{table}-{addr}-{len}.json`
/// for another prefix.
pub(super) fn nat66_path(state_dir: &Path, table_id: u32, prefix: Ipv6Network) -> PathBuf {
    let name = match prefix.prefix() {
        0 => format!("{table_id}.json"),
        len => format!("{table_id}-{}-{len}.json", prefix.network()).replace(':', "_"),
    };
    nat66_dir(state_dir).join(name)
}

pub(super) fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bpf").join("attachments")
}

pub(super) fn record_path(state_dir: &Path, host_ifname: &str) -> PathBuf {
    records_dir(state_dir).join(format!("{host_ifname}.json"))
}

pub(super) fn lock(state_dir: &Path) -> Result<lockfile::LockGuard, BpfError> {
    lockfile::acquire(&state_dir.join("bpf").join("lock"), LOCK_TIMEOUT).map_err(BpfError::Busy)
}

pub(super) fn io(what: String) -> impl FnOnce(std::io::Error) -> BpfError {
    move |source| BpfError::Io { what, source }
}

/// The record of `host_ifname`, if one exists.
pub fn read_record(
    state_dir: &Path,
    host_ifname: &str,
) -> Result<Option<AttachmentRecord>, BpfError> {
    read_json(&record_path(state_dir, host_ifname))
}

/// The record of `table_id`'s `::/0` row, if one exists.
pub fn read_nat66_record(state_dir: &Path, table_id: u32) -> Result<Option<Nat66Record>, BpfError> {
    read_json(&nat66_path(state_dir, table_id, DEFAULT_ROUTE))
}

/// The records of every egress row of `table_id`, found by their file names
/// (`{table}.json`, `{table}-…`: [`nat66_path`]), so no other table's record is opened. Every
/// ADD of a VPC with egress asks (for the rows it no longer writes): reading every table's
/// record made that ADD cost the node's VPCs.
pub fn egress_records(state_dir: &Path, table_id: u32) -> Result<Vec<Nat66Record>, BpfError> {
    let table = table_id.to_string();
    let files = state::json_files(&nat66_dir(state_dir), &table)?;
    Ok(files
        .iter()
        .filter(|f| {
            f.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix(table.as_str()))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .filter_map(|f| read_json::<Nat66Record>(f).ok().flatten())
        .filter(|r| r.vrf_table_id == table_id)
        .collect())
}

pub(super) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, BpfError> {
    Ok(state::read_json(path)?)
}

pub(super) fn write_record(state_dir: &Path, record: &AttachmentRecord) -> Result<(), BpfError> {
    write_json(&record_path(state_dir, &record.host_ifname), record)
}

/// Writes a record (the registration lock is held: temporaries of `path` are killed writers').
pub(super) fn write_json<T: Serialize>(path: &Path, record: &T) -> Result<(), BpfError> {
    Ok(state::write_json(path, record)?)
}

pub(super) fn remove_record(state_dir: &Path, host_ifname: &str) -> Result<(), BpfError> {
    Ok(state::remove(&record_path(state_dir, host_ifname))?)
}

/// Every registration record (unparseable ones are skipped: they must not stop GC). Every
/// registration and every removal lists them first, so the listing also removes what killed
/// writers of the registry left, where no process with their pid is left
/// ([`state::sweep_temporaries`]): the VPC-wide egress records too, which the removal of an
/// attachment that is not its table's last never reads.
pub fn all_records(state_dir: &Path) -> Result<Vec<AttachmentRecord>, BpfError> {
    let dir = records_dir(state_dir);
    // Best effort: GC sweeps what cannot be removed now.
    let _ = state::sweep_temporaries(&dir);
    let _ = state::sweep_temporaries(&nat66_dir(state_dir));
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(host) = name.strip_suffix(".json") {
            if let Ok(Some(record)) = read_record(state_dir, host) {
                out.push(record);
            }
        }
    }
    Ok(out)
}

/// The part of a host interface name `G{vpc:9}{att:3}H` (`ident::host_ifname`) that names its
/// VPC, `G{vpc:9}`: every registration record of the VPC's attachments starts with it. `None`
/// for a name of another form (none a master creates).
fn vpc_prefix(host_ifname: &str) -> Option<&str> {
    let form = host_ifname.len() == 14 && host_ifname.starts_with('G') && host_ifname.is_ascii();
    form.then(|| &host_ifname[..10])
}

/// The registration records of `host_ifname`'s VPC, its own included, found by their file
/// names: a record is named after its host interface, whose name carries the VPC
/// ([`vpc_prefix`]), so no other VPC's record is opened. Everything a registration or a removal
/// decides from other records is the VPC's: its `vrf_table` row's kind and attribution (the
/// VRF's records), the keys of its table shared with another attachment, whether its table's
/// egress rows still serve one. On a node of many attachments reading every record made each
/// registration cost the node's size (a file open per attachment), and GC's sweep its square.
/// The registry's dead temporaries go with the sweep of its staging directories
/// ([`state::sweep_staged`]: the writes in flight, not the records); those of a release before
/// them, beside the records, with GC. A name of another form gets every record.
pub fn vpc_records(state_dir: &Path, host_ifname: &str) -> Result<Vec<AttachmentRecord>, BpfError> {
    let Some(prefix) = vpc_prefix(host_ifname) else {
        return all_records(state_dir);
    };
    // Best effort: GC sweeps what cannot be removed now.
    let _ = state::sweep_staged(&records_dir(state_dir));
    let _ = state::sweep_staged(&nat66_dir(state_dir));
    let files = state::json_files(&records_dir(state_dir), prefix)?;
    let mut out = Vec::new();
    for file in files {
        if let Ok(Some(record)) = read_json::<AttachmentRecord>(&file) {
            out.push(record);
        }
    }
    Ok(out)
}

/// Every egress record (unparseable ones are skipped: they must not stop GC).
pub fn all_nat66_records(state_dir: &Path) -> Result<Vec<Nat66Record>, BpfError> {
    let dir = nat66_dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
    };
    Ok(entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|entry| read_json(&entry.path()).ok().flatten())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nat66(table: u32, prefix: &str) -> Nat66Record {
        Nat66Record {
            vrf_table_id: table,
            prefix: prefix.parse().unwrap(),
            pin_dir: PathBuf::from("/sys/fs/bpf/galactic"),
            row: Nat66Row {
                sid: "2001:db8::1".parse().unwrap(),
                link_ifindex: 2,
                dmac: "02:00:00:00:00:01".into(),
                smac: "02:00:00:00:00:02".into(),
            },
            replaces: None,
        }
    }

    #[test]
    fn a_tables_egress_records_are_its_own_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for (table, prefix) in [
            (100, "::/0"),
            (100, "64:ff9b::/96"),
            (1000, "::/0"),
            (10, "::/0"),
        ] {
            let r = nat66(table, prefix);
            write_json(&nat66_path(dir.path(), table, r.prefix), &r).unwrap();
        }
        let before = state::listed();
        let mut got: Vec<String> = egress_records(dir.path(), 100)
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r.vrf_table_id, r.prefix))
            .collect();
        got.sort();
        assert_eq!(got, ["100 64:ff9b::/96", "100 ::/0"]);
        assert_eq!(
            state::listed() - before,
            5,
            "one listing, its names only read by prefix"
        );
    }
}
