//! A read-only look at nftables over netlink (NETLINK_NETFILTER), without running `nft`.
//!
//! Spawning `nft` costs milliseconds (and a process of ≈ 4 MiB) on every ADD, CHECK and DEL. Most
//! nodes have no forward base chain at all, and then there is nothing to allow or remove; the
//! table-mode host-service filter, once created, only needs to be seen. One netlink dump of the
//! chains answers both in microseconds. The forward-accept rules are written over the same
//! socket ([`rules`]); `nft` runs only to create the table-mode host-service filter, once per node.

use super::NetError;
use std::io;

pub mod map;
pub mod mark_users;
mod message;
pub mod rules;
mod socket;

pub use socket::{hold_closes, HeldCloses};

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_GETCHAIN: u16 = 4;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_HOOK_HOOKNUM: u16 = 1;
/// `NF_INET_FORWARD` (also the forward hook of the arp and bridge families).
pub(crate) const HOOK_FORWARD: u32 = 2;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `NFPROTO_INET`: the inet family (`nft add table inet …`).
pub const FAMILY_INET: u8 = 1;

/// One chain of the ruleset: as much of it as this crate decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// `NFPROTO_*` family.
    pub family: u8,
    pub table: String,
    pub name: String,
    /// The hook number of a base chain.
    pub hook: Option<u32>,
}

/// Whether any base chain hooks `forward` (in any family).
pub fn has_forward_chain() -> Result<bool, NetError> {
    Ok(chains()?.iter().any(|c| c.hook == Some(HOOK_FORWARD)))
}

/// Whether the chain `family table name` exists.
pub fn has_chain(family: u8, table: &str, name: &str) -> Result<bool, NetError> {
    Ok(chains()?
        .iter()
        .any(|c| c.family == family && c.table == table && c.name == name))
}

/// The ruleset's generation: the kernel counts it up by one with every committed transaction
/// (an `nft -f` run, a netlink batch), so the difference between two readings is how many
/// changes of the ruleset were made in between.
pub fn generation() -> Result<u32, NetError> {
    const NFT_MSG_GETGEN: u16 = 16;
    const NFTA_GEN_ID: u16 = 1;
    let msg = message::Message::nftables(NFT_MSG_GETGEN, NLM_F_REQUEST | message::NLM_F_ACK, 0);
    let ids = message::dump("read the nftables generation", msg, |attrs, out| {
        out.extend(attributes(attrs).find_map(|(kind, value)| match value {
            [a, b, c, d, ..] if kind == NFTA_GEN_ID => Some(u32::from_be_bytes([*a, *b, *c, *d])),
            _ => None,
        }))
    })?;
    ids.first().copied().ok_or_else(|| NetError::Unsupported {
        what: "the nftables generation".into(),
    })
}

/// Every chain of every family (none when the kernel has no nf_tables).
pub fn chains() -> Result<Vec<Chain>, NetError> {
    let io_err = |source: io::Error| NetError::Io {
        what: "dump nftables chains".into(),
        source,
    };
    let socket = match socket::open() {
        Ok(socket) => socket,
        // A kernel without nfnetlink has no nftables ruleset.
        Err(e) if e.raw_os_error() == Some(libc::EPROTONOSUPPORT) => return Ok(Vec::new()),
        Err(e) => return Err(io_err(e)),
    };
    socket.send(&request(), 0).map_err(io_err)?;
    let mut chains = Vec::new();
    loop {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let n = socket.recv(&mut buf, 0).map_err(io_err)?;
        if scan(&buf[..n.min(buf.len())], &mut chains)? == Scan::Done {
            return Ok(chains);
        }
    }
}

/// NFT_MSG_GETCHAIN dump of every family.
fn request() -> Vec<u8> {
    let len = (NLMSG_HDRLEN + NFGENMSG_LEN) as u32;
    let mut msg = Vec::with_capacity(len as usize);
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN).to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    msg.extend_from_slice(&[0, 0, 0, 0]); // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0
    msg
}

#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// More datagrams follow.
    More,
    /// The dump ended.
    Done,
}

/// Walks the netlink messages of one datagram, collecting the chains.
fn scan(data: &[u8], chains: &mut Vec<Chain>) -> Result<Scan, NetError> {
    for (kind, payload) in messages(data) {
        match kind {
            NLMSG_DONE => return Ok(Scan::Done),
            NLMSG_ERROR => return error(payload).map(|()| Scan::Done),
            _ => chains.extend(chain(payload)),
        }
    }
    Ok(Scan::More)
}

/// Iterates the netlink messages of one datagram: (message type, payload after the header).
/// Stops at a truncated or malformed message.
fn messages(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        if len < NLMSG_HDRLEN || len > data.len() {
            return None;
        }
        let payload = &data[NLMSG_HDRLEN..len];
        data = &data[align(len).min(data.len())..];
        Some((kind, payload))
    })
}

/// One NFT_MSG_NEWCHAIN payload: nfgenmsg (family first), then the chain's attributes.
fn chain(payload: &[u8]) -> Option<Chain> {
    let family = *payload.first()?;
    let attrs = payload.get(NFGENMSG_LEN..)?;
    let text = |kind: u16| {
        attributes(attrs).find(|(k, _)| *k == kind).map(|(_, v)| {
            String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(v)).into_owned()
        })
    };
    Some(Chain {
        family,
        table: text(NFTA_CHAIN_TABLE)?,
        name: text(NFTA_CHAIN_NAME)?,
        hook: hook_number(attrs),
    })
}

/// An NLMSG_ERROR: errno 0 is an acknowledgement; no nf_tables in the kernel means no chains.
fn error(payload: &[u8]) -> Result<(), NetError> {
    let errno = payload
        .get(..4)
        .map_or(0, |b| -i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match errno {
        0 | libc::ENOENT | libc::EOPNOTSUPP | libc::EPROTONOSUPPORT => Ok(()),
        e => Err(NetError::kernel(
            "dump nftables chains",
            io::Error::from_raw_os_error(e),
        )),
    }
}

/// The hook number of a base chain's attributes (big-endian u32).
fn hook_number(attrs: &[u8]) -> Option<u32> {
    let (_, hook) = attributes(attrs).find(|(kind, _)| *kind == NFTA_CHAIN_HOOK)?;
    attributes(hook).find_map(|(kind, value)| match value {
        [a, b, c, d, ..] if kind == NFTA_HOOK_HOOKNUM => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    })
}

/// Iterates netlink attributes: (type without flags, payload).
fn attributes(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([data[0], data[1]]));
        let kind = u16::from_ne_bytes([data[2], data[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > data.len() {
            return None;
        }
        let value = &data[4..len];
        data = &data[align(len).min(data.len())..];
        Some((kind, value))
    })
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}
