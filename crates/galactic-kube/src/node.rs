//! Node-name auto-detection: the Node whose InternalIP is one of this machine's addresses.

use super::client::KubeClient;
use super::error::KubeError;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::net::IpAddr;

/// Lists Nodes (at most 1000, as upstream) and returns the first whose `InternalIP` equals one
/// of `local` (compared as addresses, so `::1` and `0:0::1` match). Needs RBAC `nodes: list`.
pub fn detect_node_name(client: &KubeClient, local: &[IpAddr]) -> Result<String, KubeError> {
    let nodes = client.call("list Nodes for node-name auto-detection", |c| {
        let api: Api<Node> = Api::all(c);
        async move { api.list(&ListParams::default().limit(1000)).await }
    })?;
    match_node(&nodes.items, local).ok_or_else(|| {
        KubeError::NodeNotDetected(format!(
            "no local interface address matched any node InternalIP ({} nodes, {} local addresses); \
             set node_name in the node config or NODE_NAME",
            nodes.items.len(),
            local.len()
        ))
    })
}

/// Checks that Node `name` has an `InternalIP` among `local` (this machine's addresses), as the
/// upstream installer does before it writes anything: a DaemonSet whose node name is wrong would
/// otherwise publish this node's pods under another node. Needs RBAC `nodes: get`.
pub fn verify_node_identity(
    client: &KubeClient,
    name: &str,
    local: &[IpAddr],
) -> Result<(), KubeError> {
    let node = client.call("get the Node for the node-identity check", |c| {
        let api: Api<Node> = Api::all(c);
        let name = name.to_string();
        async move { api.get(&name).await }
    })?;
    if match_node(std::slice::from_ref(&node), local).is_some() {
        return Ok(());
    }
    Err(KubeError::NodeIdentity {
        node: name.to_string(),
        internal: internal_ips(&node),
        local: local.len(),
    })
}

/// A Node's `InternalIP` addresses, as written.
fn internal_ips(node: &Node) -> Vec<String> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    addresses
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
        .collect()
}

/// The name of the first node with an `InternalIP` in `local`.
pub fn match_node(nodes: &[Node], local: &[IpAddr]) -> Option<String> {
    nodes.iter().find_map(|node| {
        let addresses = node.status.as_ref()?.addresses.as_ref()?;
        addresses
            .iter()
            .filter(|a| a.type_ == "InternalIP")
            .filter_map(|a| a.address.parse::<IpAddr>().ok())
            .any(|ip| local.contains(&ip))
            .then(|| node.metadata.name.clone())
            .flatten()
    })
}

/// Every address configured on this machine's interfaces (both families), from `getifaddrs`.
pub fn local_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we own and free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a non-null node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cursor };
        if let Some(ip) = sockaddr_ip(entry.ifa_addr) {
            out.push(ip);
        }
        cursor = entry.ifa_next;
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn sockaddr_ip(addr: *const libc::sockaddr) -> Option<IpAddr> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: a non-null ifa_addr points at a sockaddr whose family says which struct it is.
    match i32::from(unsafe { (*addr).sa_family }) {
        libc::AF_INET => {
            // SAFETY: AF_INET means the storage is a sockaddr_in.
            let sin = unsafe { &*(addr as *const libc::sockaddr_in) };
            Some(IpAddr::from(
                u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: AF_INET6 means the storage is a sockaddr_in6.
            let sin6 = unsafe { &*(addr as *const libc::sockaddr_in6) };
            Some(IpAddr::from(sin6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};

    fn node(name: &str, addrs: &[(&str, &str)]) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    addrs
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: (*t).into(),
                            address: (*a).into(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn matches_internal_ips_only() {
        let nodes = [
            node("a", &[("ExternalIP", "127.0.0.1")]),
            node(
                "b",
                &[("InternalIP", "10.0.0.9"), ("InternalIP", "fd00::0:1")],
            ),
        ];
        assert_eq!(
            match_node(&nodes, &["fd00::1".parse().unwrap()]),
            Some("b".into())
        );
        assert_eq!(match_node(&nodes, &["127.0.0.1".parse().unwrap()]), None);
    }

    #[test]
    fn local_addresses_include_loopback() {
        let local = local_addresses().unwrap();
        assert!(local.contains(&"127.0.0.1".parse().unwrap()), "{local:?}");
    }
}
