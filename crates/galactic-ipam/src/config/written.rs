//! The `ipam` block as written: serde reads every key into the type the key needs; the rules in
//! `config.rs` then read the keys their mode uses, in their own order.
//!
//! A value of the wrong JSON type does not fail the block here. It is kept as [`Typed::Wrong`]
//! and refused ([`ConfigError::WrongType`], naming the key) when a rule reads the key. So a mode
//! ignores the keys it does not use (`static_ip` wins over a malformed `ipv6_gateway`, as it wins
//! over a well-formed one), and a block breaking several rules is refused for the first rule in
//! the rules' order, not for whichever key serde happened to meet first.

use super::ConfigError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::path::PathBuf;

/// The keys of the block; unknown keys are ignored (as upstream's Go decoder does).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Written {
    pub addresses: Key<Vec<Typed<Entry>>>,
    pub static_ip: Key<String>,
    pub ipv6_subnet: Key<String>,
    pub subnet_len: Key<u64>,
    pub ipv6_gateway: Key<String>,
    pub ipv4_subnet: Key<String>,
    pub ipv4_gateway: Key<String>,
    pub address_families: Key<Vec<Typed<FamilyName>>>,
}

/// One `addresses` entry as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Entry {
    pub address: Key<String>,
    pub gateway: Key<String>,
}

/// One `address_families` entry (its value is judged by the narrowing rule, not here).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct FamilyName(pub String);

/// A key's value; absent and `null` are `None`.
pub(super) type Key<T> = Option<Typed<T>>;

/// A value as written: of the type its key needs, or not.
#[derive(Debug)]
pub(super) enum Typed<T> {
    /// The value, typed.
    Fits(T),
    /// Another JSON type.
    Wrong,
}

/// What a key's value must be.
pub(super) trait Expected: DeserializeOwned {
    /// The "must be …" part of the message refusing another type.
    const EXPECTED: &'static str;

    /// Whether the value means "not set": upstream's Go zero value (`""`, `[]`).
    fn is_unset(&self) -> bool {
        false
    }

    /// The typed value, if `value` has the type.
    fn typed(value: Value) -> Option<Self> {
        Self::deserialize(value).ok()
    }
}

impl<'de, T: Expected> Deserialize<'de> for Typed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through a `Value`: a refused value is then whole, never a half-read input.
        let value = Value::deserialize(d)?;
        Ok(T::typed(value).map_or(Self::Wrong, Self::Fits))
    }
}

impl<T: Expected> Typed<T> {
    /// The value, or the error naming `field`.
    pub(super) fn get(&self, field: &'static str) -> Result<&T, ConfigError> {
        match self {
            Self::Fits(value) => Ok(value),
            Self::Wrong => Err(ConfigError::WrongType {
                field,
                expected: T::EXPECTED,
            }),
        }
    }
}

/// The value of key `field` when it is set (absent, `null` and the zero value are not), or the
/// error when it has the wrong type.
pub(super) fn read<'a, T: Expected>(
    key: &'a Key<T>,
    field: &'static str,
) -> Result<Option<&'a T>, ConfigError> {
    match key {
        None => Ok(None),
        Some(typed) => Ok(Some(typed.get(field)?).filter(|v| !v.is_unset())),
    }
}

impl Expected for String {
    const EXPECTED: &'static str = "a string";
    fn is_unset(&self) -> bool {
        self.is_empty()
    }
}

impl Expected for PathBuf {
    const EXPECTED: &'static str = "a string";
    fn is_unset(&self) -> bool {
        self.as_os_str().is_empty()
    }
}

impl Expected for u64 {
    const EXPECTED: &'static str = "a non-negative integer";
}

impl<T: Expected> Expected for Vec<Typed<T>> {
    const EXPECTED: &'static str = "a list";
    fn is_unset(&self) -> bool {
        self.is_empty()
    }
}

impl Expected for Entry {
    const EXPECTED: &'static str = "a list of {\"address\", \"gateway\"} objects";

    /// Objects only: serde would also read a struct from a JSON list (`[["fd00::1/64"]]`).
    fn typed(value: Value) -> Option<Self> {
        match value {
            Value::Object(map) => Self::deserialize(map).ok(),
            _ => None,
        }
    }
}

impl Expected for FamilyName {
    const EXPECTED: &'static str = "a list of strings";
}
