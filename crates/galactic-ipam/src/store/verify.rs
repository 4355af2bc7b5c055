//! A full consistency check (tests, crash-loop invariant, `galactic-ipam verify`). It scans
//! everything, so it is never part of ADD/DEL/CHECK.

use super::span_codec::decode_span;
use super::{sqlite, Store, StoreError};
use crate::pool::Span;
use std::collections::HashSet;

/// One `lease` row as read for checking: start, last, owner, pool.
type LeaseRow = (Vec<u8>, Vec<u8>, i64, Option<String>);

/// What `verify` found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Report {
    /// Attachments.
    pub attachments: usize,
    /// Leases.
    pub leases: usize,
    /// Every problem, described; empty when the store is consistent.
    pub problems: Vec<String>,
}

impl Store {
    /// Checks SQLite's integrity and the store's own invariants: every lease decodes and belongs
    /// to an attachment, every attachment holds a lease, and distinct spans never overlap (two
    /// leases share one span only when both are not native: imported duplicates).
    pub fn verify(&mut self) -> Result<Report, StoreError> {
        self.read(|tx, path| {
            let mut report = Report::default();
            let integrity: String = tx
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .map_err(|e| sqlite(path, e))?;
            if integrity != "ok" {
                report
                    .problems
                    .push(format!("integrity_check: {integrity}"));
            }
            let attachments: HashSet<i64> = tx
                .prepare("SELECT id FROM attachment")
                .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                .map_err(|e| sqlite(path, e))?;
            report.attachments = attachments.len();
            let rows: Vec<LeaseRow> = tx
                .prepare("SELECT start, last, attachment_id, pool FROM lease ORDER BY start")
                .and_then(|mut s| {
                    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                        .collect()
                })
                .map_err(|e| sqlite(path, e))?;
            report.leases = rows.len();
            check_leases(&rows, &attachments, &mut report);
            Ok(report)
        })
    }
}

fn check_leases(rows: &[LeaseRow], attachments: &HashSet<i64>, report: &mut Report) {
    let mut holders = HashSet::new();
    let mut previous: Option<(Span, bool)> = None;
    for (start, last, owner, pool) in rows {
        let Some(span) = decode_span(start, last) else {
            report
                .problems
                .push(format!("lease of attachment {owner} does not decode"));
            continue;
        };
        if !attachments.contains(owner) {
            report
                .problems
                .push(format!("lease {span} belongs to no attachment ({owner})"));
        }
        holders.insert(*owner);
        let native = pool.is_some();
        if let Some((prev, prev_native)) = previous {
            let same = prev == span;
            if prev.overlaps(&span) && (!same || native || prev_native) {
                report
                    .problems
                    .push(format!("leases overlap: {prev} and {span}"));
            }
        }
        previous = Some((span, native));
    }
    for id in attachments.difference(&holders) {
        report
            .problems
            .push(format!("attachment {id} holds no lease"));
    }
}
