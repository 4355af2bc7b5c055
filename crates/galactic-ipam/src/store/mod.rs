//! The allocation store: one SQLite database per node, shared by every galactic-ipam process.
//!
//! ```text
//! <data_dir>/                       (0700; default /var/lib/galactic/ipam)
//!   ipam.db                         SQLite, WAL mode, application_id 0x47495041 ("GIPA"),
//!                                   user_version = schema version (1)
//!   ipam.db-wal, ipam.db-shm        SQLite's write-ahead log and its index (never edit by hand)
//!   .ipam.db.new.<pid>              only while a first process builds the store (then linked)
//!
//! tables (schema 1, see schema.rs):
//!   meta(key PK, value)                       "legacy-markers:<dir>", "legacy-annotations:<file>"
//!                                             = import summary, each run once
//!   attachment(id PK, network, container_id, ifname, origin, created_at)
//!       UNIQUE(network, container_id, ifname)       ADD/DEL/CHECK lookup by CNI key
//!       INDEX(container_id, ifname)                 DEL when the config did not decode
//!       imported rows: network = '' and ifname = '' (upstream records carry neither)
//!   lease(start, last, attachment_id, pool, address, gateway)  PK(start, attachment_id)
//!       start/last: 17-byte blobs, family tag (4|6) + 16-byte big-endian value; the occupied span
//!       INDEX(attachment_id)                        release by attachment
//!       spans never partially overlap: a new span is checked against its predecessor by `start`
//!       (one index probe), so ADD cost does not grow with the number of leases
//!   pool(key PK, family, first, last, slot_len, next)  next = round-robin cursor (fresh slots)
//!   released(id PK, pool, slot, holder)                FIFO of released slots, reused only after
//!       INDEX(pool, id)                                the cursor has walked the whole pool
//!       INDEX(pool, slot)                              a slot taken on request leaves the FIFO
//!       INDEX(holder, pool) WHERE holder IS NOT NULL   holder: 16-byte digest of the attachment
//!                                                      key that released the slot by DEL; its
//!                                                      next ADD gets the slot back while free
//! ```
//!
//! Schema 1 grows by additive revisions (`meta('schema-revision')`, schema.rs): revision 1 added
//! `released.holder` and its two indexes. Older builds of schema 1 keep working on a newer store.
//!
//! Every ADD, DEL and GC is one `BEGIN IMMEDIATE` transaction: the write lock is taken up front,
//! waits are bounded (short polls up to `lock_timeout_ms`, then code 11; see busy.rs), and a SIGKILL at any instant leaves the
//! old or the new state (SQLite's WAL commit is atomic). A store that exists but is not ours, is
//! corrupt, or has a newer schema is reported and never reinitialised: a new store is only ever
//! built under a temporary name and linked into place, so an existing `ipam.db` is never empty
//! by our doing. Durability policy: `docs/decisions/0003-ipam-store.md`.
//!
//! The operations, each inside one transaction opened here: ADD and the STATUS probe
//! (allocate.rs), DEL (release.rs), CHECK (lookup in lease.rs), GC (gc.rs), imports (legacy.rs),
//! `verify` (verify.rs); attachment rows in attachment.rs. Every query of ADD, DEL and CHECK is an
//! index probe or a range bounded by one attachment; GC walks the rows of its own network.

mod allocate;
mod attachment;
mod busy;
#[cfg(test)]
mod cost;
mod gc;
mod holdings;
mod lease;
mod legacy;
mod memory;
mod release;
mod schema;
mod span_codec;
mod verify;

pub use allocate::{Allocation, Want};
pub use attachment::{AttachmentKey, DelKey};
pub use gc::GcScope;
pub use holdings::Holding;
pub use lease::Lease;
pub use legacy::{ImportReport, LegacyOrigin, LegacyRecord};
pub use verify::Report as VerifyReport;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// File name of the database inside the data directory.
pub const DB_FILE: &str = "ipam.db";

/// Why the store cannot serve a request.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process held the lock for longer than the timeout.
    #[error(
        "store {path} is busy: its lock was held by another process for more than {timeout_ms} ms"
    )]
    Busy {
        /// The database.
        path: PathBuf,
        /// The configured bound.
        timeout_ms: u128,
    },
    /// The data directory cannot be created or used.
    #[error("cannot prepare store directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a usable galactic-ipam store.
    #[error("store {path} is corrupt or not a galactic-ipam store ({why}); it was left untouched: repair or move it aside only once no pod uses its addresses")]
    Corrupt {
        /// The database.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// Written by a newer galactic-ipam.
    #[error("store {path} has schema version {found}; this galactic-ipam understands version {known} and will not touch a newer store")]
    FutureSchema {
        /// The database.
        path: PathBuf,
        /// Version in the file.
        found: i64,
        /// Version this build writes.
        known: i64,
    },
    /// The disk (or quota) holding the store is full: nothing could be recorded, not even a
    /// release, so the caller is told to try again once there is room (code 11).
    #[error("store {path} cannot record anything: its disk is full")]
    Full {
        /// The database.
        path: PathBuf,
    },
    /// The runtime asked for an address another attachment holds (code 7). Which attachment is
    /// not said: it may be another tenant's.
    #[error("requested address {address} is in use by another attachment")]
    InUse {
        /// The requested address.
        address: std::net::IpAddr,
    },
    /// A retried ADD asked for an address other than the one its attachment holds (code 7).
    #[error("requested address {requested}, but this attachment already holds {}; DEL the attachment before asking for another address", held_text(.held, *.requested))]
    Holds {
        /// The requested address.
        requested: std::net::IpAddr,
        /// The address of that family the attachment holds (none: its allocation has no
        /// address of that family).
        held: Option<ipnetwork::IpNetwork>,
    },
    /// A pool has no free slot.
    #[error("pool {pool} is exhausted: every allocatable /{slot_len} is in use")]
    Exhausted {
        /// The pool CIDR.
        pool: String,
        /// Its endpoint prefix length.
        slot_len: u8,
    },
    /// A legacy marker directory cannot be read.
    #[error("cannot read legacy IPAM state {path}: {source}")]
    Legacy {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Any other SQLite failure.
    #[error("store {path}: {source}")]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
}

fn held_text(held: &Option<ipnetwork::IpNetwork>, requested: std::net::IpAddr) -> String {
    match held {
        Some(net) => net.to_string(),
        None => format!(
            "an allocation without an {} address",
            galactic_core::ip::Family::of(requested)
        ),
    }
}

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    timeout: Duration,
}

impl Store {
    /// Opens the store in `dir`, building it first when it does not exist.
    pub fn open_or_create(dir: &Path, timeout: Duration) -> Result<Self, StoreError> {
        memory::install();
        let path = dir.join(DB_FILE);
        if !path.exists() {
            schema::create(dir, &path)?;
        }
        Self::open_file(path, timeout)
    }

    /// Opens the store in `dir` if it exists (DEL, CHECK, GC never create one).
    pub fn open_existing(dir: &Path, timeout: Duration) -> Result<Option<Self>, StoreError> {
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Ok(None);
        }
        Self::open_file(path, timeout).map(Some)
    }

    fn open_file(path: PathBuf, timeout: Duration) -> Result<Self, StoreError> {
        memory::install();
        // No SQLITE_OPEN_CREATE: a store that vanished between the check and here is an error,
        // never an empty database.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(|e| sqlite(&path, e))?;
        let store = Self {
            conn,
            path,
            timeout,
        };
        store.configure()?;
        schema::verify(&store.conn, &store.path, timeout)?;
        Ok(store)
    }

    fn configure(&self) -> Result<(), StoreError> {
        let err = |e| self.err(e);
        busy::set_bound(self.timeout);
        self.conn.busy_handler(Some(busy::handler)).map_err(err)?;
        schema::tune(&self.conn).map_err(err)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, committed only when `f` succeeds.
    pub(crate) fn write<T>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.transaction(TransactionBehavior::Immediate, f, |tx| tx.commit())
    }

    /// Runs `f` in a read transaction (a consistent snapshot; never blocks writers in WAL mode).
    pub(crate) fn read<T>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // Nothing to keep: dropping the transaction ends it.
        self.transaction(TransactionBehavior::Deferred, f, |_| Ok(()))
    }

    /// Runs `f` in a transaction of `behavior`, then `end`s the transaction when `f` succeeded.
    /// When `f` fails the transaction is dropped, which rolls it back.
    fn transaction<T>(
        &mut self,
        behavior: TransactionBehavior,
        f: impl FnOnce(&Transaction<'_>, &Path) -> Result<T, StoreError>,
        end: impl FnOnce(Transaction<'_>) -> rusqlite::Result<()>,
    ) -> Result<T, StoreError> {
        let path = self.path.clone();
        let timeout = self.timeout;
        let tx = self
            .conn
            .transaction_with_behavior(behavior)
            .map_err(|e| classify(&path, timeout, e))?;
        let upgraded = match behavior {
            // Writers bring an older revision up to date first; readers never need to.
            TransactionBehavior::Immediate => schema::upgrade(&tx, &path),
            _ => Ok(()),
        };
        let value = upgraded
            .and_then(|()| f(&tx, &path))
            .map_err(|e| reclassify(e, timeout))?;
        end(tx).map_err(|e| classify(&path, timeout, e))?;
        Ok(value)
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path, self.timeout, e)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        schema::trim_wal(&self.conn, &self.path, self.timeout);
    }
}

/// Every row `sql` selects with `args`, each read by `row`.
pub(crate) fn rows<T>(
    tx: &Transaction<'_>,
    path: &Path,
    sql: &str,
    args: impl rusqlite::Params,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = tx.prepare_cached(sql).map_err(|e| sqlite(path, e))?;
    let rows = stmt
        .query_map(args, row)
        .and_then(|rows| rows.collect::<Result<Vec<T>, _>>());
    rows.map_err(|e| sqlite(path, e))
}

/// Wraps a SQLite error without classification (the caller's context has none to add).
pub(crate) fn sqlite(path: &Path, source: rusqlite::Error) -> StoreError {
    classify(path, Duration::ZERO, source)
}

/// Turns SQLite's busy/corrupt codes into their own variants.
fn classify(path: &Path, timeout: Duration, source: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{
        DatabaseBusy, DatabaseCorrupt, DatabaseLocked, DiskFull, NotADatabase,
    };
    match source.sqlite_error_code() {
        Some(DiskFull) => StoreError::Full {
            path: path.to_owned(),
        },
        Some(DatabaseBusy | DatabaseLocked) => StoreError::Busy {
            path: path.to_owned(),
            timeout_ms: timeout.as_millis(),
        },
        Some(DatabaseCorrupt | NotADatabase) => StoreError::Corrupt {
            path: path.to_owned(),
            why: source.to_string(),
        },
        _ => StoreError::Sqlite {
            path: path.to_owned(),
            source,
        },
    }
}

/// Errors raised inside a transaction were classified without the timeout; fill it in.
fn reclassify(e: StoreError, timeout: Duration) -> StoreError {
    match e {
        StoreError::Busy { path, .. } => StoreError::Busy {
            path,
            timeout_ms: timeout.as_millis(),
        },
        other => other,
    }
}
