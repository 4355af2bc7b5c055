//! The rules of one nftables chain over netlink: dumped, inserted at the top, deleted by handle,
//! all without the `nft` binary (a process per call on the ADD/CHECK/DEL path).
//!
//! Only one rule shape is ever written: `iifname|oifname "<name>" accept comment "<comment>"`,
//! the same expressions and comment encoding `nft` produces for that text (`meta` into register
//! 1, `cmp eq` against the name padded to `IFNAMSIZ`, `immediate` accept; the comment as libnftnl
//! user data), so a rule written by either is found and removed by the other. Changes go in one
//! nfnetlink batch: all of them or none.

use super::{align, attributes, error, messages, NFGENMSG_LEN, NLMSG_DONE, NLMSG_ERROR};
use super::{NFNL_SUBSYS_NFTABLES, NLM_F_DUMP, NLM_F_REQUEST};
use crate::net::NetError;
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};
use std::io;
use std::os::fd::AsRawFd;

const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NFT_MSG_DELRULE: u16 = 8;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;

const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_HANDLE: u16 = 3;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_USERDATA: u16 = 7;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG_1: u32 = 1;
const NFT_CMP_EQ: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// libnftnl's `NFTNL_UDATA_RULE_COMMENT`.
const UDATA_RULE_COMMENT: u8 = 0;
const IFNAMSIZ: usize = 16;
/// How long a reply may take before the call fails (the kernel answers at once; this bounds a
/// wedged socket, never a normal call).
const REPLY_TIMEOUT_SECS: u8 = 5;

/// Which interface of a packet a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `iifname`: the packet came in on the interface.
    In,
    /// `oifname`: the packet leaves through it.
    Out,
}

impl Direction {
    fn meta_key(self) -> u32 {
        match self {
            Direction::In => 6,  // NFT_META_IIFNAME
            Direction::Out => 7, // NFT_META_OIFNAME
        }
    }
}

/// A chain, by family, table and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRef {
    /// `NFPROTO_*` family.
    pub family: u8,
    /// The table.
    pub table: String,
    /// The chain.
    pub name: String,
}

/// One rule of a chain, as much of it as ownership needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The kernel's handle (unique in the table).
    pub handle: u64,
    /// The rule's comment, if it has one.
    pub comment: Option<String>,
}

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Insert `<direction> "<ifname>" accept comment "<comment>"` at the top of the chain.
    InsertAccept {
        /// Where.
        chain: ChainRef,
        /// `iifname` or `oifname`.
        direction: Direction,
        /// The interface (at most 15 bytes).
        ifname: String,
        /// The comment.
        comment: String,
    },
    /// Delete the rule with this handle.
    Delete {
        /// Where.
        chain: ChainRef,
        /// The rule.
        handle: u64,
    },
}

/// Every rule of `chain` (none when the table or chain is gone).
pub fn rules(chain: &ChainRef) -> Result<Vec<Rule>, NetError> {
    let what = || format!("dump the rules of {} {}", chain.table, chain.name);
    let socket = open().map_err(|e| io_error(what(), e))?;
    let mut msg = Message::new(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        1,
        chain.family,
        0,
    );
    msg.string(NFTA_RULE_TABLE, &chain.table);
    msg.string(NFTA_RULE_CHAIN, &chain.name);
    socket
        .send(&msg.finish(), 0)
        .map_err(|e| io_error(what(), e))?;
    let mut out = Vec::new();
    loop {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let n = socket.recv(&mut buf, 0).map_err(|e| io_error(what(), e))?;
        for (kind, payload) in messages(&buf[..n.min(buf.len())]) {
            match kind {
                NLMSG_DONE => return Ok(out),
                NLMSG_ERROR => return error(payload).map(|()| out),
                _ => out.extend(rule(payload)),
            }
        }
    }
}

/// Applies `changes` in one transaction. An empty list does nothing.
pub fn apply(changes: &[Change]) -> Result<(), NetError> {
    if changes.is_empty() {
        return Ok(());
    }
    let what = || format!("apply {} nftables rule changes", changes.len());
    let socket = open().map_err(|e| io_error(what(), e))?;
    let subsystem = NFNL_SUBSYS_NFTABLES.to_be();
    let mut batch = Message::new(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 1, 0, subsystem).finish();
    for (i, change) in changes.iter().enumerate() {
        batch.extend(encode(change, i as u32 + 2));
    }
    let last = changes.len() as u32 + 2;
    batch.extend(Message::new(NFNL_MSG_BATCH_END, NLM_F_REQUEST, last, 0, subsystem).finish());
    socket.send(&batch, 0).map_err(|e| io_error(what(), e))?;
    // One acknowledgement per change (each carries NLM_F_ACK), errors included; a failure of the
    // batch itself is one error for its first message.
    let mut pending = changes.len();
    let mut first_error = None;
    while pending > 0 {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let n = socket.recv(&mut buf, 0).map_err(|e| io_error(what(), e))?;
        for (kind, payload) in messages(&buf[..n.min(buf.len())]) {
            if kind == NLMSG_ERROR {
                let errno = payload
                    .get(..4)
                    .map_or(0, |b| -i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                // The request header echoed after the errno: its sequence number.
                let seq = payload
                    .get(12..16)
                    .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if errno != 0 && first_error.is_none() {
                    first_error = Some(errno);
                }
                if seq == 1 || seq == last {
                    // The batch as a whole was refused: nothing else will come.
                    pending = 0;
                    break;
                }
                pending = pending.saturating_sub(1);
            }
        }
    }
    match first_error {
        None => Ok(()),
        Some(errno) => Err(NetError::kernel(
            what(),
            io::Error::from_raw_os_error(errno),
        )),
    }
}

/// A netfilter netlink socket with a bounded wait for replies.
fn open() -> io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_NETFILTER)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let timeout = libc::timeval {
        tv_sec: REPLY_TIMEOUT_SECS.into(),
        tv_usec: 0,
    };
    // SAFETY: a valid socket descriptor, a pointer to a timeval and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
}

fn io_error(what: String, source: io::Error) -> NetError {
    NetError::Io { what, source }
}

/// One change as a netlink message with sequence number `seq`. Over 60 lines on purpose: one arm
/// per kind of change, each the literal attribute layout the kernel expects, read top to bottom.
fn encode(change: &Change, seq: u32) -> Vec<u8> {
    match change {
        Change::InsertAccept {
            chain,
            direction,
            ifname,
            comment,
        } => {
            // Without NLM_F_APPEND and a position the kernel inserts at the top of the chain.
            let mut msg = Message::new(
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
                NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
                seq,
                chain.family,
                0,
            );
            msg.string(NFTA_RULE_TABLE, &chain.table);
            msg.string(NFTA_RULE_CHAIN, &chain.name);
            let list = msg.open(NFTA_RULE_EXPRESSIONS);
            expression(&mut msg, "meta", |m| {
                m.u32(NFTA_META_KEY, direction.meta_key());
                m.u32(NFTA_META_DREG, NFT_REG_1);
            });
            expression(&mut msg, "cmp", |m| {
                m.u32(NFTA_CMP_SREG, NFT_REG_1);
                m.u32(NFTA_CMP_OP, NFT_CMP_EQ);
                let data = m.open(NFTA_CMP_DATA);
                let mut name = [0u8; IFNAMSIZ];
                let bytes = ifname.as_bytes();
                let n = bytes.len().min(IFNAMSIZ - 1);
                name[..n].copy_from_slice(&bytes[..n]);
                m.bytes(NFTA_DATA_VALUE, &name);
                m.close(data);
            });
            expression(&mut msg, "immediate", |m| {
                m.u32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
                let data = m.open(NFTA_IMMEDIATE_DATA);
                let verdict = m.open(NFTA_DATA_VERDICT);
                m.u32(NFTA_VERDICT_CODE, NF_ACCEPT);
                m.close(verdict);
                m.close(data);
            });
            msg.close(list);
            let mut udata = vec![UDATA_RULE_COMMENT, 0];
            udata.extend_from_slice(comment.as_bytes());
            udata.push(0);
            udata[1] = u8::try_from(udata.len() - 2).unwrap_or(u8::MAX);
            msg.bytes(NFTA_RULE_USERDATA, &udata);
            msg.finish()
        }
        Change::Delete { chain, handle } => {
            let mut msg = Message::new(
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE,
                NLM_F_REQUEST | NLM_F_ACK,
                seq,
                chain.family,
                0,
            );
            msg.string(NFTA_RULE_TABLE, &chain.table);
            msg.string(NFTA_RULE_CHAIN, &chain.name);
            msg.bytes(NFTA_RULE_HANDLE, &handle.to_be_bytes());
            msg.finish()
        }
    }
}

/// One element of an expression list: its name and its data.
fn expression(msg: &mut Message, name: &str, data: impl FnOnce(&mut Message)) {
    let elem = msg.open(NFTA_LIST_ELEM);
    msg.string(NFTA_EXPR_NAME, name);
    let inner = msg.open(NFTA_EXPR_DATA);
    data(msg);
    msg.close(inner);
    msg.close(elem);
}

/// One NFT_MSG_NEWRULE payload of a dump.
fn rule(payload: &[u8]) -> Option<Rule> {
    let attrs = payload.get(NFGENMSG_LEN..)?;
    let handle = attributes(attrs).find_map(|(kind, value)| match value {
        [a, b, c, d, e, f, g, h] if kind == NFTA_RULE_HANDLE => {
            Some(u64::from_be_bytes([*a, *b, *c, *d, *e, *f, *g, *h]))
        }
        _ => None,
    })?;
    let comment = attributes(attrs)
        .find(|(kind, _)| *kind == NFTA_RULE_USERDATA)
        .and_then(|(_, udata)| comment(udata));
    Some(Rule { handle, comment })
}

/// The comment of libnftnl user data: type-length-value records, the comment NUL-terminated.
fn comment(mut udata: &[u8]) -> Option<String> {
    while let [kind, len, rest @ ..] = udata {
        let len = usize::from(*len);
        let value = rest.get(..len)?;
        if *kind == UDATA_RULE_COMMENT {
            let text = value.split(|b| *b == 0).next().unwrap_or(value);
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        udata = &rest[len..];
    }
    None
}

/// A netlink message under construction: header, nfgenmsg, attributes.
struct Message {
    buf: Vec<u8>,
}

impl Message {
    fn new(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        buf.push(family);
        buf.push(0); // NFNETLINK_V0
        buf.extend_from_slice(&res_id.to_ne_bytes()); // already in network order where it matters
        Self { buf }
    }

    fn bytes(&mut self, kind: u16, value: &[u8]) {
        let len = 4 + value.len();
        self.buf
            .extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(align(self.buf.len()), 0);
    }

    fn string(&mut self, kind: u16, value: &str) {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.bytes(kind, &bytes);
    }

    /// A big-endian u32 (nftables' integer attributes are in network order).
    fn u32(&mut self, kind: u16, value: u32) {
        self.bytes(kind, &value.to_be_bytes());
    }

    /// Starts a nested attribute; returns its offset for [`Message::close`].
    fn open(&mut self, kind: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        at
    }

    fn close(&mut self, at: usize) {
        let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comment_is_read_from_libnftnl_user_data() {
        assert_eq!(
            comment(b"\x00\x0bgalactic:x\x00").as_deref(),
            Some("galactic:x")
        );
        // Another record first, then the comment.
        assert_eq!(
            comment(b"\x01\x02ab\x00\x04abc\x00").as_deref(),
            Some("abc")
        );
        assert_eq!(comment(b"\x01\x02ab"), None);
        assert_eq!(comment(b"\x00\x09short"), None, "a length past the end");
    }
}
