//! Lease rows: reading an attachment's leases (CHECK), and the one index probe that finds the
//! lease occupying a span.

use super::attachment::{find_exact, find_imported, AttachmentKey};
use super::span_codec::{decode, encode};
use super::{sqlite, Store, StoreError};
use crate::pool::Span;
use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use rusqlite::{OptionalExtension, Transaction};
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
