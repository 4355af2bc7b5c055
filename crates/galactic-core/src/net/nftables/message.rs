//! nfnetlink messages for nf_tables: building one, sending a batch of them as one transaction,
//! dumping objects. Shared by the chains' rules ([`super::rules`]) and the VPC-mark map's
//! elements ([`super::map`]).

use super::socket::open;
use super::{align, error, messages, NFGENMSG_LEN, NLMSG_DONE, NLMSG_ERROR};
use super::{NFNL_SUBSYS_NFTABLES, NLM_F_REQUEST};
use crate::net::NetError;
use std::io;

const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
pub(super) const NLM_F_ACK: u16 = 0x4;
pub(super) const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;
pub(super) fn io_error(what: String, source: io::Error) -> NetError {
    NetError::Io { what, source }
}

/// Sends `changes` (messages built with [`Message::new`], each with `NLM_F_ACK`; their
/// sequence numbers are set here) in one batch: all of them apply or none. An empty list does
/// nothing.
pub(super) fn transaction(what: &str, changes: Vec<Vec<u8>>) -> Result<(), NetError> {
    if changes.is_empty() {
        return Ok(());
    }
    let what = || format!("{what} ({} nftables changes)", changes.len());
    let socket = open().map_err(|e| io_error(what(), e))?;
    let subsystem = NFNL_SUBSYS_NFTABLES.to_be();
    let mut batch = Message::new(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 1, 0, subsystem).finish();
    for (i, mut change) in changes.iter().cloned().enumerate() {
        change[8..12].copy_from_slice(&(i as u32 + 2).to_ne_bytes());
        batch.extend(change);
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

/// Sends the dump request `msg` and collects what `parse` makes of each object (a missing table
/// or object is an empty dump). The objects count towards `netlink::received`.
pub(super) fn dump<T>(
    what: &str,
    msg: Message,
    mut parse: impl FnMut(&[u8], &mut Vec<T>),
) -> Result<Vec<T>, NetError> {
    let socket = open().map_err(|e| io_error(what.to_owned(), e))?;
    socket
        .send(&msg.finish(), 0)
        .map_err(|e| io_error(what.to_owned(), e))?;
    let mut out = Vec::new();
    loop {
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let n = socket
            .recv(&mut buf, 0)
            .map_err(|e| io_error(what.to_owned(), e))?;
        for (kind, payload) in messages(&buf[..n.min(buf.len())]) {
            match kind {
                NLMSG_DONE => return Ok(counted(out)),
                NLMSG_ERROR => return error(payload).map(|()| counted(out)),
                _ => {
                    if let Some(attrs) = payload.get(NFGENMSG_LEN..) {
                        parse(attrs, &mut out);
                    }
                }
            }
        }
    }
}

/// Counts a dump's objects towards `netlink::received`.
fn counted<T>(objects: Vec<T>) -> Vec<T> {
    crate::net::netlink::count_received(objects.len());
    objects
}

/// A netlink message under construction: header, nfgenmsg, attributes.
pub(super) struct Message {
    buf: Vec<u8>,
}

impl Message {
    pub(super) fn new(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16) -> Self {
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

    /// An nf_tables message of `command` (`NFT_MSG_*`).
    pub(super) fn nftables(command: u16, flags: u16, family: u8) -> Self {
        Self::new((NFNL_SUBSYS_NFTABLES << 8) | command, flags, 0, family, 0)
    }

    pub(super) fn bytes(&mut self, kind: u16, value: &[u8]) {
        let len = 4 + value.len();
        self.buf
            .extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(align(self.buf.len()), 0);
    }

    pub(super) fn string(&mut self, kind: u16, value: &str) {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.bytes(kind, &bytes);
    }

    /// A big-endian u32 (nftables' integer attributes are in network order).
    pub(super) fn u32(&mut self, kind: u16, value: u32) {
        self.bytes(kind, &value.to_be_bytes());
    }

    /// Starts a nested attribute; returns its offset for [`Message::close`].
    pub(super) fn open(&mut self, kind: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        at
    }

    pub(super) fn close(&mut self, at: usize) {
        let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}
