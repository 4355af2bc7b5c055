//! DEL: deleting an attachment and returning its spans to the release queues of their pools.

use super::attachment::{find_any_network, find_exact, find_imported, holder, key_of, DelKey};
use super::lease::{leases_of, overlapping, Lease};
use super::span_codec::{decode_span, encode_index};
use super::{legacy, rows, sqlite, Store, StoreError};
use rusqlite::{params, Transaction};
use std::path::Path;

impl Store {
    /// DEL: releases everything recorded for the attachment, plus imported records of the same
    /// container. Returns the released leases (empty when nothing was known: still success).
    pub fn release(&mut self, key: &DelKey, legacy_dir: &Path) -> Result<Vec<Lease>, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_legacy_imported(tx, path, legacy_dir)?;
            let mut ids = match key {
                DelKey::Exact(k) => find_exact(tx, path, k)?.into_iter().collect(),
                DelKey::AnyNetwork {
                    container_id,
                    ifname,
                } => find_any_network(tx, path, container_id, ifname)?,
            };
            ids.extend(find_imported(tx, path, key.container_id())?);
            let mut released = Vec::new();
            for id in ids {
                released.extend(release_attachment(tx, path, id, Remember::Holder)?);
            }
            Ok(released)
        })
    }
}

/// Whether a released slot remembers who released it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Remember {
    /// DEL: the attachment may come back (a restart, a network reload) and gets its slots back
    /// while they are free.
    Holder,
    /// GC: the runtime says the attachment is gone.
    Nobody,
}

/// Deletes an attachment and its leases; each freed span goes to the release queue of every
/// known pool it belongs to (its own pool for native leases).
pub(super) fn release_attachment(
    tx: &Transaction<'_>,
    path: &Path,
    id: i64,
    remember: Remember,
) -> Result<Vec<Lease>, StoreError> {
    let digest = match remember {
        Remember::Holder => key_of(tx, path, id)?.map(|k| holder(&k)),
        Remember::Nobody => None,
    };
    let leases = leases_of(tx, path, id)?;
    let run = |sql: &str, id: i64| {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.execute([id]))
            .map_err(|e| sqlite(path, e))
    };
    run("DELETE FROM lease WHERE attachment_id = ?1", id)?;
    run("DELETE FROM attachment WHERE id = ?1", id)?;
    for lease in &leases {
        if overlapping(tx, path, &lease.span)?.is_none() {
            enqueue(tx, path, lease, digest.as_ref())?;
        }
    }
    Ok(leases)
}

fn enqueue(
    tx: &Transaction<'_>,
    path: &Path,
    lease: &Lease,
    holder: Option<&[u8; 16]>,
) -> Result<(), StoreError> {
    for (key, first, slot_len) in pools_holding(tx, path, lease)? {
        let host_bits = u32::from(lease.span.family.bits()).saturating_sub(slot_len);
        let index = (lease.span.first - first) >> host_bits;
        // Only the lease's own pool remembers the holder: the same attachment asks that pool.
        let holder = holder.filter(|_| lease.pool.as_deref() == Some(key.as_str()));
        tx.prepare_cached("INSERT INTO released (pool, slot, holder) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| {
                s.execute(params![
                    key,
                    &encode_index(index)[..],
                    holder.map(|h| &h[..])
                ])
            })
            .map_err(|e| sqlite(path, e))?;
    }
    Ok(())
}

/// (key, first address, slot_len) of the pools a released lease returns to: its own for native
/// leases; for imported ones every known pool containing it (the pool table holds one row per
/// distinct pool configured on the node, a handful).
fn pools_holding(
    tx: &Transaction<'_>,
    path: &Path,
    lease: &Lease,
) -> Result<Vec<(String, u128, u32)>, StoreError> {
    let (sql, args): (&str, Vec<&str>) = match &lease.pool {
        Some(key) => (
            "SELECT key, first, last, slot_len FROM pool WHERE key = ?1",
            vec![key.as_str()],
        ),
        None => ("SELECT key, first, last, slot_len FROM pool", vec![]),
    };
    let pools = rows(tx, path, sql, rusqlite::params_from_iter(args), |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Vec<u8>>(1)?,
            r.get::<_, Vec<u8>>(2)?,
            r.get::<_, u32>(3)?,
        ))
    })?;
    Ok(pools
        .into_iter()
        .filter_map(|(key, first, last, slot_len)| {
            let pool = decode_span(&first, &last)?;
            (pool.overlaps(&lease.span) && lease.span.first >= pool.first)
                .then_some((key, pool.first, slot_len))
        })
        .collect())
}
