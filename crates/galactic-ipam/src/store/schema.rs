//! Schema version 1, its additive revisions, how a store is born, and the checks every open
//! makes.
//!
//! A revision only adds what builds of an older revision of schema 1 ignore (a nullable column,
//! an index), so a node can go back to an older build without losing its store: `user_version`
//! stays 1 and `meta('schema-revision')` records the newest revision applied. The first write
//! transaction of a newer build upgrades an older store ([`upgrade`]).

use super::{sqlite, StoreError};
use rusqlite::config::DbConfig;
use rusqlite::Connection;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

/// The schema version this build reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;
/// The newest revision of schema 1 this build writes: 1 added `released.holder` (the digest of
/// the attachment that released a slot, so the same attachment gets it back on its next ADD)
/// and the indexes `released_by_slot` and `released_by_holder`.
pub const SCHEMA_REVISION: i64 = 1;
/// `PRAGMA application_id`: "GIPA", so a foreign SQLite file is never mistaken for a store.
pub const APPLICATION_ID: i64 = 0x4749_5041;
/// WAL size past which a closing process checkpoints and truncates it (see [`tune`]).
pub const WAL_TRUNCATE_BYTES: u64 = 256 * 1024;
/// WAL size past which that checkpoint waits for the lock instead of leaving it to a later process.
pub const WAL_FORCE_BYTES: u64 = 8 * 1024 * 1024;

const DDL: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE attachment (
    id           INTEGER PRIMARY KEY,
    network      TEXT NOT NULL,
    container_id TEXT NOT NULL,
    ifname       TEXT NOT NULL,
    origin       TEXT NOT NULL CHECK (origin IN ('add', 'legacy-marker', 'legacy-annotation')),
    created_at   INTEGER NOT NULL,
    UNIQUE (network, container_id, ifname)
);
CREATE INDEX attachment_by_container ON attachment (container_id, ifname);
CREATE TABLE lease (
    start         BLOB NOT NULL CHECK (length(start) = 17),
    last          BLOB NOT NULL CHECK (length(last) = 17 AND last >= start),
    attachment_id INTEGER NOT NULL,
    pool          TEXT,
    address       TEXT NOT NULL,
    gateway       TEXT,
    PRIMARY KEY (start, attachment_id)
) WITHOUT ROWID;
CREATE INDEX lease_by_attachment ON lease (attachment_id);
CREATE TABLE pool (
    key      TEXT PRIMARY KEY,
    first    BLOB NOT NULL,
    last     BLOB NOT NULL,
    slot_len INTEGER NOT NULL,
    next     BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE released (
    id   INTEGER PRIMARY KEY,
    pool TEXT NOT NULL,
    slot BLOB NOT NULL
);
CREATE INDEX released_by_pool ON released (pool, id);
";

/// Revision 1 of schema 1 (see [`SCHEMA_REVISION`]).
const REVISION_1: &str = "
ALTER TABLE released ADD COLUMN holder BLOB;
CREATE INDEX released_by_slot ON released (pool, slot);
CREATE INDEX released_by_holder ON released (holder, pool) WHERE holder IS NOT NULL;
";

/// The `meta` key recording the revision.
const REVISION_KEY: &str = "schema-revision";

/// Builds a new store under a temporary name and links it into place, so `ipam.db` only ever
/// appears complete. Losing a race against another creator is fine: theirs is used.
pub fn create(dir: &Path, path: &Path) -> Result<(), StoreError> {
    let dir_err = |source| StoreError::Dir {
        path: dir.to_owned(),
        source,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(dir_err)?;
    let tmp = dir.join(format!(".{}.new.{}", super::DB_FILE, std::process::id()));
    let _ = fs::remove_file(&tmp);
    let built = build(&tmp);
    let linked = built.and_then(|()| match fs::hard_link(&tmp, path) {
        Ok(()) => sync_dir(dir).map_err(dir_err),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(dir_err(e)),
    });
    let _ = fs::remove_file(&tmp);
    linked
}

fn build(tmp: &Path) -> Result<(), StoreError> {
    let err = |e| sqlite(tmp, e);
    let conn = Connection::open(tmp).map_err(err)?;
    fs::set_permissions(tmp, fs::Permissions::from_mode(0o600)).map_err(|source| {
        StoreError::Dir {
            path: tmp.to_owned(),
            source,
        }
    })?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.execute_batch(&format!(
        "BEGIN; {DDL} {REVISION_1} INSERT INTO meta (key, value) VALUES ('{REVISION_KEY}', '{SCHEMA_REVISION}');
         PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    ))
    .map_err(err)?;
    // Full durability once, at birth: the file is fsynced before it becomes visible.
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .map_err(err)?;
    drop(conn);
    fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(|source| StoreError::Dir {
            path: tmp.to_owned(),
            source,
        })
}

/// Brings a store of an older revision of schema 1 up to [`SCHEMA_REVISION`], inside the
/// caller's write transaction (so two processes never both apply it). One primary-key probe
/// when the store is current.
pub fn upgrade(tx: &rusqlite::Transaction<'_>, path: &Path) -> Result<(), StoreError> {
    use rusqlite::OptionalExtension;
    let revision: Option<String> = tx
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")
        .and_then(|mut s| s.query_row([REVISION_KEY], |r| r.get(0)).optional())
        .map_err(|e| sqlite(path, e))?;
    let revision = revision.and_then(|r| r.parse::<i64>().ok()).unwrap_or(0);
    if revision >= SCHEMA_REVISION {
        return Ok(());
    }
    tx.execute_batch(REVISION_1)
        .and_then(|()| {
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                rusqlite::params![REVISION_KEY, SCHEMA_REVISION.to_string()],
            )
        })
        .map(drop)
        .map_err(|e| sqlite(path, e))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Per-connection settings. Durability policy (docs/decisions/0003-ipam-store.md):
/// `synchronous = NORMAL` in WAL mode: a commit is in the OS page cache before it returns, so a
/// killed process loses nothing; after power loss the database stays consistent and at most the
/// last commits are lost, which only concerns pods that died with the node.
///
/// Checkpoints: every process is short-lived, and the first opener rebuilds the WAL index from
/// the WAL itself, forgetting what was already checkpointed. Checkpoint-on-close (an fsync per
/// process) and SQLite's automatic checkpoints (which would re-copy the whole WAL after every
/// rebuild) are therefore both off; instead a closing process that sees the WAL past
/// [`WAL_TRUNCATE_BYTES`] checkpoints it and truncates it to zero ([`trim_wal`]), so the WAL the
/// next process reads stays small and the fsync is paid once per few dozen operations.
pub fn tune(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    Ok(())
}

/// Checkpoints and truncates the WAL when it has grown past [`WAL_TRUNCATE_BYTES`]. Without
/// waiting, unless it is past [`WAL_FORCE_BYTES`]: a busy store means another process is at work
/// and will close soon; it or a later one trims.
pub fn trim_wal(conn: &Connection, path: &Path, timeout: Duration) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let size = fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    if size < WAL_TRUNCATE_BYTES {
        return;
    }
    let wait = if size >= WAL_FORCE_BYTES {
        timeout
    } else {
        Duration::ZERO
    };
    super::busy::set_bound(wait);
    // Best effort: a checkpoint that cannot run now leaves a valid WAL behind.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// Checks that the file is one of ours, of a schema this build understands, in WAL mode.
pub fn verify(conn: &Connection, path: &Path, timeout: Duration) -> Result<(), StoreError> {
    let corrupt = |why: String| StoreError::Corrupt {
        path: path.to_owned(),
        why,
    };
    let read = |pragma: &str| -> Result<i64, StoreError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(|e| super::classify(path, timeout, e))
    };
    let app = read("application_id")?;
    let version = read("user_version")?;
    if app != APPLICATION_ID {
        return Err(corrupt(format!(
            "application_id is {app:#x}, expected {APPLICATION_ID:#x}"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::FutureSchema {
            path: path.to_owned(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    if version < 1 {
        return Err(corrupt(format!("schema version {version}")));
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(|e| super::classify(path, timeout, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(corrupt(format!("journal mode is {mode}, expected wal")));
    }
    Ok(())
}
