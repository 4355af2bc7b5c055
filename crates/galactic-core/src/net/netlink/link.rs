//! Links: lookup, veth pairs, VRF devices, up/MTU/controller, deletion.

use super::{counted, counted_one, nl, tolerate_missing, NetError, Netlink};
use crate::net::netns::Netns;
use futures_util::TryStreamExt;
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVrf, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo,
    LinkMessage,
};
use netlink_packet_route::AddressFamily;
use rtnetlink::{LinkGetRequest, LinkMessageBuilder, LinkUnspec, LinkVeth};
use std::os::fd::AsRawFd;

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Hardware address, `aa:bb:…` lower case (absent for some kinds).
    pub mac: Option<String>,
    /// MTU.
    pub mtu: u32,
    /// `IFLA_INFO_KIND` (`veth`, `tun`, `vrf`, …).
    pub kind: Option<String>,
    /// Index of the controller (VRF) it is enslaved to.
    pub controller: Option<u32>,
    /// Administratively up.
    pub up: bool,
    /// The loopback device (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// For a VRF device: the table it is bound to.
    pub vrf_table: Option<u32>,
    /// `IFLA_LINK`: for a veth end, the index of its peer (in the peer's namespace).
    pub peer: Option<u32>,
}

impl Netlink {
    /// The link named `name`, if it exists.
    pub fn link(&self, name: &str) -> Result<Option<Link>, NetError> {
        let mut request = without_stats(self.handle.link().get())
            .match_name(name.to_owned())
            .execute();
        match self.runtime.block_on(request.try_next()) {
            Ok(msg) => Ok(counted_one(msg).map(link_from)),
            Err(e) => match nl(format!("get link {name}"))(e) {
                NetError::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }

    /// The link with index `index`, if it exists: one message, however many links the node
    /// has.
    pub fn link_at(&self, index: u32) -> Result<Option<Link>, NetError> {
        let mut request = without_stats(self.handle.link().get())
            .match_index(index)
            .execute();
        match self.runtime.block_on(request.try_next()) {
            Ok(msg) => Ok(counted_one(msg).map(link_from)),
            Err(e) => match nl(format!("get link {index}"))(e) {
                NetError::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }

    /// The link named `name`, or `NotFound`.
    pub fn require_link(&self, name: &str) -> Result<Link, NetError> {
        self.link(name)?.ok_or_else(|| NetError::NotFound {
            what: format!("link {name}"),
        })
    }

    /// Every link.
    pub fn links(&self) -> Result<Vec<Link>, NetError> {
        let request = without_stats(self.handle.link().get()).execute();
        let msgs: Vec<LinkMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list links"))?;
        Ok(counted(msgs).into_iter().map(link_from).collect())
    }

    /// The links enslaved to `controller` (a VRF's members): a dump the kernel filters
    /// (`IFLA_MASTER`), so the answer holds those links only, however many the node has.
    pub fn controller_links(&self, controller: u32) -> Result<Vec<Link>, NetError> {
        let mut request = without_stats(self.filtered.link().get());
        request
            .message_mut()
            .attributes
            .push(LinkAttribute::Controller(controller));
        let msgs: Vec<LinkMessage> = self
            .runtime
            .block_on(request.execute().try_collect())
            .map_err(nl(format!("list the links of controller {controller}")))?;
        // Checked again, as for every filtered dump: the answer stays exact whatever the kernel.
        Ok(counted(msgs)
            .into_iter()
            .map(link_from)
            .filter(|l| l.controller == Some(controller))
            .collect())
    }

    /// Creates a veth pair: `host` here, its peer created directly inside `peer_ns` as `peer`.
    ///
    /// Each end is created with one transmit and one receive queue, said explicitly: without
    /// them the kernel allocates a queue per CPU and then reduces the active ones to one, and
    /// each reduction on a registered device waits for an (expedited) RCU grace period, two per
    /// pair, under the RTNL lock (`veth_init_queues`). One queue each is what the pair ends up
    /// with either way.
    pub fn create_veth(
        &self,
        host: &str,
        peer: &str,
        peer_ns: &Netns,
        mtu: Option<u32>,
    ) -> Result<(), NetError> {
        let mut peer_msg =
            single_queue(LinkUnspec::new_with_name(peer).setns_by_fd(peer_ns.file().as_raw_fd()));
        let mut host_msg = single_queue(LinkVeth::new(host, peer));
        if let Some(mtu) = mtu {
            peer_msg = peer_msg.mtu(mtu);
            host_msg = host_msg.mtu(mtu);
        }
        let msg = host_msg
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_msg.build())))
            .build();
        self.runtime
            .block_on(self.handle.link().add(msg).execute())
            .map_err(nl(format!(
                "create veth {host} with peer {peer} in {}",
                peer_ns.path().display()
            )))
    }

    /// Sets a link administratively up.
    pub fn set_up(&self, index: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index).up().build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("set link {index} up")))
    }

    /// Sets a link administratively down (the undo of [`Netlink::set_up`] on a device that was
    /// found down).
    pub fn set_down(&self, index: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index).down().build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("set link {index} down")))
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&self, index: u32, mtu: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index).mtu(mtu).build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("set MTU {mtu} on link {index}")))
    }

    /// Sets a link's hardware address (veth and tap change it while up).
    pub fn set_mac(&self, index: u32, mac: [u8; 6]) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index)
            .address(mac.to_vec())
            .build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!(
                "set MAC {} on link {index}",
                super::format_mac(&mac)
            )))
    }

    /// Enslaves a link to a controller (VRF).
    pub fn set_controller(&self, index: u32, controller: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index)
            .controller(controller)
            .build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("enslave link {index} to {controller}")))
    }

    /// Creates a VRF device bound to `table`.
    pub fn create_vrf(&self, name: &str, table: u32) -> Result<(), NetError> {
        let msg = rtnetlink::LinkVrf::new(name, table).build();
        self.runtime
            .block_on(self.handle.link().add(msg).execute())
            .map_err(nl(format!("create VRF {name} (table {table})")))
    }

    /// Deletes a link; a missing one is success.
    pub fn delete_link(&self, name: &str) -> Result<(), NetError> {
        let Some(link) = self.link(name)? else {
            return Ok(());
        };
        tolerate_missing(
            self.runtime
                .block_on(self.handle.link().del(link.index).execute())
                .map_err(nl(format!("delete link {name}"))),
        )
    }
}

/// A link request whose answer leaves out the link's statistics (`RTEXT_FILTER_SKIP_STATS`,
/// Linux 4.19; earlier kernels ignore it): [`Link`] holds none of them, and they are most of a
/// link message (the counters of the link and of its IPv4 and IPv6 layers), so every link read
/// sends, and parses, a fraction of the bytes.
fn without_stats(request: LinkGetRequest) -> LinkGetRequest {
    request.set_filter_mask(AddressFamily::Unspec, vec![LinkExtentMask::SkipStats])
}

fn link_from(msg: LinkMessage) -> Link {
    let mut link = Link {
        index: msg.header.index,
        name: String::new(),
        mac: None,
        mtu: 0,
        kind: None,
        controller: None,
        up: msg.header.flags.contains(LinkFlags::Up),
        loopback: msg.header.flags.contains(LinkFlags::Loopback),
        vrf_table: None,
        peer: None,
    };
    for attr in msg.attributes {
        match attr {
            LinkAttribute::IfName(name) => link.name = name,
            LinkAttribute::Address(bytes) if bytes.len() == 6 => {
                link.mac = Some(super::format_mac(&bytes))
            }
            LinkAttribute::Mtu(mtu) => link.mtu = mtu,
            LinkAttribute::Controller(index) => link.controller = Some(index),
            LinkAttribute::Link(index) => link.peer = Some(index),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    match info {
                        LinkInfo::Kind(kind) => link.kind = Some(kind_name(&kind)),
                        LinkInfo::Data(InfoData::Vrf(vrf)) => {
                            link.vrf_table = vrf.iter().find_map(|v| match v {
                                InfoVrf::TableId(t) => Some(*t),
                                _ => None,
                            })
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    link
}

fn kind_name(kind: &InfoKind) -> String {
    match kind {
        InfoKind::Veth => "veth".into(),
        InfoKind::Tun => "tun".into(),
        InfoKind::Vrf => "vrf".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

/// One transmit and one receive queue (see [`Netlink::create_veth`]).
fn single_queue<T>(msg: LinkMessageBuilder<T>) -> LinkMessageBuilder<T> {
    msg.append_extra_attribute(LinkAttribute::NumTxQueues(1))
        .append_extra_attribute(LinkAttribute::NumRxQueues(1))
}
