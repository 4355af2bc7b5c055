//! Attachment rows: the CNI key an allocation belongs to, and finding or recording it. Imported
//! records have no network and no interface name (upstream keyed by container id alone).

use super::{rows, sqlite, StoreError};
use rusqlite::{params, OptionalExtension, Transaction};
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
    pub(super) fn container_id(&self) -> &str {
        match self {
            Self::Exact(k) => &k.container_id,
            Self::AnyNetwork { container_id, .. } => container_id,
        }
    }
}

/// The digest that marks a slot released by DEL as this attachment's (`released.holder`): the
/// first 16 bytes of SHA-256 over network, container id and interface name, each ended by a NUL
/// byte (none of them can contain one). Only the same attachment can match it, and the store
/// keeps no readable trace of a container that is gone.
pub(super) fn holder(key: &AttachmentKey) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [&key.network, &key.container_id, &key.ifname] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    let digest = hasher.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// The key of attachment row `id` (`None` for imported rows, which have no network).
pub(super) fn key_of(
    tx: &Transaction<'_>,
    path: &Path,
    id: i64,
) -> Result<Option<AttachmentKey>, StoreError> {
    let row: Option<(String, String, String)> = tx
        .prepare_cached("SELECT network, container_id, ifname FROM attachment WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(|e| sqlite(path, e))?;
    Ok(row
        .filter(|(network, _, _)| !network.is_empty())
        .map(|(network, container_id, ifname)| AttachmentKey {
            network,
            container_id,
            ifname,
        }))
}

/// Upstream annotation keys keep only this many characters of the container id.
pub(crate) const LEGACY_ID_LEN: usize = 41;

pub(super) fn find_exact(
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

pub(super) fn find_any_network(
    tx: &Transaction<'_>,
    path: &Path,
    container_id: &str,
    ifname: &str,
) -> Result<Vec<i64>, StoreError> {
    rows(
        tx,
        path,
        "SELECT id FROM attachment WHERE container_id = ?1 AND ifname = ?2 AND network != ''",
        params![container_id, ifname],
        |r| r.get(0),
    )
}

/// Imported records of a container: upstream keyed by container id alone, and its annotations
/// by the first 41 characters of it.
pub(super) fn find_imported(
    tx: &Transaction<'_>,
    path: &Path,
    container_id: &str,
) -> Result<Vec<i64>, StoreError> {
    let short: String = container_id.chars().take(LEGACY_ID_LEN).collect();
    rows(
        tx,
        path,
        "SELECT id FROM attachment WHERE network = '' AND container_id IN (?1, ?2) AND ifname = ''",
        params![container_id, short],
        |r| r.get(0),
    )
}

pub(super) fn insert_attachment(
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
