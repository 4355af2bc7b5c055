//! The store through its library API: properties that do not need a process per call.

use galactic_ipam::pool::Pool;
use galactic_ipam::store::{AttachmentKey, DelKey, Store};
use std::path::Path;
use std::time::Duration;

fn key(network: &str, cid: &str) -> AttachmentKey {
    AttachmentKey {
        network: network.into(),
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

fn pool(cidr: &str, slot_len: u8) -> Pool {
    Pool::new(cidr.parse().expect("a CIDR"), slot_len, None).expect("a valid pool")
}

#[test]
fn overlapping_pools_of_different_networks_never_share_an_address() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("legacy");
    let mut store = Store::open_or_create(dir.path(), Duration::from_secs(5)).unwrap();
    // Same space cut three ways: /96 and /112 slots of one /64, and a /80 inside it.
    let wide = pool("fd00::/64", 96);
    let fine = pool("fd00::/64", 112);
    let inner = pool("fd00::/80", 96);
    let mut leases = Vec::new();
    for i in 0..60 {
        for (net, p) in [("a", &wide), ("b", &fine), ("c", &inner)] {
            let alloc = store
                .allocate(
                    &key(net, &format!("{net}{i}")),
                    std::slice::from_ref(p),
                    &legacy,
                )
                .unwrap();
            leases.extend(alloc.leases);
        }
    }
    for (i, a) in leases.iter().enumerate() {
        for b in &leases[i + 1..] {
            assert!(
                !a.span.overlaps(&b.span),
                "{} overlaps {}",
                a.address,
                b.address
            );
        }
    }
    let report = store.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.leases, 180);
}

#[test]
fn batch_allocation_matches_single_allocation_and_releases_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = Path::new("/nonexistent/legacy");
    let mut store = Store::open_or_create(dir.path(), Duration::from_secs(5)).unwrap();
    let p = pool("10.0.0.0/22", 32);
    let keys: Vec<_> = (0..500).map(|i| key("n", &format!("c{i}"))).collect();
    assert_eq!(
        store
            .allocate_batch(&keys, std::slice::from_ref(&p), legacy)
            .unwrap(),
        500
    );
    assert_eq!(
        store
            .allocate_batch(&keys, std::slice::from_ref(&p), legacy)
            .unwrap(),
        0,
        "idempotent"
    );
    let next = store
        .allocate(&key("n", "late"), std::slice::from_ref(&p), legacy)
        .unwrap();
    assert_eq!(
        next.leases[0].address.to_string(),
        "10.0.1.246/32",
        "after 500 from .2"
    );
    let released = store
        .release(&DelKey::Exact(key("n", "c7")), legacy)
        .unwrap();
    assert_eq!(released.len(), 1);
    assert!(store.lookup(&key("n", "c7")).unwrap().is_none());
    assert_eq!(store.verify().unwrap().attachments, 500);
}

/// A store written before revision 1 (no `released.holder`): the first write of this build
/// upgrades it in place, and what was released before still returns to the queue.
#[test]
fn a_store_of_the_first_revision_is_upgraded_by_the_first_write() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = Path::new("/nonexistent/legacy");
    let p = pool("10.0.0.0/24", 32);
    {
        let mut store = Store::open_or_create(dir.path(), Duration::from_secs(5)).unwrap();
        store
            .allocate(&key("n", "old"), std::slice::from_ref(&p), legacy)
            .unwrap();
    }
    let db = dir.path().join(galactic_ipam::store::DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP INDEX released_by_slot; DROP INDEX released_by_holder;
         ALTER TABLE released DROP COLUMN holder;
         DELETE FROM meta WHERE key = 'schema-revision';",
    )
    .unwrap();
    drop(conn);

    let mut store = Store::open_existing(dir.path(), Duration::from_secs(5))
        .unwrap()
        .unwrap();
    // A read needs no upgrade and does not make one.
    assert!(store.lookup(&key("n", "old")).unwrap().is_some());
    let first = store
        .allocate(&key("n", "c1"), std::slice::from_ref(&p), legacy)
        .unwrap();
    store
        .release(&DelKey::Exact(key("n", "c1")), legacy)
        .unwrap();
    let again = store
        .allocate(&key("n", "c1"), std::slice::from_ref(&p), legacy)
        .unwrap();
    assert_eq!(first.leases, again.leases, "the released slot came back");
    drop(store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let revision: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema-revision'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(revision, "1");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1, "older builds of schema 1 still open it");
}
