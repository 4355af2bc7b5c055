//! A read-only look at nftables over netlink (NETLINK_NETFILTER), without running `nft`.
//!
//! Spawning `nft` costs milliseconds on every ADD, CHECK and DEL. Most nodes have no forward base
//! chain at all, and then there is nothing to allow or remove: one netlink dump of the chains
//! answers that in microseconds, and `nft` runs only when a forward chain exists.

use super::NetError;
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};
use std::io;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_GETCHAIN: u16 = 4;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_HOOK_HOOKNUM: u16 = 1;
/// `NF_INET_FORWARD` (also the forward hook of the arp and bridge families).
const HOOK_FORWARD: u32 = 2;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Whether any base chain hooks `forward` (in any family).
pub fn has_forward_chain() -> Result<bool, NetError> {
    let io_err = |source: io::Error| NetError::Io {
        what: "dump nftables chains".into(),
        source,
    };
    let mut socket = Socket::new(NETLINK_NETFILTER).map_err(io_err)?;
    socket.bind_auto().map_err(io_err)?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(io_err)?;
    socket.send(&request(), 0).map_err(io_err)?;
    let mut found = false;
    loop {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let n = socket.recv(&mut buf, 0).map_err(io_err)?;
        match scan(&buf[..n.min(buf.len())])? {
            Scan::More(any) => found |= any,
            Scan::Done(any) => return Ok(found || any),
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

enum Scan {
    /// More datagrams follow; whether this one held a forward chain.
    More(bool),
    /// The dump ended.
    Done(bool),
}

/// Walks the netlink messages of one datagram.
fn scan(mut data: &[u8]) -> Result<Scan, NetError> {
    let mut found = false;
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        if len < NLMSG_HDRLEN || len > data.len() {
            break;
        }
        let payload = &data[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_DONE => return Ok(Scan::Done(found)),
            NLMSG_ERROR => return error(payload).map(|()| Scan::Done(found)),
            _ => found |= payload.get(NFGENMSG_LEN..).is_some_and(chain_hooks_forward),
        }
        data = &data[align(len).min(data.len())..];
    }
    Ok(Scan::More(found))
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

/// Whether a chain's attributes carry a hook whose number is `forward`.
fn chain_hooks_forward(attrs: &[u8]) -> bool {
    attributes(attrs)
        .find(|(kind, _)| *kind == NFTA_CHAIN_HOOK)
        .is_some_and(|(_, hook)| {
            attributes(hook).any(|(kind, value)| {
                kind == NFTA_HOOK_HOOKNUM
                    && value.len() >= 4
                    && u32::from_be_bytes([value[0], value[1], value[2], value[3]]) == HOOK_FORWARD
            })
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
