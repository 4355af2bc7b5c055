//! The hot path's work does not grow with the store: every statement ADD, CHECK, DEL and STATUS
//! run inside their write transaction (the pool lock) is measured in SQLite virtual-machine steps
//! and full-scan steps, on a store of a few allocations and on one of thousands. A statement
//! that scans a table, or a loop that visits rows per allocation, makes the large store's count
//! grow and fails the test; B-tree depth is not a VM step, so a seek costs the same at any size.

use super::{AttachmentKey, DelKey, Store};
use crate::pool::Pool;
use rusqlite::trace::{TraceEvent, TraceEventCodes};
use rusqlite::StatementStatus;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Steps counted since the trace was installed: (VM steps, full-scan steps, statements).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Steps {
    vm: i64,
    fullscan: i64,
    statements: i64,
}

thread_local! {
    /// Counters at each running statement's start, by SQL text (cached statements keep
    /// counting across runs, so each run is the difference).
    static STARTS: RefCell<HashMap<String, (i64, i64)>> = RefCell::new(HashMap::new());
    static TOTAL: RefCell<Steps> = RefCell::new(Steps::default());
    /// Statements that took a full-scan step, for the failure message.
    static SCANNED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn counters(stmt: &rusqlite::trace::StmtRef<'_>) -> (i64, i64) {
    (
        i64::from(stmt.get_status(StatementStatus::VmStep)),
        i64::from(stmt.get_status(StatementStatus::FullscanStep)),
    )
}

fn on_event(event: TraceEvent<'_>) {
    match event {
        TraceEvent::Stmt(stmt, _) => {
            let at = counters(&stmt);
            STARTS.with(|s| s.borrow_mut().insert(stmt.sql().into_owned(), at));
        }
        TraceEvent::Profile(stmt, _) => {
            let sql = stmt.sql().into_owned();
            let (vm, scan) = counters(&stmt);
            let (vm0, scan0) = STARTS.with(|s| s.borrow_mut().remove(&sql).unwrap_or((0, 0)));
            if scan > scan0 {
                SCANNED.with(|s| s.borrow_mut().push(sql));
            }
            TOTAL.with(|t| {
                let mut t = t.borrow_mut();
                t.vm += vm - vm0;
                t.fullscan += scan - scan0;
                t.statements += 1;
            });
        }
        _ => {}
    }
}

/// The steps `op` takes on `store`.
fn measure(store: &mut Store, op: impl FnOnce(&mut Store)) -> Steps {
    TOTAL.with(|t| *t.borrow_mut() = Steps::default());
    SCANNED.with(|s| s.borrow_mut().clear());
    store.conn.trace_v2(
        TraceEventCodes::SQLITE_TRACE_STMT | TraceEventCodes::SQLITE_TRACE_PROFILE,
        Some(on_event),
    );
    op(store);
    store.conn.trace_v2(TraceEventCodes::empty(), None);
    let scanned = SCANNED.with(|s| s.borrow().clone());
    assert!(
        scanned.is_empty(),
        "full scans on the hot path: {scanned:#?}"
    );
    TOTAL.with(|t| *t.borrow())
}

fn key(cid: &str) -> AttachmentKey {
    AttachmentKey {
        network: "net".into(),
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

fn pools() -> Vec<Pool> {
    ["fd00::/64", "10.0.0.0/8"]
        .iter()
        .zip([96, 32])
        .map(|(net, len)| Pool::new(net.parse().expect("a CIDR"), len, None).expect("a pool"))
        .collect()
}

/// A store holding `live` allocations, after `churn` more came and went (so the release queues
/// hold entries too).
fn store_with(dir: &Path, live: usize, churn: usize) -> Store {
    let legacy = dir.join("legacy");
    let mut store = Store::open_or_create(dir, Duration::from_secs(5)).expect("a store");
    let keys: Vec<AttachmentKey> = (0..live + churn).map(|i| key(&format!("c{i}"))).collect();
    store
        .allocate_batch(&keys, &pools(), &legacy)
        .expect("allocated");
    for k in &keys[live..] {
        store
            .release(&DelKey::Exact(k.clone()), &legacy)
            .expect("released");
    }
    store
}

/// The steps of each hot-path operation, in order: ADD (new), ADD (retry), CHECK, STATUS,
/// DEL (exact), DEL (network unknown).
fn hot_path(store: &mut Store, dir: &Path) -> Vec<(&'static str, Steps)> {
    let legacy = dir.join("legacy");
    let pools = pools();
    let new = key("new");
    let mut out = Vec::new();
    let mut step = |name, op: &dyn Fn(&mut Store)| out.push((name, measure(store, op)));
    step("ADD", &|s| {
        drop(s.allocate(&new, &pools, &legacy).expect("ADD"))
    });
    step("ADD again", &|s| {
        drop(s.allocate(&new, &pools, &legacy).expect("ADD"))
    });
    step("CHECK", &|s| drop(s.lookup(&new).expect("CHECK")));
    step("STATUS", &|s| s.probe(&pools).expect("STATUS"));
    step("DEL", &|s| {
        drop(
            s.release(&DelKey::Exact(new.clone()), &legacy)
                .expect("DEL"),
        );
    });
    step("ADD from the release queue", &|s| {
        drop(s.allocate(&key("again"), &pools, &legacy).expect("ADD"));
    });
    step("DEL without the network", &|s| {
        let any = DelKey::AnyNetwork {
            container_id: "again".into(),
            ifname: "eth0".into(),
        };
        drop(s.release(&any, &legacy).expect("DEL"));
    });
    out
}

#[test]
fn hot_path_work_is_the_same_on_a_store_of_ten_and_of_five_thousand() {
    let (small_dir, large_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut small = store_with(small_dir.path(), 10, 10);
    let mut large = store_with(large_dir.path(), 5_000, 2_000);
    let a = hot_path(&mut small, small_dir.path());
    let b = hot_path(&mut large, large_dir.path());
    for ((op, s), (_, l)) in a.iter().zip(&b) {
        eprintln!(
            "{op}: {} statements, {} / {} VM steps on 10 / 5 000 allocations",
            s.statements, s.vm, l.vm
        );
        assert_eq!(s.fullscan, 0, "{op} scans a table");
        assert_eq!(
            s.statements, l.statements,
            "{op} runs more statements on a larger store"
        );
        // Equal in practice; a little slack for SQLite's own page bookkeeping.
        assert!(
            l.vm <= s.vm + s.vm / 10 + 8,
            "{op}: {} VM steps on 10 allocations, {} on 5 000",
            s.vm,
            l.vm
        );
    }
}
