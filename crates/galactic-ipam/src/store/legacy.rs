//! Recording imported allocations. Each imported record becomes an attachment with no network
//! and no interface name (upstream keyed by container id alone) holding a lease on its address.
//! Records that collide with an existing lease share that lease's span, so the address stays
//! reserved until every holder is released and spans still never partially overlap.

use super::lease::{self, overlapping, Lease};
use super::span_codec::encode;
use super::{sqlite, Store, StoreError};
use crate::pool::Span;
use ipnetwork::IpNetwork;
use rusqlite::{params, OptionalExtension, Transaction};
use std::net::IpAddr;
use std::path::Path;

/// Where an imported record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyOrigin {
    /// An upstream marker file.
    Marker,
    /// A BGPAdvertisement annotation.
    Annotation,
}

impl LegacyOrigin {
    fn as_str(self) -> &'static str {
        match self {
            Self::Marker => "legacy-marker",
            Self::Annotation => "legacy-annotation",
        }
    }
}

/// One upstream allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord {
    /// Container id as upstream recorded it (annotations: the first 41 characters).
    pub container_id: String,
    /// The address with the prefix length upstream reported (host bits kept).
    pub address: IpNetwork,
    /// The gateway upstream handed out with it, when known.
    pub gateway: Option<IpAddr>,
    /// The source.
    pub origin: LegacyOrigin,
}

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportReport {
    /// Records newly recorded.
    pub imported: usize,
    /// Records already present (a repeated import).
    pub already_present: usize,
    /// Records whose address another holder already had (recorded as sharing it).
    pub shared: usize,
    /// Entries that were not understood.
    pub skipped: Vec<String>,
}

impl Store {
    /// Records `records` in one transaction (idempotent).
    pub fn import(&mut self, records: &[LegacyRecord]) -> Result<ImportReport, StoreError> {
        self.write(|tx, path| import_all(tx, path, records))
    }
}

const MARKER_META: &str = "legacy-markers:";
const ANNOTATIONS_META: &str = "legacy-annotations:";

/// Imports, each once (one index probe when done): the marker files under `dir`, and the export
/// of upstream's BGPAdvertisement annotations next to the store
/// ([`crate::legacy::ANNOTATIONS_EXPORT`], written by the node installer), so no upgrade needs a
/// manual `galactic-ipam migrate`. Runs in every write transaction (ADD, DEL, GC) before it
/// allocates or releases anything.
pub(super) fn ensure_legacy_imported(
    tx: &Transaction<'_>,
    path: &Path,
    dir: &Path,
) -> Result<(), StoreError> {
    let legacy_err = |p: &Path| {
        let p = p.to_owned();
        move |source| StoreError::Legacy { path: p, source }
    };
    let markers_key = format!("{MARKER_META}{}", dir.display());
    if !imported(tx, path, &markers_key)? {
        let parsed = crate::legacy::read_markers(dir).map_err(legacy_err(dir))?;
        record_import(
            tx,
            path,
            &markers_key,
            parsed,
            "imported legacy IPAM markers",
        )?;
    }
    let export = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(crate::legacy::ANNOTATIONS_EXPORT);
    let export_key = format!("{ANNOTATIONS_META}{}", export.display());
    if !imported(tx, path, &export_key)? {
        // Absent: nothing to import yet (and not recorded, so a later export is still read).
        if let Some(parsed) =
            crate::legacy::read_annotations_file(&export).map_err(legacy_err(&export))?
        {
            record_import(
                tx,
                path,
                &export_key,
                parsed,
                "imported legacy BGPAdvertisement annotations",
            )?;
        }
    }
    Ok(())
}

fn imported(tx: &Transaction<'_>, path: &Path, key: &str) -> Result<bool, StoreError> {
    let done: Option<String> = tx
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
        .map_err(|e| sqlite(path, e))?;
    Ok(done.is_some())
}

fn record_import(
    tx: &Transaction<'_>,
    path: &Path,
    key: &str,
    parsed: crate::legacy::Parsed,
    what: &str,
) -> Result<(), StoreError> {
    let mut report = import_all(tx, path, &parsed.records)?;
    report.skipped = parsed.skipped;
    let summary = serde_json::to_string(&report).unwrap_or_default();
    tx.prepare_cached("INSERT INTO meta (key, value) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![key, summary]))
        .map_err(|e| sqlite(path, e))?;
    if report.imported > 0 || !report.skipped.is_empty() {
        galactic_core::log::info(what, serde_json::json!({"from": key, "report": report}));
    }
    Ok(())
}

fn import_all(
    tx: &Transaction<'_>,
    path: &Path,
    records: &[LegacyRecord],
) -> Result<ImportReport, StoreError> {
    let mut report = ImportReport::default();
    for record in records {
        import_one(tx, path, record, &mut report)?;
    }
    Ok(report)
}

fn import_one(
    tx: &Transaction<'_>,
    path: &Path,
    record: &LegacyRecord,
    report: &mut ImportReport,
) -> Result<(), StoreError> {
    let err = |e| sqlite(path, e);
    tx.prepare_cached(
        "INSERT INTO attachment (network, container_id, ifname, origin, created_at)
         VALUES ('', ?1, '', ?2, unixepoch()) ON CONFLICT DO NOTHING",
    )
    .and_then(|mut s| s.execute(params![record.container_id, record.origin.as_str()]))
    .map_err(err)?;
    let id: i64 = tx
        .prepare_cached(
            "SELECT id FROM attachment WHERE network = '' AND container_id = ?1 AND ifname = ''",
        )
        .and_then(|mut s| s.query_row([&record.container_id], |r| r.get(0)))
        .map_err(err)?;
    let own = Span::single(record.address.ip());
    let holder = overlapping(tx, path, &own)?;
    let span = holder.unwrap_or(own);
    let present: bool = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM lease WHERE start = ?1 AND attachment_id = ?2)",
        )
        .and_then(|mut s| {
            s.query_row(params![&encode(span.family, span.first)[..], id], |r| {
                r.get(0)
            })
        })
        .map_err(err)?;
    if present {
        report.already_present += 1;
        return Ok(());
    }
    if holder.is_some() {
        report.shared += 1;
    }
    let lease = Lease {
        address: record.address,
        gateway: record.gateway,
        pool: None,
        span,
    };
    lease::insert(tx, path, &lease, id)?;
    report.imported += 1;
    Ok(())
}
