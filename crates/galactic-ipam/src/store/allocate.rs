//! ADD and the STATUS probe: taking one slot per pool. In order: the slot holding the address
//! the runtime asked for (it must be free); else the slot this attachment released last, while
//! it is still free (a restart keeps its addresses); else fresh slots from the pool's round-robin
//! cursor, then released slots oldest first.

use super::attachment::{find_exact, holder, insert_attachment, AttachmentKey};
use super::lease::{self, leases_of, overlapping, Lease};
use super::span_codec::{decode_index, encode, encode_index};
use super::{legacy, sqlite, Store, StoreError};
use crate::pool::{Pool, Span};
use galactic_core::ip::Family;
use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};
use std::net::IpAddr;
use std::path::Path;

/// One pool of an ADD and the address the runtime asked for in it, if any (checked against the
/// pool with [`Pool::requested_slot`] by the caller).
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// The pool.
    pub pool: &'a Pool,
    /// The requested endpoint address and its slot.
    pub requested: Option<(IpAddr, u128)>,
}

/// An attachment's leases (IPv6 first) and whether this call created them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The leases, IPv6 first.
    pub leases: Vec<Lease>,
    /// True when this ADD allocated; false when it found an earlier ADD's allocation.
    pub created: bool,
}

impl Store {
    /// ADD: returns the attachment's allocation, allocating one lease per pool (all or none)
    /// unless an earlier ADD already did. Imports the legacy markers under `legacy_dir` first if
    /// that has never been done.
    pub fn allocate(
        &mut self,
        key: &AttachmentKey,
        pools: &[Pool],
        legacy_dir: &Path,
    ) -> Result<Allocation, StoreError> {
        let wants: Vec<Want<'_>> = pools
            .iter()
            .map(|pool| Want {
                pool,
                requested: None,
            })
            .collect();
        self.allocate_wants(key, &wants, legacy_dir)
    }

    /// ADD with the runtime's requests: as [`Store::allocate`], but a pool with a requested
    /// address hands out exactly that address, which must be free (`InUse` otherwise). A
    /// retried ADD of an attachment that already holds its allocation returns it, provided every
    /// request names what it holds (`Holds` otherwise).
    pub fn allocate_wants(
        &mut self,
        key: &AttachmentKey,
        wants: &[Want<'_>],
        legacy_dir: &Path,
    ) -> Result<Allocation, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_legacy_imported(tx, path, legacy_dir)?;
            if let Some(id) = find_exact(tx, path, key)? {
                let leases = leases_of(tx, path, id)?;
                held_as_requested(&leases, wants)?;
                return Ok(Allocation {
                    leases,
                    created: false,
                });
            }
            let id = insert_attachment(tx, path, key)?;
            let digest = holder(key);
            let mut leases = Vec::new();
            for want in wants {
                let lease = match want.requested {
                    Some((address, index)) => {
                        take_requested(tx, path, want.pool, address, index, id)?
                    }
                    None => match reclaim(tx, path, want.pool, &digest)? {
                        Some(index) => insert_lease(tx, path, want.pool, index, id)?,
                        None => allocate_in(tx, path, want.pool, id)?,
                    },
                };
                leases.push(lease);
            }
            Ok(Allocation {
                leases,
                created: true,
            })
        })
    }

    /// Bulk ADD for many attachments in one transaction (imports, benchmark pre-fill): the same
    /// allocation as [`Store::allocate`] for each key, without one commit per key. Attachments
    /// that already have an allocation keep it. Returns how many were newly allocated.
    pub fn allocate_batch(
        &mut self,
        keys: &[AttachmentKey],
        pools: &[Pool],
        legacy_dir: &Path,
    ) -> Result<usize, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_legacy_imported(tx, path, legacy_dir)?;
            let mut created = 0;
            for key in keys {
                if find_exact(tx, path, key)?.is_some() {
                    continue;
                }
                let id = insert_attachment(tx, path, key)?;
                for pool in pools {
                    allocate_in(tx, path, pool, id)?;
                }
                created += 1;
            }
            Ok(created)
        })
    }

    /// STATUS: proves the store is writable and each pool has a free slot, by allocating one
    /// inside a transaction that is then rolled back.
    pub fn probe(&mut self, pools: &[Pool]) -> Result<(), StoreError> {
        let allocate_each = |tx: &Transaction<'_>, path: &Path| {
            pools
                .iter()
                .try_for_each(|pool| allocate_in(tx, path, pool, -1).map(drop))
        };
        self.transaction(TransactionBehavior::Immediate, allocate_each, |tx| {
            tx.rollback()
        })
    }
}

/// Takes one free slot of `pool` for attachment `owner`: fresh slots from the cursor first, then
/// released slots oldest first. Fails with `Exhausted` when neither has one.
fn allocate_in(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    owner: i64,
) -> Result<Lease, StoreError> {
    let key = pool.key();
    let mut next = cursor(tx, path, pool, &key)?;
    let count = pool.slot_count();
    let mut found = None;
    while next < count {
        let index = next;
        next += 1;
        if pool.is_reserved(index) {
            continue;
        }
        match overlapping(tx, path, &pool.slot(index))? {
            // Jump past whatever occupies the slot (an imported record, an overlapping pool).
            Some(blocker) => next = next.max(index_after(pool, &blocker)),
            None => {
                found = Some(index);
                break;
            }
        }
    }
    set_cursor(tx, path, &key, next)?;
    let index = match found {
        Some(index) => index,
        None => pop_released(tx, path, pool, &key)?.ok_or_else(|| StoreError::Exhausted {
            pool: pool.network().to_string(),
            slot_len: pool.slot_len(),
        })?,
    };
    insert_lease(tx, path, pool, index, owner)
}

/// A retried ADD's requests must each name the address its attachment holds in that family.
fn held_as_requested(leases: &[Lease], wants: &[Want<'_>]) -> Result<(), StoreError> {
    for (requested, _) in wants.iter().filter_map(|w| w.requested) {
        let held = leases
            .iter()
            .find(|l| Family::of(l.address.ip()) == Family::of(requested));
        match held {
            Some(lease) if lease.address.ip() == requested => {}
            // Nothing of that family (its pools changed since) is as much a mismatch.
            other => {
                return Err(StoreError::Holds {
                    requested,
                    held: other.map(|l| l.address),
                })
            }
        }
    }
    Ok(())
}

/// Takes the slot of a requested address for attachment `owner`, when nothing occupies it.
fn take_requested(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    address: IpAddr,
    index: u128,
    owner: i64,
) -> Result<Lease, StoreError> {
    if overlapping(tx, path, &pool.slot(index))?.is_some() {
        return Err(StoreError::InUse { address });
    }
    forget_released(tx, path, pool, index)?;
    let lease = Lease {
        address: pool.requested_endpoint(address),
        gateway: Some(pool.gateway()),
        pool: Some(pool.key()),
        span: pool.slot(index),
    };
    lease::insert(tx, path, &lease, owner)?;
    Ok(lease)
}

/// The slot of `pool` this attachment (by its `holder` digest) released last, if it is still
/// free; it leaves the release queue. A remembered slot that is taken meanwhile is forgotten.
fn reclaim(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    holder: &[u8; 16],
) -> Result<Option<u128>, StoreError> {
    let key = pool.key();
    let row: Option<Vec<u8>> = tx
        .prepare_cached(
            "SELECT slot FROM released WHERE holder = ?1 AND pool = ?2 ORDER BY id DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![&holder[..], key], |r| r.get(0))
                .optional()
        })
        .map_err(|e| sqlite(path, e))?;
    let Some(index) = row.as_deref().and_then(decode_index) else {
        return Ok(None);
    };
    tx.prepare_cached("DELETE FROM released WHERE holder = ?1 AND pool = ?2")
        .and_then(|mut s| s.execute(params![&holder[..], key]))
        .map_err(|e| sqlite(path, e))?;
    let usable = index < pool.slot_count()
        && !pool.is_reserved(index)
        && overlapping(tx, path, &pool.slot(index))?.is_none();
    if !usable {
        return Ok(None);
    }
    forget_released(tx, path, pool, index)?;
    Ok(Some(index))
}

/// Drops every release-queue entry of slot `index`: a slot taken out of turn must not be handed
/// out again from the queue, and the queue keeps at most one entry per slot.
fn forget_released(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    index: u128,
) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM released WHERE pool = ?1 AND slot = ?2")
        .and_then(|mut s| s.execute(params![pool.key(), &encode_index(index)[..]]))
        .map(drop)
        .map_err(|e| sqlite(path, e))
}

fn index_after(pool: &Pool, blocker: &Span) -> u128 {
    let ip = pool.family().addr(blocker.last);
    pool.index_of(ip).map_or(pool.slot_count(), |i| i + 1)
}

fn cursor(tx: &Transaction<'_>, path: &Path, pool: &Pool, key: &str) -> Result<u128, StoreError> {
    let span = pool.span();
    tx.prepare_cached(
        "INSERT INTO pool (key, first, last, slot_len, next) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (key) DO NOTHING",
    )
    .and_then(|mut s| {
        s.execute(params![
            key,
            &encode(span.family, span.first)[..],
            &encode(span.family, span.last)[..],
            pool.slot_len(),
            &encode_index(0)[..],
        ])
    })
    .map_err(|e| sqlite(path, e))?;
    let blob: Vec<u8> = tx
        .prepare_cached("SELECT next FROM pool WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| r.get(0)))
        .map_err(|e| sqlite(path, e))?;
    decode_index(&blob).ok_or_else(|| StoreError::Corrupt {
        path: path.to_owned(),
        why: format!("cursor of pool {key} does not decode"),
    })
}

fn set_cursor(tx: &Transaction<'_>, path: &Path, key: &str, next: u128) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE pool SET next = ?2 WHERE key = ?1")
        .and_then(|mut s| s.execute(params![key, &encode_index(next)[..]]))
        .map(drop)
        .map_err(|e| sqlite(path, e))
}

/// The oldest released slot of the pool that is still free (stale entries are dropped).
fn pop_released(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    key: &str,
) -> Result<Option<u128>, StoreError> {
    loop {
        let row: Option<(i64, Vec<u8>)> = tx
            .prepare_cached("SELECT id, slot FROM released WHERE pool = ?1 ORDER BY id LIMIT 1")
            .and_then(|mut s| {
                s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(|e| sqlite(path, e))?;
        let Some((id, slot)) = row else {
            return Ok(None);
        };
        tx.prepare_cached("DELETE FROM released WHERE id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(|e| sqlite(path, e))?;
        let Some(index) = decode_index(&slot).filter(|i| *i < pool.slot_count()) else {
            continue;
        };
        if !pool.is_reserved(index) && overlapping(tx, path, &pool.slot(index))?.is_none() {
            return Ok(Some(index));
        }
    }
}

fn insert_lease(
    tx: &Transaction<'_>,
    path: &Path,
    pool: &Pool,
    index: u128,
    owner: i64,
) -> Result<Lease, StoreError> {
    let lease = Lease {
        address: pool.endpoint(index),
        gateway: Some(pool.gateway()),
        pool: Some(pool.key()),
        span: pool.slot(index),
    };
    lease::insert(tx, path, &lease, owner)?;
    Ok(lease)
}
