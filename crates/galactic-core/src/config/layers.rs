//! The layers a node-level key is looked up in: the stanza (only where the node config lets
//! it), the environment, the node config file.

use super::{ConfigError, Source};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::path::PathBuf;

/// The three layers a key is looked up in.
pub(super) struct Layers<'a, L: Fn(&str) -> Option<String>> {
    pub(super) stanza: &'a Map<String, Value>,
    pub(super) env: &'a L,
    pub(super) file: Option<(PathBuf, Value)>,
    /// DEL: a value that does not parse falls back to its default (noted in `dropped`) instead
    /// of failing the whole resolution, so one bad key never sends DEL to another state dir.
    pub(super) lenient: bool,
    pub(super) dropped: RefCell<Vec<String>>,
}

impl<L: Fn(&str) -> Option<String>> Layers<'_, L> {
    pub(super) fn get(&self, key: &str) -> Option<(String, Source)> {
        let env_name = format!("GALACTIC_CNI_{}", key.to_ascii_uppercase());
        scalar(self.stanza.get(key))
            .map(|v| (v, Source::Stanza))
            .or_else(|| non_empty((self.env)(&env_name)).map(|v| (v, Source::Env(env_name))))
            .or_else(|| {
                let (path, file) = self.file.as_ref()?;
                scalar(file.get(key)).map(|v| (v, Source::File(path.clone())))
            })
    }

    /// `err`, or in lenient mode `default` with the error noted.
    pub(super) fn refuse<T>(&self, err: ConfigError, default: T) -> Result<T, ConfigError> {
        if !self.lenient {
            return Err(err);
        }
        self.dropped
            .borrow_mut()
            .push(format!("{err}; using the default"));
        Ok(default)
    }

    pub(super) fn string(&self, key: &str, default: &str) -> String {
        self.get(key).map_or_else(|| default.to_owned(), |(v, _)| v)
    }

    pub(super) fn parsed<T>(
        &self,
        key: &'static str,
        default: T,
        why: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some((value, origin)) => match parse(&value) {
                Some(parsed) => Ok(parsed),
                None => self.refuse(
                    ConfigError::Value {
                        key,
                        value,
                        origin,
                        why,
                    },
                    default,
                ),
            },
        }
    }

    /// A comma-separated list: entries trimmed, blank ones skipped, each parsed by `parse`;
    /// the first entry that does not parse is an error naming it. Absent → empty.
    pub(super) fn list<T>(
        &self,
        key: &'static str,
        why: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, ConfigError> {
        let Some((value, origin)) = self.get(key) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match parse(entry) {
                Some(item) => out.push(item),
                None => {
                    let err = ConfigError::Entry {
                        key,
                        entry: entry.to_owned(),
                        value,
                        origin,
                        why,
                    };
                    return self.refuse(err, Vec::new());
                }
            }
        }
        Ok(out)
    }
}

pub(super) fn scalar(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => non_empty(Some(s.clone())),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(super) fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}
