//! The `CNI_*` environment: the command, and the values each command requires.

use super::error::CniError;
use std::fmt;
use std::path::PathBuf;

/// A CNI verb (`CNI_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Attach.
    Add,
    /// Detach; must succeed when things are already gone.
    Del,
    /// Verify an attachment against `prevResult`.
    Check,
    /// Report supported versions.
    Version,
    /// Readiness probe (CNI 1.1).
    Status,
    /// Garbage collection against the runtime's valid attachments (CNI 1.1).
    Gc,
}

impl Command {
    /// Parses `CNI_COMMAND`.
    pub fn parse(raw: &str) -> Result<Self, CniError> {
        Ok(match raw {
            "ADD" => Self::Add,
            "DEL" => Self::Del,
            "CHECK" => Self::Check,
            "VERSION" => Self::Version,
            "STATUS" => Self::Status,
            "GC" => Self::Gc,
            other => {
                return Err(CniError::invalid_env(format!(
                    "CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, VERSION, STATUS, GC"
                )))
            }
        })
    }

    /// The verb as the runtime spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Del => "DEL",
            Self::Check => "CHECK",
            Self::Version => "VERSION",
            Self::Status => "STATUS",
            Self::Gc => "GC",
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest accepted container id. Runtimes use 64 hex characters; the cap keeps ids usable as a
/// single file-name component (255 bytes) everywhere they are stored.
pub const MAX_CONTAINER_ID_LEN: usize = 255;

/// A validated `CNI_CONTAINERID`: `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$` (libcni's rule; uppercase is legal).
/// It can never contain `/`, never start with `.`, so it is safe as one path component.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId(String);

impl ContainerId {
    /// Validates `raw`; errors are code 4 naming `CNI_CONTAINERID`.
    pub fn parse(raw: &str) -> Result<Self, CniError> {
        validate_id(raw, MAX_CONTAINER_ID_LEN)
            .map(|()| Self(raw.to_owned()))
            .map_err(|why| {
                CniError::invalid_env(format!("CNI_CONTAINERID {raw:?} is invalid: {why}"))
            })
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks the libcni id rule shared by container ids and network names.
pub(crate) fn validate_id(raw: &str, max_len: usize) -> Result<(), String> {
    let mut chars = raw.chars();
    match chars.next() {
        None => return Err("it is empty".into()),
        Some(c) if !c.is_ascii_alphanumeric() => {
            return Err("it must start with a letter or digit".into())
        }
        Some(_) => {}
    }
    if let Some(c) = chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))) {
        return Err(format!(
            "character {c:?} is not allowed (letters, digits, '_', '.', '-' only)"
        ));
    }
    if raw.len() > max_len {
        return Err(format!(
            "it is {} bytes long, the limit is {max_len}",
            raw.len()
        ));
    }
    Ok(())
}

/// Linux `IFNAMSIZ - 1`.
pub const MAX_IFNAME_LEN: usize = 15;

/// A validated `CNI_IFNAME`: 1–15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfName(String);

impl IfName {
    /// Validates `raw`; errors are code 4 naming `CNI_IFNAME`.
    pub fn parse(raw: &str) -> Result<Self, CniError> {
        let why = if raw.is_empty() {
            Some("it is empty".to_owned())
        } else if raw.len() > MAX_IFNAME_LEN {
            Some(format!(
                "it is {} bytes long, Linux allows {MAX_IFNAME_LEN}",
                raw.len()
            ))
        } else if raw == "." || raw == ".." {
            Some("'.' and '..' are not interface names".to_owned())
        } else {
            raw.chars()
                .find(|c| *c == '/' || *c == ':' || c.is_whitespace())
                .map(|c| format!("character {c:?} is not allowed in an interface name"))
        };
        match why {
            None => Ok(Self(raw.to_owned())),
            Some(why) => Err(CniError::invalid_env(format!(
                "CNI_IFNAME {raw:?} is invalid: {why}"
            ))),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `CNI_ARGS`: `KEY=VALUE;KEY=VALUE` (kubelet sends `IgnoreUnknown=1;K8S_POD_NAMESPACE=…;…`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs(Vec<(String, String)>);

impl CniArgs {
    /// Parses `raw`. Empty entries are skipped; an entry without `=` is code 4.
    pub fn parse(raw: &str) -> Result<Self, CniError> {
        let mut pairs = Vec::new();
        for entry in raw.split(';').filter(|e| !e.is_empty()) {
            let (key, value) = entry.split_once('=').ok_or_else(|| {
                CniError::invalid_env(format!("CNI_ARGS entry {entry:?} is not KEY=VALUE"))
            })?;
            pairs.push((key.to_owned(), value.to_owned()));
        }
        Ok(Self(pairs))
    }

    /// Parses `raw` for DEL, which never fails on its input: an entry without `=` is skipped
    /// (the others still tell DEL what to clean up).
    pub fn parse_lenient(raw: &str) -> Self {
        Self(
            raw.split(';')
                .filter_map(|entry| entry.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The environment of one invocation, validated for its command.
#[derive(Debug, Clone)]
pub struct CniEnv {
    /// `CNI_COMMAND`.
    pub command: Command,
    /// `CNI_CONTAINERID` (ADD/DEL/CHECK; optional for the others).
    pub container_id: Option<ContainerId>,
    /// `CNI_NETNS` (required for ADD/CHECK; DEL tolerates its absence).
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME` (ADD/DEL/CHECK).
    pub ifname: Option<IfName>,
    /// `CNI_ARGS`.
    pub args: CniArgs,
    /// `CNI_PATH`, split on `:`.
    pub path: Vec<PathBuf>,
}

impl CniEnv {
    /// Reads and validates the environment for `command` through `lookup` (the process
    /// environment in production). Empty values count as unset (libcni exports empty variables).
    pub fn from_lookup(
        command: Command,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CniError> {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let needs = |name: &str| required(command, name);
        let missing: Vec<&str> = ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]
            .into_iter()
            .filter(|name| needs(name) && get(name).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(CniError::invalid_env(format!(
                "{command} requires {} to be set",
                missing.join(", ")
            )));
        }
        let container_id = get("CNI_CONTAINERID")
            .map(|v| ContainerId::parse(&v))
            .transpose()?;
        let ifname = get("CNI_IFNAME").map(|v| IfName::parse(&v)).transpose()?;
        let args = match get("CNI_ARGS") {
            None => CniArgs::default(),
            Some(raw) if command == Command::Del => CniArgs::parse_lenient(&raw),
            Some(raw) => CniArgs::parse(&raw)?,
        };
        let path = get("CNI_PATH")
            .map(|v| {
                v.split(':')
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            command,
            container_id,
            netns: get("CNI_NETNS").map(PathBuf::from),
            ifname,
            args,
            path,
        })
    }

    /// The container id of a per-attachment command (present by construction).
    pub fn container_id(&self) -> Result<&ContainerId, CniError> {
        self.container_id.as_ref().ok_or_else(|| {
            CniError::invalid_env(format!("{} requires CNI_CONTAINERID", self.command))
        })
    }

    /// `CNI_NETNS` of ADD or CHECK (present by construction).
    pub fn netns_path(&self) -> Result<&PathBuf, CniError> {
        self.netns
            .as_ref()
            .ok_or_else(|| CniError::invalid_env(format!("{} requires CNI_NETNS", self.command)))
    }

    /// The interface name of a per-attachment command (present by construction).
    pub fn ifname(&self) -> Result<&IfName, CniError> {
        self.ifname
            .as_ref()
            .ok_or_else(|| CniError::invalid_env(format!("{} requires CNI_IFNAME", self.command)))
    }
}

/// Which variables each verb requires (SPEC §Parameters, skel's table; DEL never needs NETNS).
fn required(command: Command, name: &str) -> bool {
    use Command::*;
    match name {
        "CNI_CONTAINERID" | "CNI_IFNAME" => matches!(command, Add | Del | Check),
        "CNI_NETNS" => matches!(command, Add | Check),
        "CNI_PATH" => matches!(command, Add | Del | Check | Gc),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Code;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const FULL: &[(&str, &str)] = &[
        ("CNI_CONTAINERID", "abc123"),
        ("CNI_NETNS", "/var/run/netns/x"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
    ];

    #[test]
    fn add_requires_every_attachment_variable_and_names_the_missing_ones() {
        let err = CniEnv::from_lookup(Command::Add, env_of(&FULL[..2])).unwrap_err();
        assert_eq!(err.code, Code::INVALID_ENVIRONMENT);
        assert!(
            err.msg.contains("CNI_IFNAME") && err.msg.contains("CNI_PATH"),
            "{}",
            err.msg
        );
        let env = CniEnv::from_lookup(Command::Add, env_of(FULL)).unwrap();
        assert_eq!(env.path.len(), 2);
    }

    #[test]
    fn del_tolerates_a_missing_netns() {
        let pairs: Vec<_> = FULL
            .iter()
            .copied()
            .filter(|(k, _)| *k != "CNI_NETNS")
            .collect();
        let env = CniEnv::from_lookup(Command::Del, env_of(&pairs)).unwrap();
        assert!(env.netns.is_none());
    }

    #[test]
    fn empty_values_count_as_unset_and_status_needs_nothing() {
        let env = CniEnv::from_lookup(Command::Status, env_of(&[("CNI_CONTAINERID", "")])).unwrap();
        assert!(env.container_id.is_none());
        let err = CniEnv::from_lookup(Command::Gc, env_of(&[("CNI_PATH", "")])).unwrap_err();
        assert!(err.msg.contains("CNI_PATH"));
    }

    #[test]
    fn container_ids_follow_the_libcni_rule() {
        for ok in ["abc", "ABCdef0123", "a.b-c_d", "0"] {
            ContainerId::parse(ok).unwrap();
        }
        for bad in [
            "",
            "../../etc/x",
            ".hidden",
            "-x",
            "a/b",
            "a b",
            "é",
            &"a".repeat(256),
        ] {
            let err = ContainerId::parse(bad).unwrap_err();
            assert_eq!(err.code, Code::INVALID_ENVIRONMENT, "{bad:?}");
            assert!(err.msg.contains("CNI_CONTAINERID"));
        }
    }

    #[test]
    fn ifnames_follow_the_kernel_rule() {
        for ok in ["eth0", "net1", "a", "123456789012345"] {
            IfName::parse(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "1234567890123456"] {
            let err = IfName::parse(bad).unwrap_err();
            assert_eq!(err.code, Code::INVALID_ENVIRONMENT, "{bad:?}");
        }
    }

    #[test]
    fn cni_args_parse_kubelet_style() {
        let args =
            CniArgs::parse("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;;X=a=b").unwrap();
        assert_eq!(args.get("K8S_POD_NAME"), Some("p"));
        assert_eq!(args.get("X"), Some("a=b"));
        assert_eq!(
            CniArgs::parse("novalue").unwrap_err().code,
            Code::INVALID_ENVIRONMENT
        );
        let lenient = CniArgs::parse_lenient("novalue;K8S_POD_NAME=p");
        assert_eq!(lenient.get("K8S_POD_NAME"), Some("p"));
        assert_eq!(lenient.get("novalue"), None);
    }

    #[test]
    fn unknown_command_is_code_4() {
        assert_eq!(
            Command::parse("FROB").unwrap_err().code,
            Code::INVALID_ENVIRONMENT
        );
        assert_eq!(Command::parse("GC").unwrap(), Command::Gc);
    }
}
