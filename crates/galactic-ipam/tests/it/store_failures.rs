//! A store that is corrupt, foreign or from the future is reported, never reinitialised.

use crate::common::Net;
use serde_json::json;
use std::fs;

fn net() -> Net {
    Net::new(json!({"ipv4_subnet": "10.1.0.0/24"}))
}

#[test]
fn garbage_in_place_of_the_store_is_reported_and_left_untouched() {
    for garbage in [&b"this is not a database at all, just text"[..], b""] {
        let net = net();
        fs::create_dir_all(net.data_dir()).unwrap();
        let db = net.data_dir().join("ipam.db");
        let content = garbage.repeat(200);
        fs::write(&db, &content).unwrap();
        let msg = net.call("ADD", "c1").expect_error(5);
        assert!(
            msg.contains("corrupt or not a galactic-ipam store"),
            "{msg}"
        );
        let msg = net.status().unwrap_err().expect_error(50);
        assert!(msg.contains("ipam.db"), "{msg}");
        // DEL cannot fail the runtime, but must not "repair" the file either.
        net.del("c1");
        assert_eq!(fs::read(&db).unwrap(), content, "never reinitialised");
    }
}

#[test]
fn a_newer_schema_or_a_foreign_sqlite_file_is_refused() {
    let net = net();
    net.add("c1");
    let db = net.data_dir().join("ipam.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA user_version = 2")
        .unwrap();
    let msg = net.call("ADD", "c2").expect_error(5);
    assert!(
        msg.contains("schema version 2") && msg.contains("understands version 1"),
        "{msg}"
    );
    net.status().unwrap_err().expect_error(50);

    let foreign = Net::new(json!({"ipv4_subnet": "10.1.0.0/24"}));
    fs::create_dir_all(foreign.data_dir()).unwrap();
    rusqlite::Connection::open(foreign.data_dir().join("ipam.db"))
        .unwrap()
        .execute_batch("CREATE TABLE t (x); PRAGMA journal_mode = WAL;")
        .unwrap();
    let msg = foreign.call("ADD", "c1").expect_error(5);
    assert!(msg.contains("application_id"), "{msg}");
}

#[test]
fn an_unwritable_data_dir_is_code_5_on_add_and_50_on_status() {
    let net = Net::new(json!({"ipv4_subnet": "10.1.0.0/24"}));
    net.node
        .merge_config(json!({"ipam_data_dir": "/proc/galactic-ipam-test"}));
    let msg = net.call("ADD", "c1").expect_error(5);
    assert!(msg.contains("/proc/galactic-ipam-test"), "{msg}");
    net.status().unwrap_err().expect_error(50);
}
