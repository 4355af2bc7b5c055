//! JSON-lines logging to the node's log file (never stdout: stdout is the CNI result).
//!
//! One object per line: `time`, `level`, `msg`, `plugin`, the invocation context (`command`,
//! `containerID`, `netns`, `ifName`, `network`, `vpc`, `vpcAttachment`, `nodeName`, each when
//! known) and the call's own fields. One line per operation at info: while an operation runs
//! ([`begin_operation`]), info records are kept and written as the `events` of its closing line
//! ([`finish_operation`], `"<VERB>: done"` or `"failed"`); warnings, errors and debug records are
//! written at once. Every plugin on
//! the node appends to the same file; past `log_max_bytes` the file is renamed to `<file>.1` under
//! an advisory lock so that concurrent processes rotate it once. A log file that cannot be opened
//! never fails the operation: lines then go to stderr, which the runtime keeps.

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Log levels, least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Per-resource milestones.
    Debug,
    /// One line per operation.
    Info,
    /// Recoverable anomalies.
    Warn,
    /// Failures.
    Error,
}

impl Level {
    /// Parses a level name (case-insensitive; `warning` is `warn`).
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(Self::Debug),
            "info" => Some(Self::Info),
            "warn" | "warning" => Some(Self::Warn),
            "error" => Some(Self::Error),
            _ => None,
        }
    }

    /// The name written in each line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "DEBUG",
            Self::Info => "INFO",
            Self::Warn => "WARN",
            Self::Error => "ERROR",
        }
    }
}

struct Sink {
    plugin: &'static str,
    level: Level,
    path: PathBuf,
    max_bytes: u64,
    file: Option<File>,
    context: Map<String, Value>,
    /// The info records of the operation under way (`None` outside one).
    events: Option<Vec<Value>>,
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// Where and how much this process logs: the node config's logging keys (the node config
/// depends on this module for [`Level`], not the other way round).
pub struct Settings<'a> {
    /// The log file (`log_file`).
    pub log_file: &'a Path,
    /// The least level written (`log_level`).
    pub log_level: Level,
    /// Rotation size (`log_max_bytes`).
    pub log_max_bytes: u64,
    /// What resolving the node config found worth a warning, logged first.
    pub warnings: &'a [String],
}

/// Sets up logging for this process. `context` (an object) is added to every line.
pub fn init(plugin: &'static str, node: &Settings<'_>, context: Value) {
    let (file, open_error) = match open_append(node.log_file) {
        Ok(file) => (Some(file), None),
        Err(e) => (None, Some(e)),
    };
    let context = match context {
        Value::Object(map) => map.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    };
    if let Ok(mut sink) = SINK.lock() {
        *sink = Some(Sink {
            plugin,
            level: node.log_level,
            path: node.log_file.to_path_buf(),
            max_bytes: node.log_max_bytes,
            file,
            context,
            events: None,
        });
    }
    if let Some(e) = open_error {
        warn(
            "cannot open the log file; logging to stderr",
            serde_json::json!({"logFile": node.log_file, "err": e.to_string()}),
        );
    }
    for warning in node.warnings {
        warn(warning, Value::Null);
    }
}

/// Logs at debug.
pub fn debug(msg: &str, fields: Value) {
    emit(Level::Debug, msg, fields);
}
/// Logs at info.
pub fn info(msg: &str, fields: Value) {
    emit(Level::Info, msg, fields);
}
/// Logs at warn.
pub fn warn(msg: &str, fields: Value) {
    emit(Level::Warn, msg, fields);
}
/// Logs at error.
pub fn error(msg: &str, fields: Value) {
    emit(Level::Error, msg, fields);
}

/// Starts an operation: its info records become the `events` of the line that closes it.
pub fn begin_operation() {
    if let Ok(mut guard) = SINK.lock() {
        if let Some(sink) = guard.as_mut() {
            sink.events = Some(Vec::new());
        }
    }
}

/// Closes the operation with one line at `level`, carrying the info records logged during it as
/// `events` (each `{"msg", ...fields}`).
pub fn finish_operation(level: Level, msg: &str, fields: Value) {
    let events = SINK
        .lock()
        .ok()
        .and_then(|mut guard| guard.as_mut().and_then(|sink| sink.events.take()))
        .unwrap_or_default();
    let fields = match (fields, events.is_empty()) {
        (fields, true) => fields,
        (Value::Object(mut map), false) => {
            map.insert("events".into(), Value::Array(events));
            Value::Object(map)
        }
        (_, false) => serde_json::json!({ "events": events }),
    };
    emit(level, msg, fields);
}

/// A warning before logging is set up (e.g. the node config itself is unreadable).
pub fn stderr_warn(plugin: &str, msg: &str) {
    let line = serde_json::json!({"time": now(), "level": "WARN", "plugin": plugin, "msg": msg});
    eprintln!("{line}");
}

fn emit(level: Level, msg: &str, fields: Value) {
    let Ok(mut guard) = SINK.lock() else { return };
    let Some(sink) = guard.as_mut() else {
        if level >= Level::Info {
            eprintln!("{}", line(level, msg, "galactic", &Map::new(), fields));
        }
        return;
    };
    if level < sink.level {
        return;
    }
    if let (Level::Info, Some(events)) = (level, sink.events.as_mut()) {
        events.push(event(msg, fields));
        return;
    }
    let text = line(level, msg, sink.plugin, &sink.context, fields);
    match sink.file.as_mut() {
        // One write(2) per line on an O_APPEND file keeps concurrent writers' lines whole.
        Some(file) => {
            if file.write_all(format!("{text}\n").as_bytes()).is_err() {
                eprintln!("{text}");
            }
            rotate_if_needed(sink);
        }
        None => eprintln!("{text}"),
    }
}

/// An info record kept for the closing line: its message and fields.
fn event(msg: &str, fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("msg".into(), msg.into());
    if let Value::Object(fields) = fields {
        obj.extend(fields);
    }
    Value::Object(obj)
}

fn line(
    level: Level,
    msg: &str,
    plugin: &str,
    context: &Map<String, Value>,
    fields: Value,
) -> Value {
    let mut obj = Map::new();
    obj.insert("time".into(), now().into());
    obj.insert("level".into(), level.as_str().into());
    obj.insert("msg".into(), msg.into());
    obj.insert("plugin".into(), plugin.into());
    obj.extend(context.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Value::Object(fields) = fields {
        obj.extend(fields);
    }
    Value::Object(obj)
}

fn now() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path)
}

/// Renames the file to `<file>.1` once it is past the cap. The lock and the inode comparison make
/// sure that, of many processes crossing the cap together, exactly one renames it and nobody
/// renames a file that another process has just started afresh.
fn rotate_if_needed(sink: &mut Sink) {
    let Some(file) = sink.file.as_ref() else {
        return;
    };
    let Ok(ours) = file.metadata() else { return };
    if ours.len() <= sink.max_bytes {
        return;
    }
    let lock_path = with_suffix(&sink.path, ".lock");
    let Ok(lock_file) = open_append(&lock_path) else {
        return;
    };
    // Logging must never stall an operation: if another process holds the lock, it is rotating.
    let Ok(lock) = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) else {
        return;
    };
    if let Ok(current) = std::fs::metadata(&sink.path) {
        if current.ino() == ours.ino()
            && current.dev() == ours.dev()
            && current.len() > sink.max_bytes
        {
            let _ = std::fs::rename(&sink.path, with_suffix(&sink.path, ".1"));
        }
    }
    drop(lock);
    sink.file = open_append(&sink.path).ok();
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut os = path.as_os_str().to_owned();
    os.push(suffix);
    PathBuf::from(os)
}

#[cfg(test)]
mod tests;
