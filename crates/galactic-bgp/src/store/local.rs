//! The local backend: the same documents as JSON files, for nodes without a cluster (the demo,
//! Podman, nerdctl). A router on the node reads them from here.
//!
//! ```text
//! <state_dir>/bgp/
//!   lock                          flock(2); held by one plugin process for its whole operation
//!   revision                      the last resourceVersion handed out (fixed-width decimal)
//!   .staging/                     every write's temporary, `<ns>.<plural>.<name>.tmp.<pid>`
//!   <namespace>/
//!     bgprouters/<name>.json      this node's router settings (written by the operator/demo)
//!     bgpvrfinstances/<name>.json
//!     bgpadvertisements/<name>.json
//!     endpointslices/<name>.json  in the pod's namespace (CNI_ARGS K8S_POD_NAMESPACE)
//!     pods/<name>.json            optional; gives EndpointSlices an owner reference
//! ```
//!
//! Every write is a whole document written to a temporary file in `.staging/` (the same file
//! system) and renamed over the old one, so a reader (or a crash) sees the old or the new
//! document, never a torn one. A writer killed in between leaves its temporary in `.staging/`,
//! where the next process to take the lock removes it when it opens the store (the lock is held
//! by one process at a time, so nothing there is a live writer's): one listing of an empty
//! directory per process, where a temporary beside the document made every write, every read of
//! a missing document and every removal list the document's directory, one entry per
//! attachment of the node (decision 0079). Temporaries an older release left beside documents
//! go with GC's sweep of the store.
//! A write that changes nothing is skipped and keeps its resourceVersion, as the API server does:
//! on ext4 every rename over an existing file forces a flush of the new data (≈ 0.2 ms). The
//! revision counter is one fixed-width `pwrite` in place (a process crash cannot tear it); if it
//! is ever unreadable, the highest resourceVersion among the documents is where it resumes.
//! No fsync: a power loss ends every container on the node, and the next ADD rewrites what it
//! needs. Concurrent plugin processes serialise on `lock` with a bounded wait (code 11 past it),
//! so read-modify-write sequences never lose an update.

use super::{meta_str, Kind, ObjectStore, StoreError};
use galactic_core::lockfile::{self, LockGuard};
use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Longest wait for the local backend's lock (and the node's per-VPC locks) before code 11.
pub(crate) const LOCAL_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Subdirectory of the state directory holding the documents.
pub const DIR: &str = "bgp";
/// Subdirectory of [`DIR`] holding the writes' temporaries.
const STAGING: &str = ".staging";

/// Publication to files under the state directory; holds the lock while it lives.
pub struct LocalStore {
    root: PathBuf,
    _lock: LockGuard,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let what = what.into();
    move |source| StoreError::Io { what, source }
}

impl LocalStore {
    /// Removes every temporary under the store that a killed writer left (GC): the store's
    /// lock is held, so none is a live writer's. Returns how many went.
    pub fn sweep_temporaries(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        for ns in std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
        {
            for kind in std::fs::read_dir(ns.path()).into_iter().flatten().flatten() {
                removed += galactic_core::state::sweep_temporaries(&kind.path())?;
            }
        }
        Ok(removed)
    }

    /// Opens `<state_dir>/bgp`, waiting at most `wait` for the lock; removes what a killed
    /// writer left in the staging directory.
    pub fn open(state_dir: &Path, wait: Duration) -> Result<Self, StoreError> {
        let root = state_dir.join(DIR);
        let staging = root.join(STAGING);
        std::fs::create_dir_all(&staging).map_err(io(format!("create {}", staging.display())))?;
        let lock = lockfile::acquire(&root.join("lock"), wait)?;
        let store = Self { root, _lock: lock };
        store.clear_staging()?;
        Ok(store)
    }

    /// Removes every temporary in the staging directory: under the store's lock each is a
    /// killed writer's.
    fn clear_staging(&self) -> Result<(), StoreError> {
        let staging = self.root.join(STAGING);
        for entry in dirs(&staging)? {
            match std::fs::remove_file(&entry) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io(format!("remove {}", entry.display()))(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn dir(&self, kind: Kind, namespace: &str) -> PathBuf {
        self.root.join(namespace).join(kind.plural())
    }

    fn path(&self, kind: Kind, namespace: &str, name: &str) -> PathBuf {
        self.dir(kind, namespace).join(format!("{name}.json"))
    }

    fn read(path: &Path) -> Result<Option<Value>, StoreError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt {
                        path: path.display().to_string(),
                        why: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("read {}", path.display()))(e)),
        }
    }

    /// Writes `value` to `path` atomically: staged, then renamed into place (module comment).
    /// The store's lock is held, so the staged name needs no more than the pid to be this
    /// writer's.
    fn write(&self, path: &Path, value: &Value) -> Result<(), StoreError> {
        let what = || format!("write {}", path.display());
        let text = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Shape {
            what: what(),
            why: e.to_string(),
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(what()))?;
        }
        let staged = self.staged(path);
        std::fs::write(&staged, text).map_err(io(what()))?;
        galactic_core::state::before_rename(path, &staged)?;
        std::fs::rename(&staged, path).map_err(|e| {
            // Best effort: the next process's open removes it otherwise.
            let _ = std::fs::remove_file(&staged);
            io(what())(e)
        })
    }

    /// The staged temporary of the document at `path` (`<ns>.<plural>.<name>.tmp.<pid>`).
    fn staged(&self, path: &Path) -> PathBuf {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        let mut name = relative
            .with_extension("")
            .to_string_lossy()
            .replace('/', ".");
        name.push_str(&format!(".tmp.{}", std::process::id()));
        self.root.join(STAGING).join(name)
    }

    /// Removes the document at `path`; an absent one is fine.
    fn unlink(path: &Path) -> Result<(), StoreError> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("remove {}", path.display()))(e))
            }
            _ => Ok(()),
        }
    }

    fn next_revision(&self) -> Result<String, StoreError> {
        let path = self.root.join("revision");
        let what = || format!("update {}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(what()))?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(io(what()))?;
        let current = match text.trim().parse::<u64>() {
            Ok(n) => n,
            Err(_) => self.highest_revision()?,
        };
        let next = current + 1;
        // Wider than any earlier content (the old format was a bare decimal), so it all goes.
        file.write_all_at(format!("{next:020}\n").as_bytes(), 0)
            .map_err(io(what()))?;
        Ok(next.to_string())
    }

    /// The highest resourceVersion of any stored document (0 for none): where the counter
    /// resumes when its file is new or was lost.
    fn highest_revision(&self) -> Result<u64, StoreError> {
        let mut highest = 0;
        for namespace in dirs(&self.root)? {
            for kind in dirs(&namespace)? {
                for doc in dirs(&kind)? {
                    if doc.extension().is_some_and(|x| x == "json") {
                        let rv = Self::read(&doc).ok().flatten().and_then(|d| {
                            meta_str(&d, "resourceVersion").and_then(|v| v.parse::<u64>().ok())
                        });
                        highest = highest.max(rv.unwrap_or(0));
                    }
                }
            }
        }
        Ok(highest)
    }

    fn uid() -> Result<String, StoreError> {
        std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .map(|s| s.trim().to_owned())
            .map_err(io("read /proc/sys/kernel/random/uuid"))
    }

    fn what(kind: Kind, namespace: &str, name: &str) -> String {
        format!("{} {namespace}/{name}", kind.kind())
    }

    fn name_of(kind: Kind, object: &Value) -> Result<String, StoreError> {
        meta_str(object, "name")
            .filter(|n| !n.is_empty() && !n.contains('/') && !n.starts_with('.'))
            .map(str::to_owned)
            .ok_or_else(|| StoreError::Shape {
                what: kind.kind().into(),
                why: "metadata.name is missing or not a valid file name".into(),
            })
    }
}

/// The entries of `dir` (none when it does not exist or is not a directory).
fn dirs(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(Result::ok).map(|e| e.path()).collect()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(Vec::new())
        }
        Err(e) => Err(io(format!("list {}", dir.display()))(e)),
    }
}

impl ObjectStore for LocalStore {
    fn list(&self, kind: Kind, namespace: &str) -> Result<Vec<Value>, StoreError> {
        let dir = self.dir(kind, namespace);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        paths.sort();
        let mut out = Vec::new();
        for path in paths {
            out.extend(Self::read(&path)?);
        }
        Ok(out)
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Result<Option<Value>, StoreError> {
        // A writer killed before its rename left its temporary in the staging directory, not
        // beside the document: a missing document has nothing to sweep.
        Self::read(&self.path(kind, namespace, name))
    }

    fn create(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError> {
        let name = Self::name_of(kind, object)?;
        let path = self.path(kind, namespace, &name);
        if Self::read(&path)?.is_some() {
            return Err(StoreError::Exists {
                what: Self::what(kind, namespace, &name),
            });
        }
        let mut object = object.clone();
        object["apiVersion"] = json!(kind.api_version());
        object["kind"] = json!(kind.kind());
        let m = &mut object["metadata"];
        m["namespace"] = json!(namespace);
        m["uid"] = json!(Self::uid()?);
        m["resourceVersion"] = json!(self.next_revision()?);
        m["creationTimestamp"] =
            json!(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
        self.write(&path, &object)?;
        Ok(object)
    }

    fn replace(&self, kind: Kind, namespace: &str, object: &Value) -> Result<Value, StoreError> {
        let name = Self::name_of(kind, object)?;
        let path = self.path(kind, namespace, &name);
        let what = Self::what(kind, namespace, &name);
        let current =
            Self::read(&path)?.ok_or_else(|| StoreError::NotFound { what: what.clone() })?;
        if let Some(sent) = meta_str(object, "resourceVersion") {
            if meta_str(&current, "resourceVersion") != Some(sent) {
                return Err(StoreError::Conflict { what });
            }
        }
        let mut next = object.clone();
        for field in ["uid", "creationTimestamp", "namespace", "resourceVersion"] {
            next["metadata"][field] = current["metadata"][field].clone();
        }
        if next == current {
            return Ok(current);
        }
        next["metadata"]["resourceVersion"] = json!(self.next_revision()?);
        self.write(&path, &next)?;
        Ok(next)
    }

    fn merge_patch(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, StoreError> {
        let path = self.path(kind, namespace, name);
        let mut current = Self::read(&path)?.ok_or_else(|| StoreError::NotFound {
            what: Self::what(kind, namespace, name),
        })?;
        let before = current.clone();
        galactic_kube::merge_patch(&mut current, patch);
        if current == before {
            return Ok(current);
        }
        current["metadata"]["resourceVersion"] = json!(self.next_revision()?);
        self.write(&path, &current)?;
        Ok(current)
    }

    fn delete(&self, kind: Kind, namespace: &str, name: &str, uid: &str) -> Result<(), StoreError> {
        let path = self.path(kind, namespace, name);
        match Self::read(&path)? {
            None => Ok(()),
            Some(current) if meta_str(&current, "uid") != Some(uid) => Err(StoreError::Conflict {
                what: format!("delete {} (uid changed)", Self::what(kind, namespace, name)),
            }),
            Some(_) => Self::unlink(&path),
        }
    }

    fn delete_unchanged(
        &self,
        kind: Kind,
        namespace: &str,
        object: &Value,
    ) -> Result<(), StoreError> {
        let name = Self::name_of(kind, object)?;
        let path = self.path(kind, namespace, &name);
        let Some(current) = Self::read(&path)? else {
            return Ok(());
        };
        let same = |field| meta_str(&current, field) == meta_str(object, field);
        if !(same("uid") && same("resourceVersion")) {
            return Err(StoreError::Conflict {
                what: format!(
                    "delete {} (changed since read)",
                    Self::what(kind, namespace, &name)
                ),
            });
        }
        Self::unlink(&path)
    }

    fn probe(&self, _namespace: &str) -> Result<(), StoreError> {
        let probe = self.root.join(".status-probe");
        std::fs::write(&probe, b"ok").map_err(io(format!("write {}", probe.display())))?;
        std::fs::remove_file(&probe).map_err(io(format!("remove {}", probe.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(1);

    fn advertisement(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"prefixes": ["fd00::/64"]}})
    }

    fn rv(v: &Value) -> u64 {
        meta_str(v, "resourceVersion").unwrap().parse().unwrap()
    }

    #[test]
    fn revisions_keep_increasing_across_processes_and_old_counter_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(DIR);
        std::fs::create_dir_all(&root).unwrap();
        // The earlier format: a bare decimal.
        std::fs::write(root.join("revision"), "7").unwrap();
        let a = LocalStore::open(dir.path(), WAIT).unwrap();
        let first = a
            .create(Kind::Advertisement, "ns", &advertisement("a"))
            .unwrap();
        assert_eq!(rv(&first), 8);
        drop(a);
        let b = LocalStore::open(dir.path(), WAIT).unwrap();
        let second = b
            .create(Kind::Advertisement, "ns", &advertisement("b"))
            .unwrap();
        assert_eq!(rv(&second), 9);
        assert_eq!(
            std::fs::read_to_string(root.join("revision")).unwrap(),
            "00000000000000000009\n"
        );
    }

    #[test]
    fn a_lost_counter_resumes_above_every_stored_document() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), WAIT).unwrap();
        for name in ["a", "b", "c"] {
            store
                .create(Kind::Advertisement, "ns", &advertisement(name))
                .unwrap();
        }
        let root = dir.path().join(DIR);
        for damaged in ["", "\0\0\0\0", "garbage"] {
            std::fs::write(root.join("revision"), damaged).unwrap();
            let highest = store
                .list(Kind::Advertisement, "ns")
                .unwrap()
                .iter()
                .map(rv)
                .max()
                .unwrap();
            let next = store
                .merge_patch(
                    Kind::Advertisement,
                    "ns",
                    "a",
                    &json!({"spec": {"prefixes": [damaged]}}),
                )
                .unwrap();
            assert_eq!(rv(&next), highest + 1, "after {damaged:?}");
        }
    }

    /// The listings of a directory and the names created in it, as inotify reports them.
    struct DirEvents(std::fs::File);

    impl DirEvents {
        fn watch(dir: &Path) -> Self {
            use std::os::fd::FromRawFd;
            // SAFETY: a plain system call; the descriptor is checked and owned below.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            assert!(fd >= 0);
            let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
            let mask = libc::IN_OPEN | libc::IN_CREATE | libc::IN_MOVED_TO;
            // SAFETY: `path` is NUL-terminated and outlives the call.
            assert!(unsafe { libc::inotify_add_watch(fd, path.as_ptr(), mask) } >= 0);
            // SAFETY: `fd` is a fresh descriptor nothing else owns.
            Self(std::fs::File::from(unsafe {
                std::os::fd::OwnedFd::from_raw_fd(fd)
            }))
        }

        /// (listings of the directory, names created or renamed into it).
        fn take(mut self) -> (usize, Vec<String>) {
            use std::io::Read;
            let mut buf = vec![0u8; 1 << 16];
            let n = match self.0.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => panic!("{e}"),
            };
            let (mut listings, mut created, mut at) = (0, Vec::new(), 0);
            while at + 16 <= n {
                let word =
                    |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().unwrap());
                let (mask, len) = (word(4), word(12) as usize);
                let name = String::from_utf8_lossy(&buf[at + 16..at + 16 + len]);
                let name = name.trim_end_matches('\0').to_owned();
                if mask & libc::IN_OPEN != 0 && mask & libc::IN_ISDIR != 0 && name.is_empty() {
                    listings += 1;
                } else if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
                    created.push(name);
                }
                at += 16 + len;
            }
            (listings, created)
        }
    }

    #[test]
    fn a_killed_writers_temporary_is_staged_apart_and_goes_with_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), WAIT).unwrap();
        store
            .create(Kind::Advertisement, "ns", &advertisement("a"))
            .unwrap();
        let docs = dir.path().join(DIR).join("ns").join("bgpadvertisements");
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(&docs),
            ["a.json"],
            "nothing staged beside the document"
        );
        // A rewrite, a read of a missing document and a removal, watched by the kernel: none
        // lists the document's directory or creates a temporary in it.
        let events = DirEvents::watch(&docs);
        let patch = json!({"spec": {"prefixes": ["fd01::/64"]}});
        store
            .merge_patch(Kind::Advertisement, "ns", "a", &patch)
            .unwrap();
        assert_eq!(store.get(Kind::Advertisement, "ns", "gone").unwrap(), None);
        let a = store.get(Kind::Advertisement, "ns", "a").unwrap().unwrap();
        let uid = meta_str(&a, "uid").unwrap().to_owned();
        store.delete(Kind::Advertisement, "ns", "a", &uid).unwrap();
        let (listings, created) = events.take();
        assert_eq!(listings, 0, "listings of {}", docs.display());
        assert_eq!(created, ["a.json"], "files created in {}", docs.display());
        store
            .create(Kind::Advertisement, "ns", &advertisement("a"))
            .unwrap();
        // What a writer killed between its write and its rename leaves.
        let staged = store.staged(&store.path(Kind::Advertisement, "ns", "b"));
        assert!(staged.starts_with(dir.path().join(DIR).join(STAGING)));
        std::fs::write(&staged, b"{").unwrap();
        drop(store);
        let _store = LocalStore::open(dir.path(), WAIT).unwrap();
        assert!(
            !staged.exists(),
            "the next open removed {}",
            staged.display()
        );
        assert_eq!(names(&docs), ["a.json"]);
    }

    #[test]
    fn a_write_that_changes_nothing_keeps_the_document_and_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path(), WAIT).unwrap();
        let created = store
            .create(Kind::Advertisement, "ns", &advertisement("a"))
            .unwrap();
        let path = store.path(Kind::Advertisement, "ns", "a");
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&path);
        let patched = store
            .merge_patch(
                Kind::Advertisement,
                "ns",
                "a",
                &json!({"spec": {"prefixes": ["fd00::/64"]}}),
            )
            .unwrap();
        assert_eq!(patched, created);
        let replaced = store.replace(Kind::Advertisement, "ns", &created).unwrap();
        assert_eq!(replaced, created);
        assert_eq!(inode(&path), before, "not rewritten");
        let changed = store
            .merge_patch(
                Kind::Advertisement,
                "ns",
                "a",
                &json!({"spec": {"prefixes": ["fd01::/64"]}}),
            )
            .unwrap();
        assert_eq!(rv(&changed), rv(&created) + 1);
        assert_ne!(inode(&path), before, "a change is a new document");
        // A stale resourceVersion is still a conflict, even for a no-op.
        assert!(matches!(
            store.replace(Kind::Advertisement, "ns", &created),
            Err(StoreError::Conflict { .. })
        ));
    }
}
