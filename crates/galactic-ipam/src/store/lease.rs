//! Lease rows: reading an attachment's leases (CHECK), and the one index probe that finds the
//! lease occupying a span.

use super::attachment::{find_exact, find_imported, AttachmentKey};
use super::span_codec::{decode_span, encode};
use super::{rows, sqlite, Store, StoreError};
use crate::pool::Span;
use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use rusqlite::{params, OptionalExtension, Transaction};
use std::net::IpAddr;
use std::path::Path;

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

impl Store {
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
}

/// The leases of one attachment, IPv6 first.
pub(super) fn leases_of(
    tx: &Transaction<'_>,
    path: &Path,
    id: i64,
) -> Result<Vec<Lease>, StoreError> {
    let found = rows(
        tx,
        path,
        "SELECT start, last, pool, address, gateway FROM lease WHERE attachment_id = ?1",
        [id],
        |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        },
    )?;
    let mut leases = found
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
    let span = decode_span(start, last)?;
    let address: IpNetwork = address.parse().ok()?;
    let gateway = match gateway {
        None => None,
        Some(g) => Some(g.parse().ok()?),
    };
    (Family::of(address.ip()) == span.family).then_some(Lease {
        address,
        gateway,
        pool,
        span,
    })
}

/// Records `lease` for attachment `owner` (native and imported leases alike).
pub(super) fn insert(
    tx: &Transaction<'_>,
    path: &Path,
    lease: &Lease,
    owner: i64,
) -> Result<(), StoreError> {
    let span = lease.span;
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
            lease.gateway.map(|g| g.to_string()),
        ])
    })
    .map(drop)
    .map_err(|e| sqlite(path, e))
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
    let other = decode_span(&start, &last).ok_or_else(|| StoreError::Corrupt {
        path: path.to_owned(),
        why: "a lease span does not decode".into(),
    })?;
    Ok(other.overlaps(span).then_some(other))
}
