//! Spec versions this project speaks, and the negotiation rules around them.

use super::error::CniError;

/// Every `cniVersion` string the plugins accept, exactly as the runtime must send it.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["1.0.0", "1.1.0"];

/// A supported CNI spec version. 1.0.0 and 1.1.0 share one result schema; 1.1.0 adds the
/// STATUS and GC verbs and optional result fields, which are always kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SpecVersion {
    /// CNI 1.0.0.
    V1_0,
    /// CNI 1.1.0.
    V1_1,
}

impl SpecVersion {
    /// The newest version, used where no config says otherwise (VERSION, early errors).
    pub const LATEST: SpecVersion = SpecVersion::V1_1;

    /// Parses a config's `cniVersion`. An absent value means 0.1.0 (libcni's rule), which is refused.
    pub fn parse(raw: Option<&str>) -> Result<Self, CniError> {
        match raw.unwrap_or("") {
            "1.0.0" => Ok(Self::V1_0),
            "1.1.0" => Ok(Self::V1_1),
            "" => Err(CniError::incompatible_version(format!(
                "the network configuration has no cniVersion (read as 0.1.0); supported versions: {}",
                SUPPORTED_VERSIONS.join(", ")
            ))),
            other => Err(CniError::incompatible_version(format!(
                "cniVersion {other:?} is not supported; supported versions: {}",
                SUPPORTED_VERSIONS.join(", ")
            ))),
        }
    }

    /// The version string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1_0 => "1.0.0",
            Self::V1_1 => "1.1.0",
        }
    }

    /// STATUS and GC exist from 1.1.0 on (libcni sends them only for such configs).
    pub fn has_status_and_gc(self) -> bool {
        self >= Self::V1_1
    }
}

/// The VERSION reply: echoes the caller's version when it is one of ours, else the latest.
pub fn version_reply(requested: Option<&str>) -> serde_json::Value {
    let echoed = requested
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(SpecVersion::LATEST.as_str());
    serde_json::json!({ "cniVersion": echoed, "supportedVersions": SUPPORTED_VERSIONS })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Code;

    #[test]
    fn accepts_exactly_the_supported_versions() {
        assert_eq!(
            SpecVersion::parse(Some("1.0.0")).unwrap(),
            SpecVersion::V1_0
        );
        assert_eq!(
            SpecVersion::parse(Some("1.1.0")).unwrap(),
            SpecVersion::V1_1
        );
        for bad in [
            None,
            Some(""),
            Some("0.4.0"),
            Some("0.3.1"),
            Some("1.0"),
            Some("2.0.0"),
        ] {
            let err = SpecVersion::parse(bad).unwrap_err();
            assert_eq!(err.code, Code::INCOMPATIBLE_VERSION, "{bad:?}");
            assert!(err.msg.contains("1.0.0, 1.1.0"), "{}", err.msg);
        }
    }

    #[test]
    fn status_and_gc_need_1_1() {
        assert!(!SpecVersion::V1_0.has_status_and_gc());
        assert!(SpecVersion::V1_1.has_status_and_gc());
    }

    #[test]
    fn version_reply_echoes_known_versions_only() {
        assert_eq!(version_reply(Some("1.0.0"))["cniVersion"], "1.0.0");
        assert_eq!(version_reply(Some("0.4.0"))["cniVersion"], "1.1.0");
        assert_eq!(
            version_reply(None)["supportedVersions"],
            serde_json::json!(["1.0.0", "1.1.0"])
        );
    }
}
