//! The operations: ADD (allocate or return the existing allocation), DEL, lookup, GC, STATUS probe.
//! Each runs inside one transaction opened by [`Store`]; every query is an index probe or a range
//! bounded by one attachment, except GC, which walks the rows of its own network.

use super::span_codec::{decode, decode_index, encode, encode_index};
use super::{legacy, sqlite, Store, StoreError};
use crate::pool::{Pool, Span};
use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use rusqlite::{params, OptionalExtension, Transaction};
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;

/// The CNI attachment an allocation belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttachmentKey {
    /// Network name (`name` of the config).
    pub network: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

/// What DEL knows about the attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DelKey {
    /// The full key (the config decoded far enough to name the network).
    Exact(AttachmentKey),
    /// The config did not decode: every network's allocation for this container and interface.
    AnyNetwork {
        /// `CNI_CONTAINERID`.
        container_id: String,
        /// `CNI_IFNAME`.
        ifname: String,
    },
}

impl DelKey {
    fn container_id(&self) -> &str {
        match self {
            Self::Exact(k) => &k.container_id,
            Self::AnyNetwork { container_id, .. } => container_id,
        }
    }
}

/// One leased prefix or address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The endpoint address with its prefix length, as handed out.
    pub address: IpNetwork,
    /// The gateway handed out with it.
    pub gateway: Option<IpAddr>,
    /// The pool key, for native leases.
    pub pool: Option<String>,
    /// The occupied span.
    pub span: Span,
}

/// An attachment's leases (IPv6 first) and whether this call created them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The leases, IPv6 first.
    pub leases: Vec<Lease>,
    /// True when this ADD allocated; false when it found an earlier ADD's allocation.
    pub created: bool,
}

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

/// Upstream annotation keys keep only this many characters of the container id.
pub(crate) const LEGACY_ID_LEN: usize = 41;

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
        self.write(|tx, path| {
            legacy::ensure_markers_imported(tx, path, legacy_dir)?;
            if let Some(id) = find_exact(tx, path, key)? {
                let leases = leases_of(tx, path, id)?;
                return Ok(Allocation {
                    leases,
                    created: false,
                });
            }
            let id = insert_attachment(tx, path, key)?;
            let mut leases = Vec::new();
            for pool in pools {
                leases.push(allocate_in(tx, path, pool, id)?);
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
            legacy::ensure_markers_imported(tx, path, legacy_dir)?;
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

    /// DEL: releases everything recorded for the attachment, plus imported records of the same
    /// container. Returns the released leases (empty when nothing was known: still success).
    pub fn release(&mut self, key: &DelKey, legacy_dir: &Path) -> Result<Vec<Lease>, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_markers_imported(tx, path, legacy_dir)?;
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
                released.extend(release_attachment(tx, path, id)?);
            }
            Ok(released)
        })
    }

    /// CHECK: the attachment's leases (imported records of the container as a fallback).
    pub fn lookup(&mut self, key: &AttachmentKey) -> Result<Option<Vec<Lease>>, StoreError> {
        self.read(|tx, path| {
            let ids: Vec<i64> = match find_exact(tx, path, key)? {
                Some(id) => vec![id],
                None => find_imported(tx, path, &key.container_id)?,
            };
            if ids.is_empty() {
                return Ok(None);
            }
            let mut leases = Vec::new();
            for id in ids {
                leases.extend(leases_of(tx, path, id)?);
            }
            leases.sort_by_key(|l| l.span.family);
            Ok(Some(leases))
        })
    }

    /// GC: releases every allocation of `scope.network` whose attachment is not valid, and the
    /// imported records inside the network's pools whose container is not among the valid ones.
    /// Returns the released attachments' keys.
    pub fn gc(
        &mut self,
        scope: &GcScope<'_>,
        legacy_dir: &Path,
    ) -> Result<Vec<AttachmentKey>, StoreError> {
        self.write(|tx, path| {
            legacy::ensure_markers_imported(tx, path, legacy_dir)?;
            let mut doomed = stale_native(tx, path, scope)?;
            doomed.extend(stale_imported(tx, path, scope)?);
            for (id, _) in &doomed {
                release_attachment(tx, path, *id)?;
            }
            Ok(doomed.into_iter().map(|(_, k)| k).collect())
        })
    }

    /// STATUS: proves the store is writable and each pool has a free slot, by allocating one
    /// inside a transaction that is then rolled back.
    pub fn probe(&mut self, pools: &[Pool]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let timeout = self.timeout;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| super::classify(&path, timeout, e))?;
        for pool in pools {
            allocate_in(&tx, &path, pool, -1)?;
        }
        tx.rollback()
            .map_err(|e| super::classify(&path, timeout, e))
    }
}

fn find_exact(
    tx: &Transaction<'_>,
    path: &Path,
    key: &AttachmentKey,
) -> Result<Option<i64>, StoreError> {
    tx.prepare_cached(
        "SELECT id FROM attachment WHERE network = ?1 AND container_id = ?2 AND ifname = ?3",
    )
    .and_then(|mut s| {
        s.query_row(params![key.network, key.container_id, key.ifname], |r| {
            r.get(0)
        })
        .optional()
    })
    .map_err(|e| sqlite(path, e))
}

fn find_any_network(
    tx: &Transaction<'_>,
    path: &Path,
    container_id: &str,
    ifname: &str,
) -> Result<Vec<i64>, StoreError> {
    collect_ids(
        tx,
        path,
        "SELECT id FROM attachment WHERE container_id = ?1 AND ifname = ?2 AND network != ''",
        params![container_id, ifname],
    )
}

/// Imported records of a container: upstream keyed by container id alone, and its annotations
/// by the first 41 characters of it.
fn find_imported(
    tx: &Transaction<'_>,
    path: &Path,
    container_id: &str,
) -> Result<Vec<i64>, StoreError> {
    let short: String = container_id.chars().take(LEGACY_ID_LEN).collect();
    collect_ids(
        tx,
        path,
        "SELECT id FROM attachment WHERE network = '' AND container_id IN (?1, ?2) AND ifname = ''",
        params![container_id, short],
    )
}

fn collect_ids(
    tx: &Transaction<'_>,
    path: &Path,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<i64>, StoreError> {
    let mut stmt = tx.prepare_cached(sql).map_err(|e| sqlite(path, e))?;
    let rows = stmt
        .query_map(args, |r| r.get(0))
        .and_then(|rows| rows.collect::<Result<Vec<i64>, _>>());
    rows.map_err(|e| sqlite(path, e))
}

fn insert_attachment(
    tx: &Transaction<'_>,
    path: &Path,
    key: &AttachmentKey,
) -> Result<i64, StoreError> {
    tx.prepare_cached(
        "INSERT INTO attachment (network, container_id, ifname, origin, created_at)
         VALUES (?1, ?2, ?3, 'add', unixepoch())",
    )
    .and_then(|mut s| s.execute(params![key.network, key.container_id, key.ifname]))
    .map_err(|e| sqlite(path, e))?;
    Ok(tx.last_insert_rowid())
}

/// The leases of one attachment, IPv6 first.
pub(super) fn leases_of(
    tx: &Transaction<'_>,
    path: &Path,
    id: i64,
) -> Result<Vec<Lease>, StoreError> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT start, last, pool, address, gateway FROM lease WHERE attachment_id = ?1",
        )
        .map_err(|e| sqlite(path, e))?;
    let rows = stmt
        .query_map([id], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| sqlite(path, e))?;
    let mut leases = rows
        .into_iter()
        .map(|(start, last, pool, address, gateway)| {
            lease_from_row(&start, &last, pool, &address, gateway.as_deref()).ok_or_else(|| {
                StoreError::Corrupt {
                    path: path.to_owned(),
                    why: format!("lease of attachment {id} does not decode ({address})"),
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    leases.sort_by_key(|l| l.span.family);
    Ok(leases)
}

fn lease_from_row(
    start: &[u8],
    last: &[u8],
    pool: Option<String>,
    address: &str,
    gateway: Option<&str>,
) -> Option<Lease> {
    let (family, first) = decode(start)?;
    let (last_family, last) = decode(last)?;
    let address: IpNetwork = address.parse().ok()?;
    let gateway = match gateway {
        None => None,
        Some(g) => Some(g.parse().ok()?),
    };
    (family == last_family && Family::of(address.ip()) == family).then_some(Lease {
        address,
        gateway,
        pool,
        span: Span {
            family,
            first,
            last,
        },
    })
}

/// The lease overlapping `span`, if any. Spans in the table never partially overlap, so the one
/// with the greatest start not after `span.last` is the only candidate (one index probe).
pub(super) fn overlapping(
    tx: &Transaction<'_>,
    path: &Path,
    span: &Span,
) -> Result<Option<Span>, StoreError> {
    let found: Option<(Vec<u8>, Vec<u8>)> = tx
        .prepare_cached(
            "SELECT start, last FROM lease WHERE start <= ?1 ORDER BY start DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([&encode(span.family, span.last)[..]], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(|e| sqlite(path, e))?;
    let Some((start, last)) = found else {
        return Ok(None);
    };
    let decoded = decode(&start).zip(decode(&last));
    let Some(((family, first), (_, last))) = decoded else {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            why: "a lease span does not decode".into(),
        });
    };
    let other = Span {
        family,
        first,
        last,
    };
    Ok(other.overlaps(span).then_some(other))
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
    let span = pool.slot(index);
    let lease = Lease {
        address: pool.endpoint(index),
        gateway: Some(pool.gateway()),
        pool: Some(pool.key()),
        span,
    };
    tx.prepare_cached(
        "INSERT INTO lease (start, last, attachment_id, pool, address, gateway)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            &encode(span.family, span.first)[..],
            &encode(span.family, span.last)[..],
            owner,
            lease.pool,
            lease.address.to_string(),
            pool.gateway().to_string(),
        ])
    })
    .map_err(|e| sqlite(path, e))?;
    Ok(lease)
}

/// Deletes an attachment and its leases; each freed span goes to the release queue of every
/// known pool it belongs to (its own pool for native leases).
pub(super) fn release_attachment(
    tx: &Transaction<'_>,
    path: &Path,
    id: i64,
) -> Result<Vec<Lease>, StoreError> {
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
            enqueue(tx, path, lease)?;
        }
    }
    Ok(leases)
}

fn enqueue(tx: &Transaction<'_>, path: &Path, lease: &Lease) -> Result<(), StoreError> {
    for (key, first, slot_len) in pools_holding(tx, path, lease)? {
        let host_bits = u32::from(lease.span.family.bits()).saturating_sub(slot_len);
        let index = (lease.span.first - first) >> host_bits;
        tx.prepare_cached("INSERT INTO released (pool, slot) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![key, &encode_index(index)[..]]))
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
    let mut stmt = tx.prepare_cached(sql).map_err(|e| sqlite(path, e))?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                r.get::<_, u32>(3)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| sqlite(path, e))?;
    Ok(rows
        .into_iter()
        .filter_map(|(key, first, last, slot_len)| {
            let (family, first) = decode(&first)?;
            let (_, last) = decode(&last)?;
            let pool_span = Span {
                family,
                first,
                last,
            };
            (pool_span.overlaps(&lease.span) && lease.span.first >= first)
                .then_some((key, first, slot_len))
        })
        .collect())
}

fn stale_native(
    tx: &Transaction<'_>,
    path: &Path,
    scope: &GcScope<'_>,
) -> Result<Vec<(i64, AttachmentKey)>, StoreError> {
    let mut stmt = tx
        .prepare_cached("SELECT id, container_id, ifname FROM attachment WHERE network = ?1")
        .map_err(|e| sqlite(path, e))?;
    let rows = stmt
        .query_map([scope.network], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| sqlite(path, e))?;
    Ok(rows
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
    let ids = collect_ids(
        tx,
        path,
        "SELECT id FROM attachment WHERE network = '' AND ifname = ''",
        [],
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
