//! GC: releasing the allocations of a network whose attachments the runtime no longer lists, and
//! the imported records inside the network's pools. The one operation that walks rows: those of
//! its own network, and the imported records.

use super::attachment::{AttachmentKey, LEGACY_ID_LEN};
use super::lease::leases_of;
use super::release::{release_attachment, Remember};
use super::{legacy, rows, sqlite, Store, StoreError};
use crate::pool::Pool;
use rusqlite::Transaction;
use std::collections::HashSet;
use std::path::Path;

/// GC's view: the network, its still-valid attachments and (for imported records, which carry
/// no network) the pools this network configures.
#[derive(Debug, Clone)]
pub struct GcScope<'a> {
    /// Network name.
    pub network: &'a str,
    /// Valid (container id, ifname) pairs.
    pub valid: &'a HashSet<(String, String)>,
    /// The network's pools; imported records inside them are this network's to collect.
    pub pools: &'a [Pool],
}

impl Store {
    /// GC: releases every allocation of `scope.network` whose attachment is not valid, and the
    /// imported records inside the network's pools whose container is not among the valid ones.
    /// Returns the released attachments' keys.
    pub fn gc(
        &mut self,
        scope: &GcScope<'_>,
        legacy_dir: &Path,
    ) -> Result<Vec<AttachmentKey>, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_legacy_imported(tx, path, legacy_dir)?;
            let mut doomed = stale_native(tx, path, scope)?;
            doomed.extend(stale_imported(tx, path, scope)?);
            for (id, _) in &doomed {
                release_attachment(tx, path, *id, Remember::Nobody)?;
            }
            Ok(doomed.into_iter().map(|(_, k)| k).collect())
        })
    }
}

fn stale_native(
    tx: &Transaction<'_>,
    path: &Path,
    scope: &GcScope<'_>,
) -> Result<Vec<(i64, AttachmentKey)>, StoreError> {
    let native = rows(
        tx,
        path,
        "SELECT id, container_id, ifname FROM attachment WHERE network = ?1",
        [scope.network],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        },
    )?;
    Ok(native
        .into_iter()
        .filter(|(_, cid, ifname)| !scope.valid.contains(&(cid.clone(), ifname.clone())))
        .map(|(id, container_id, ifname)| {
            (
                id,
                AttachmentKey {
                    network: scope.network.to_owned(),
                    container_id,
                    ifname,
                },
            )
        })
        .collect())
}

fn stale_imported(
    tx: &Transaction<'_>,
    path: &Path,
    scope: &GcScope<'_>,
) -> Result<Vec<(i64, AttachmentKey)>, StoreError> {
    let valid: HashSet<String> = scope
        .valid
        .iter()
        .flat_map(|(cid, _)| [cid.clone(), cid.chars().take(LEGACY_ID_LEN).collect()])
        .collect();
    let ids: Vec<i64> = rows(
        tx,
        path,
        "SELECT id FROM attachment WHERE network = '' AND ifname = ''",
        [],
        |r| r.get(0),
    )?;
    let mut doomed = Vec::new();
    for id in ids {
        let cid: String = tx
            .prepare_cached("SELECT container_id FROM attachment WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(|e| sqlite(path, e))?;
        if valid.contains(&cid) {
            continue;
        }
        let leases = leases_of(tx, path, id)?;
        let in_scope = leases.iter().any(|l| {
            scope
                .pools
                .iter()
                .any(|p| p.index_of(l.address.ip()).is_some())
        });
        if in_scope {
            doomed.push((
                id,
                AttachmentKey {
                    network: String::new(),
                    container_id: cid,
                    ifname: String::new(),
                },
            ));
        }
    }
    Ok(doomed)
}
