//! Node-local state files: one reader and one atomic writer for every plugin's records.
//!
//! A file is replaced through a temporary file and a rename, so a reader sees the old or the new
//! content, never a torn one, even when the writer is SIGKILLed. The temporary of
//! `<dir>/<stem>.json` is `<dir>/.staging/<stem>.tmp.<pid>`: staged apart, so that finding a
//! file's temporaries lists the few writes in flight, not the directory's every file (a
//! directory of 1 000 attachment records cost each write, and each read of a missing file, a
//! listing of 1 000 names: ≈ 0.5–1 ms on ext4). Releases before this one left temporaries beside
//! the file; listings of the directory ([`json_files`]) and GC's [`sweep_temporaries`] still
//! remove those. No temporary outlives the recovery of its writer (the
//! runtime's DEL of the attachment, or its next ADD), whether or not the file it was for ever
//! came to exist:
//! - every writer of a file holds the lock that owns that file (each record kind has one), so a
//!   temporary of the file found by the next writer, or by [`remove`], was left by a writer that
//!   was killed between its write and its rename: both remove it first;
//! - a reader that finds the file missing ([`read_json`]) and a listing of a directory
//!   ([`json_files`]) remove the temporaries they meet whose writer is gone (no lock needed:
//!   [`writer_gone`]): a DEL after an ADD killed while it created the file finds no file to
//!   remove, but it looks for it;
//! - [`remove_dead_temporaries`] does the same for a file that exists (a shared record a DEL
//!   reads but does not rewrite), [`sweep_temporaries`] for a whole directory (GC).
//!
//! Liveness is judged by the temporary's pid (every writer is a plugin process the node's runtime
//! started, in the host's pid namespace, as every reader is). A pid the kernel has handed to a new process
//! since the writer died makes its temporary look live: it then stays until the next write or
//! removal of its file (under the lock) or a later sweep. That is a late removal, never a wrong
//! one: a temporary is only removed when no process with its pid exists, or under the file's
//! lock. The one race left, a dead writer's pid reused by a new writer of the *same* file
//! between a sweeper's check and its unlink, makes that writer's rename find its temporary
//! gone; [`write_bytes`] then writes it again.

use serde::{de::DeserializeOwned, Serialize};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// A state file that cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file-system operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, `remove`, `list`).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the JSON document it should be.
    #[error("parse {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

impl StateError {
    fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Self + 'a {
        move |source| Self::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the disk (or the quota) is full: a caller that cannot record a release says
    /// "try again later" rather than forgetting it.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
    }
}

/// Reads `path` as JSON; `None` when it does not exist. A missing file's temporaries whose
/// writers are gone are removed (module comment): the writer that was creating it was killed.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StateError::Parse {
                path: path.to_owned(),
                source,
            }),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // Best effort: a reader must not fail for a leftover; the next write or GC takes it.
            let _ = remove_dead_temporaries(path);
            Ok(None)
        }
        Err(source) => Err(StateError::io("read", path)(source)),
    }
}

/// Writes `value` as JSON to `path` through a temporary file and a rename (creating the
/// directory). The caller holds the lock of `path`: temporaries of `path` left by killed
/// writers are removed first.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StateError> {
    let text = serde_json::to_vec_pretty(value)
        .map_err(|e| StateError::io("write", path)(std::io::Error::other(e)))?;
    write_bytes(path, &text)
}

/// How often [`write_bytes`] writes again when its temporary vanished before the rename.
const WRITE_ATTEMPTS: usize = 3;

/// [`write_json`] for bytes already encoded.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(staging(dir)).map_err(StateError::io("write", path))?;
    }
    remove_temporaries(path)?;
    let tmp = temporary(path, std::process::id());
    let mut attempt = 1;
    loop {
        std::fs::write(&tmp, bytes).map_err(StateError::io("write", path))?;
        before_rename(path, &tmp)?;
        match std::fs::rename(&tmp, path) {
            Ok(()) => return Ok(()),
            // Only an unlocked sweep racing with pid reuse removes a live writer's temporary
            // (module comment): write it again.
            Err(e) if e.kind() == ErrorKind::NotFound && attempt < WRITE_ATTEMPTS => attempt += 1,
            Err(source) => {
                // Best effort: a temporary that cannot be removed now goes with the next write,
                // the next read that finds the file missing, or GC.
                let _ = std::fs::remove_file(&tmp);
                return Err(StateError::io("write", path)(source));
            }
        }
    }
}

/// The failure points between a write and its rename: `state-before-rename:<dir>/<file>` (the
/// file and its directory's name, e.g. `attachments/G00000000A001H.json`) and the same with
/// the directory's parent (`bpf/attachments/G00000000A001H.json`, where two directories share
/// a name). `:kill` leaves the temporary exactly as a writer killed there would (debug builds
/// only). Every atomic writer of node state passes them; an armed one removes `tmp` and fails
/// the write.
pub fn before_rename(path: &Path, tmp: &Path) -> Result<(), StateError> {
    #[cfg(debug_assertions)]
    {
        let components: Vec<String> = path
            .components()
            .rev()
            .take(3)
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        for depth in [2, 3].into_iter().filter(|d| *d <= components.len()) {
            let mut names: Vec<&str> = components[..depth].iter().map(String::as_str).collect();
            names.reverse();
            let point = format!("state-before-rename:{}", names.join("/"));
            if let Err(injected) = crate::failpoint::hit(&point) {
                let _ = std::fs::remove_file(tmp);
                return Err(StateError::io("write", path)(std::io::Error::other(
                    injected,
                )));
            }
        }
    }
    let _ = (path, tmp);
    Ok(())
}

/// The directory of the temporaries of `dir`'s files.
pub fn staging(dir: &Path) -> PathBuf {
    dir.join(STAGING)
}

/// The name of [`staging`].
pub const STAGING: &str = ".staging";

/// The temporary a writer with `pid` uses for `path`: `.staging/<stem>.tmp.<pid>` beside it.
fn temporary(path: &Path, pid: u32) -> PathBuf {
    let name = path.with_extension(format!("tmp.{pid}"));
    match (path.parent(), name.file_name()) {
        (Some(dir), Some(name)) => staging(dir).join(name),
        _ => name,
    }
}

/// The pid of a temporary's writer, when `name` is a temporary of the file with `stem` (any
/// file when `stem` is `None`).
fn temporary_pid(name: &str, stem: Option<&str>) -> Option<u32> {
    let (file_stem, pid) = name.rsplit_once(".tmp.")?;
    let pid = pid.parse().ok()?;
    match stem {
        Some(stem) if stem != file_stem => None,
        _ => Some(pid),
    }
}

/// Removes every temporary of `path` (the caller holds its lock, so none is a live writer's).
pub fn remove_temporaries(path: &Path) -> Result<usize, StateError> {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Ok(0);
    };
    let stem = stem.to_string_lossy();
    remove_matching(&staging(dir), |name| {
        temporary_pid(name, Some(&stem)).is_some()
    })
}

/// [`remove_temporaries`], and those a release before the staging directory left beside
/// `path`: for GC, which met them listing the directory (a listing every other caller avoids).
pub fn remove_all_temporaries(path: &Path) -> Result<usize, StateError> {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Ok(0);
    };
    let stem = stem.to_string_lossy();
    let beside = remove_matching(dir, |name| temporary_pid(name, Some(&stem)).is_some())?;
    Ok(remove_temporaries(path)? + beside)
}

/// Removes the temporaries of `path` whose writer is gone ([`writer_gone`]), whether or not
/// `path` exists; no lock needed. For a shared record that the DEL of one of its writers reads
/// but does not rewrite. Returns how many went.
pub fn remove_dead_temporaries(path: &Path) -> Result<usize, StateError> {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Ok(0);
    };
    remove_dead_temporaries_named(&staging(dir), &stem.to_string_lossy())
}

/// Removes the temporaries `<name>.tmp.<pid>` in `dir` whose writer is gone: for writers that
/// name their temporaries after the whole file name, in a directory of their own.
pub fn remove_dead_temporaries_named(dir: &Path, name: &str) -> Result<usize, StateError> {
    remove_matching(dir, |entry| {
        temporary_pid(entry, Some(name)).is_some_and(writer_gone)
    })
}

/// Removes the temporaries in `dir` whose writer is gone (GC: it holds no file's lock, so a
/// live writer's temporary stays). Returns how many went.
pub fn sweep_temporaries(dir: &Path) -> Result<usize, StateError> {
    let dead = |name: &str| temporary_pid(name, None).is_some_and(writer_gone);
    // Beside the files too: where a release before the staging directory left them.
    Ok(remove_matching(&staging(dir), dead)? + remove_matching(dir, dead)?)
}

/// [`sweep_temporaries`] of the staging directory alone: the writes in flight in `dir`, not its
/// files (for a caller on an operation's path, which must not list a directory of the node's
/// every record; GC's sweep also takes those earlier releases left beside the files).
pub fn sweep_staged(dir: &Path) -> Result<usize, StateError> {
    remove_matching(&staging(dir), |name| {
        temporary_pid(name, None).is_some_and(writer_gone)
    })
}

/// Whether the writer with `pid` can no longer touch its temporary: no process has the pid, or
/// only a zombie does (a SIGKILLed writer its parent has not reaped yet). Our own pid counts as
/// live: a thread of this process may be writing that file. A reused pid counts as live too;
/// the module comment says why that is harmless.
pub fn writer_gone(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last `)` (a comm may contain one).
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| matches!(state, "Z" | "X")),
        Err(e) => e.kind() == ErrorKind::NotFound,
    }
}

fn remove_matching(dir: &Path, stale: impl Fn(&str) -> bool) -> Result<usize, StateError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(StateError::io("list", dir)(source)),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        LISTED.with(|n| n.set(n.get() + 1));
        if stale(&entry.file_name().to_string_lossy()) {
            unlink(&entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether a file can be created in `dir` (created when missing): STATUS of every plugin that
/// records state there.
pub fn probe_writable(dir: &Path) -> Result<(), StateError> {
    let probe = dir.join(format!(".status-probe.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(StateError::io("write", dir))
}

/// Removes `path` and the temporaries of it that killed writers left (the caller holds its
/// lock, as for a write): a state file that is never written again, such as the record of an
/// attachment whose ADD was killed, leaves nothing behind. A missing file is success.
pub fn remove(path: &Path) -> Result<(), StateError> {
    remove_temporaries(path)?;
    unlink(path)
}

/// Removes `dir` when it holds nothing but an empty staging directory (a missing one is
/// success); a directory still holding a file or a temporary stays. For a holder of the lock
/// that owns every file of `dir`.
pub fn remove_dir_if_empty(dir: &Path) -> Result<(), StateError> {
    if remove_empty(&staging(dir))? {
        remove_empty(dir)?;
    }
    Ok(())
}

/// Removes `dir`'s staging directory when it is empty: for a writer into a directory another
/// program owns (the Go allocator's pool directories), which must find nothing of ours there.
pub fn remove_staging_if_empty(dir: &Path) -> Result<(), StateError> {
    remove_empty(&staging(dir)).map(|_| ())
}

/// Removes the directory `dir` when it is empty; whether it is gone (missing counts as gone).
fn remove_empty(dir: &Path) -> Result<bool, StateError> {
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(true),
        Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => Ok(false),
        Err(e) => Err(StateError::io("remove", dir)(e)),
    }
}

/// Removes one file; a missing file is success.
fn unlink(path: &Path) -> Result<(), StateError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(StateError::io("remove", path)(e)),
        _ => Ok(()),
    }
}

thread_local! {
    static LISTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many directory entries this thread's listings of state files ([`json_files`], and the
/// searches for temporaries: staging directories, GC's sweeps) have met so far: a listing
/// costs every name of its directory, whatever its prefix keeps, so this is
/// what cost guards compare across node layouts (a listing per VPC of a directory that holds
/// the whole node's records grows with VPCs times attachments). Every operation's closing log
/// line carries it as `filesListed`.
pub fn listed() -> u64 {
    LISTED.with(std::cell::Cell::get)
}

/// The `<prefix>*.json` files of `dir` (none when the directory does not exist). The listing
/// also removes the temporaries of `<prefix>*` files whose writer is gone (module comment): a
/// scan that finds no record of an attachment is a reader of the record that was never renamed
/// into place.
pub fn json_files(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, StateError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StateError::io("list", dir)(source)),
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        LISTED.with(|n| n.set(n.get() + 1));
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(prefix) {
            continue;
        }
        if name.ends_with(".json") {
            files.push(entry.path());
        } else if temporary_pid(&name, None).is_some_and(writer_gone) {
            // Best effort, as in `read_json`.
            let _ = unlink(&entry.path());
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No process has this pid (above the kernel's pid_max limit).
    const DEAD: u32 = 4_294_967_295;

    fn names(dir: &Path) -> Vec<String> {
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        left
    }

    /// `name` created in `dir`'s staging directory (where a writer's temporary is).
    fn stage(dir: &Path, name: &str) {
        std::fs::create_dir_all(staging(dir)).unwrap();
        std::fs::write(staging(dir).join(name), b"{").unwrap();
    }

    /// A DEL after an ADD killed while it created the record finds no record: looking for it
    /// removes what the killed writer left, and never a live writer's temporary.
    #[test]
    fn reading_a_missing_file_removes_what_its_dead_writers_left() {
        let dir = tempfile::tempdir().unwrap();
        stage(dir.path(), &format!("G1H.tmp.{DEAD}"));
        stage(dir.path(), "G1H.tmp.1"); // pid 1 is alive: a writer of this file right now
        stage(dir.path(), &format!("G1H.tmp.{}", std::process::id()));
        stage(dir.path(), &format!("G2H.tmp.{DEAD}"));
        let missing = read_json::<serde_json::Value>(&dir.path().join("G1H.json")).unwrap();
        assert!(missing.is_none());
        let ours = format!("G1H.tmp.{}", std::process::id());
        let mut expected = vec!["G1H.tmp.1".to_owned(), ours, format!("G2H.tmp.{DEAD}")];
        expected.sort();
        assert_eq!(
            names(&staging(dir.path())),
            expected,
            "another file's and live ones stay"
        );
    }

    /// Temporaries a release before the staging directory left beside the files go with a
    /// listing of the directory.
    #[test]
    fn a_listing_removes_the_dead_temporaries_of_the_files_it_lists() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |name: &str| std::fs::write(dir.path().join(name), b"{").unwrap();
        touch("vpc-1.json");
        touch(&format!("vpc-2.tmp.{DEAD}"));
        touch("vpc-3.tmp.1");
        touch(&format!("backend.tmp.{DEAD}"));
        let listed = json_files(dir.path(), "vpc-").unwrap();
        assert_eq!(listed, vec![dir.path().join("vpc-1.json")]);
        assert_eq!(
            names(dir.path()),
            [
                format!("backend.tmp.{DEAD}"),
                "vpc-1.json".into(),
                "vpc-3.tmp.1".into()
            ],
            "other prefixes and live writers' stay"
        );
        std::fs::remove_file(dir.path().join("vpc-1.json")).unwrap();
        stage(dir.path(), &format!("vpc-4.tmp.{DEAD}"));
        assert!(remove_dead_temporaries(&dir.path().join("vpc-4.json")).unwrap() == 1);
        stage(dir.path(), "vpc-3.tmp.1");
        assert_eq!(
            remove_dead_temporaries_named(&staging(dir.path()), "vpc-3").unwrap(),
            0,
            "pid 1 lives"
        );
    }

    /// Finding a file's temporaries lists the writes in flight, not the directory's files: a
    /// directory of many records made every write list them all.
    #[test]
    fn a_write_and_a_read_of_a_missing_file_list_only_the_staging_directory() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..100 {
            std::fs::write(dir.path().join(format!("G{i}H.json")), b"{}").unwrap();
        }
        let before = listed();
        write_json(&dir.path().join("G1000H.json"), &serde_json::json!({})).unwrap();
        remove(&dir.path().join("G1000H.json")).unwrap();
        assert!(
            read_json::<serde_json::Value>(&dir.path().join("G1001H.json"))
                .unwrap()
                .is_none()
        );
        assert_eq!(listed() - before, 0, "no name of the directory met");
        assert_eq!(names(&staging(dir.path())), Vec::<String>::new());
    }

    /// A SIGKILLed writer stays a zombie until its parent reaps it: it writes nothing more.
    #[test]
    fn a_killed_writer_not_yet_reaped_is_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!writer_gone(pid), "a running process is a live writer");
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !writer_gone(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(writer_gone(pid), "a zombie is a dead writer");
        child.wait().unwrap();
        assert!(writer_gone(pid));
        assert!(!writer_gone(std::process::id()), "our own pid is live");
    }

    #[test]
    fn only_temporaries_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |name: &str| std::fs::write(dir.path().join(name), b"{}").unwrap();
        // No process has this pid (above the kernel's pid_max limit). Beside the files (where
        // earlier releases wrote them) and staged.
        touch("vpc-1.tmp.4294967295");
        touch("G1H.json.tmp.4294967295");
        stage(dir.path(), "vpc-3.tmp.4294967295");
        stage(dir.path(), &format!("vpc-4.tmp.{}", std::process::id()));
        touch(&format!("vpc-2.tmp.{}", std::process::id()));
        touch("vpc-1.json");
        touch("notes.tmp.txt");
        assert_eq!(sweep_temporaries(dir.path()).unwrap(), 3);
        assert_eq!(
            names(&staging(dir.path())),
            [format!("vpc-4.tmp.{}", std::process::id())]
        );
        std::fs::remove_dir_all(staging(dir.path())).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "notes.tmp.txt".to_owned(),
                "vpc-1.json".to_owned(),
                format!("vpc-2.tmp.{}", std::process::id()),
            ]
        );
        assert_eq!(sweep_temporaries(&dir.path().join("absent")).unwrap(), 0);
    }

    #[test]
    fn a_write_replaces_the_file_and_removes_what_killed_writers_of_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/G1H.json");
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        // A killed writer of this file (pid 1 is alive: liveness does not matter under the
        // lock), and one of another file, which this write leaves alone.
        let sub = dir.path().join("sub");
        stage(&sub, "G1H.tmp.1");
        stage(&sub, "G2H.tmp.1");
        write_json(&path, &serde_json::json!({"a": 2})).unwrap();
        assert_eq!(
            read_json::<serde_json::Value>(&path).unwrap(),
            Some(serde_json::json!({"a": 2}))
        );
        assert_eq!(names(&staging(&sub)), ["G2H.tmp.1"]);
        assert_eq!(names(&sub), [".staging", "G1H.json"]);
        assert!(
            read_json::<serde_json::Value>(&dir.path().join("absent.json"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn removing_a_file_removes_what_killed_writers_of_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("G1H.json");
        // A record whose writer was killed before its rename: the file itself never appeared.
        stage(dir.path(), "G1H.tmp.77");
        stage(dir.path(), "G2H.tmp.77");
        remove(&path).unwrap();
        assert_eq!(
            names(&staging(dir.path())),
            ["G2H.tmp.77"],
            "another file's stays"
        );
    }

    #[test]
    fn a_directory_goes_with_its_empty_staging_directory_and_stays_with_a_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let vpc = dir.path().join("vpc-1");
        write_json(&vpc.join("G1H.json"), &serde_json::json!({})).unwrap();
        remove_dir_if_empty(&vpc).unwrap();
        assert!(vpc.exists(), "a file is left");
        remove(&vpc.join("G1H.json")).unwrap();
        stage(&vpc, "G2H.tmp.1");
        remove_dir_if_empty(&vpc).unwrap();
        assert!(vpc.exists(), "a temporary is left");
        remove(&vpc.join("G2H.json")).unwrap();
        remove_dir_if_empty(&vpc).unwrap();
        assert!(!vpc.exists());
        remove_dir_if_empty(&vpc).unwrap();
    }
}
