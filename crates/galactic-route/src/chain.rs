//! What ADD and CHECK learn from their place in the chain: the validated stanza, the master's
//! result (`prevResult`, required) and the host interface the terminations go out of.

use crate::conf::RouteConf;
use crate::error::RouteError;
use galactic_core::cni::{CniResult, Request};

/// The validated input of ADD and CHECK.
#[derive(Debug)]
pub struct Target {
    /// The stanza.
    pub conf: RouteConf,
    /// `prevResult`, passed on unchanged by ADD.
    pub prev: CniResult,
    /// The host interface `G{vpc:9}{att:3}H`.
    pub host_ifname: String,
}

impl Target {
    /// Validates the stanza, then requires `prevResult` and checks it against the stanza.
    pub fn from_request(req: &Request) -> Result<Self, RouteError> {
        let conf = RouteConf::parse(&req.conf.raw)?;
        let prev = req.conf.prev_result()?.ok_or(RouteError::NoPrevResult)?;
        let host_ifname = host_interface(&conf, &prev)?;
        Ok(Self {
            conf,
            prev,
            host_ifname,
        })
    }
}

/// The host interface: the stanza's `G{vpc:9}{att:3}H`, which must be among `prevResult`'s host
/// interfaces (those without a sandbox: the veth host end, the tap) when it lists any. A result
/// with no host interface (a master that reports only the guest side) is accepted with the
/// computed name; the kernel lookup then proves it exists.
pub fn host_interface(conf: &RouteConf, prev: &CniResult) -> Result<String, RouteError> {
    let expected = conf.host_ifname();
    let hosts: Vec<&str> = prev
        .interfaces
        .iter()
        .filter(|i| i.sandbox.as_deref().is_none_or(str::is_empty))
        .map(|i| i.name.as_str())
        .collect();
    if hosts.is_empty() || hosts.contains(&expected.as_str()) {
        Ok(expected)
    } else {
        Err(RouteError::HostMismatch {
            found: hosts.join(", "),
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use galactic_core::cni::ErrorCode;
    use serde_json::json;

    fn conf() -> RouteConf {
        RouteConf::parse(&json!({"vpc": "A", "vpcattachment": "1"})).unwrap()
    }

    fn result(interfaces: serde_json::Value) -> CniResult {
        serde_json::from_value(json!({"cniVersion": "1.1.0", "interfaces": interfaces})).unwrap()
    }

    #[test]
    fn the_host_interface_comes_from_the_sandbox_less_entries() {
        let veth = result(
            json!([{"name": "G00000000A001H"}, {"name": "eth0", "sandbox": "/run/netns/p"}]),
        );
        assert_eq!(host_interface(&conf(), &veth).unwrap(), "G00000000A001H");
        let tap = result(json!([{"name": "G00000000A001H", "sandbox": ""}]));
        assert_eq!(host_interface(&conf(), &tap).unwrap(), "G00000000A001H");
        let guest_only = result(json!([{"name": "eth0", "sandbox": "/run/netns/p"}]));
        assert_eq!(
            host_interface(&conf(), &guest_only).unwrap(),
            "G00000000A001H"
        );
    }

    #[test]
    fn another_attachments_result_is_refused_with_code_6() {
        let other = result(json!([{"name": "G00000000A002H"}, {"name": "eth0", "sandbox": "/p"}]));
        let err = host_interface(&conf(), &other).unwrap_err();
        assert_eq!(err.code().0, 6);
        let msg = err.to_string();
        assert!(
            msg.contains("G00000000A002H") && msg.contains("G00000000A001H"),
            "{msg}"
        );
    }
}
