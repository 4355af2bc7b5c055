//! The result cache, on disk as libcni keeps it: one `cniCacheV1` record per attachment at
//! `<cache dir>/results/<network>-<container id>-<ifname>`, holding the attachment (netns,
//! `CNI_ARGS`, capability arguments), the list it was added with and the final result. Every
//! runtime of one node shares the directory, as the runtimes of one host share `/var/lib/cni`.

use super::{Attachment, Conflist};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// libcni's record kind.
const KIND: &str = "cniCacheV1";

/// One cache directory.
pub(super) struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache under `dir` (libcni's `CacheDir`).
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.join("results"),
        }
    }

    fn path(&self, network: &str, att: &Attachment) -> PathBuf {
        self.dir
            .join(format!("{network}-{}-{}", att.container_id, att.ifname))
    }

    /// Records the result of a successful ADD (written whole: a reader never sees half).
    pub(super) fn put(&self, list: &Conflist, att: &Attachment, result: &Value) {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let record = json!({
            "kind": KIND,
            "containerId": att.container_id,
            "config": list.to_value(),
            "ifName": att.ifname,
            "networkName": list.name,
            "netns": att.netns,
            "cniArgs": att.args.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "capabilityArgs": att.capabilities,
            "result": result,
        });
        std::fs::create_dir_all(&self.dir).expect("create the runtime's cache directory");
        let path = self.path(&list.name, att);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".tmp-{}-{seq}", std::process::id()));
        std::fs::write(&tmp, record.to_string()).expect("write a cache record");
        std::fs::rename(&tmp, &path).expect("install a cache record");
    }

    /// The cached result of an attachment (libcni: none when there is no readable record).
    pub(super) fn result(&self, network: &str, att: &Attachment) -> Option<Value> {
        let record = read(&self.path(network, att))?;
        Some(record.get("result")?.clone())
    }

    /// Forgets an attachment.
    pub(super) fn remove(&self, network: &str, att: &Attachment) {
        let _ = std::fs::remove_file(self.path(network, att));
    }

    /// Forgets every attachment.
    pub(super) fn clear(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Every cached attachment of `network`, as recorded (libcni's `GetCachedAttachments`
    /// filtered by network), in file-name order.
    pub(super) fn attachments(&self, network: &str) -> Vec<Attachment> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        paths.sort();
        paths
            .iter()
            .filter_map(|p| read(p))
            .filter(|r| r["networkName"] == network)
            .map(|r| attachment(&r))
            .collect()
    }
}

/// A record, when the file is one.
fn read(path: &Path) -> Option<Value> {
    let record: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    (record["kind"] == KIND).then_some(record)
}

/// The attachment a record describes.
fn attachment(record: &Value) -> Attachment {
    let text = |key: &str| record[key].as_str().unwrap_or_default();
    let mut att = Attachment::new(text("containerId"), text("netns"), text("ifName"));
    for pair in record["cniArgs"].as_array().into_iter().flatten() {
        att = att.arg(
            pair[0].as_str().unwrap_or_default(),
            pair[1].as_str().unwrap_or_default(),
        );
    }
    if let Some(caps) = record["capabilityArgs"].as_object() {
        att.capabilities = caps.clone();
    }
    att
}
