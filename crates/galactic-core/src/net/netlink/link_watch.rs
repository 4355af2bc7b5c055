//! Seeing a link's deletion take effect before the deleting request returns.
//!
//! Deleting a veth pair is one `RTM_DELLINK`, but its answer comes late: the kernel unlists both
//! ends, runs every protocol's teardown, announces the deletion (`RTM_DELLINK` to the link
//! group) and drops the RTNL lock, then waits in `netdev_run_todo` for an RCU barrier before it
//! answers (≈ 10–20 ms of the ≈ 15–25 ms here). Once announced, the link is gone from every
//! lookup and the deletion cannot fail any more; what is left is the kernel freeing it. A
//! [`LinkWatch`] subscribed before the deletion starts sees the announcement, so a caller can do
//! what comes after the link (its records, …) during that wait instead of after it.

use super::super::NetError;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;

/// `RTMGRP_LINK`: the link notifications.
const RTMGRP_LINK: u32 = 1;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
/// `struct ifinfomsg`.
const IFINFOMSG_LEN: usize = 16;
const NLA_TYPE_MASK: u16 = 0x3fff;
/// How often a wait looks at its stop condition when no notification comes.
const POLL_MICROS: i64 = 1000;

/// Link notifications of the calling thread's network namespace, from its creation on.
pub struct LinkWatch {
    socket: Socket,
}

/// How a [`LinkWatch::wait_deleted`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// The link's deletion was announced.
    Deleted,
    /// The stop condition held first.
    Stopped,
    /// Notifications were lost (the socket's buffer overran on a busy node), or the socket
    /// failed: the deletion may or may not have happened.
    Lost,
}

impl LinkWatch {
    /// Subscribes to the link notifications of the calling thread's namespace.
    pub fn new() -> Result<Self, NetError> {
        let io_err = |source| NetError::Io {
            what: "subscribe to link notifications".into(),
            source,
        };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io_err)?;
        socket
            .bind(&SocketAddr::new(0, RTMGRP_LINK))
            .map_err(io_err)?;
        let poll = libc::timeval {
            tv_sec: 0,
            tv_usec: POLL_MICROS,
        };
        crate::net::set_receive_timeout(&socket, poll).map_err(io_err)?;
        Ok(Self { socket })
    }

    /// Waits until the deletion of link `name` is announced, or `stop()` holds (looked at after
    /// every datagram of notifications, and whenever a millisecond passes without one).
    pub fn wait_deleted(&self, name: &str, mut stop: impl FnMut() -> bool) -> Watched {
        loop {
            let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
            match self.socket.recv(&mut buf, 0) {
                Ok(n) if deletes(&buf[..n.min(buf.len())], name) => return Watched::Deleted,
                // Other links' notifications, none for a while, or a signal.
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                // ENOBUFS (an overrun) or anything else.
                Err(_) => return Watched::Lost,
            }
            if stop() {
                return Watched::Stopped;
            }
        }
    }
}

/// Whether a datagram of notifications announces the deletion of `name`.
fn deletes(mut data: &[u8], name: &str) -> bool {
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        if len < NLMSG_HDRLEN || len > data.len() {
            return false;
        }
        let payload = &data[NLMSG_HDRLEN..len];
        // `AF_UNSPEC` only: a bridge announces a port's leaving as an `AF_BRIDGE` RTM_DELLINK
        // of a link that stays.
        let unspec = payload.first() == Some(&0);
        if kind == RTM_DELLINK && unspec && ifname(payload) == Some(name.as_bytes()) {
            return true;
        }
        data = &data[align(len).min(data.len())..];
    }
    false
}

/// The `IFLA_IFNAME` of an `ifinfomsg` payload, without its NUL.
fn ifname(payload: &[u8]) -> Option<&[u8]> {
    let mut attrs = payload.get(IFINFOMSG_LEN..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == IFLA_IFNAME {
            let value = &attrs[4..len];
            return value.split(|b| *b == 0).next();
        }
        attrs = &attrs[align(len).min(attrs.len())..];
    }
    None
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One netlink message of `kind` for an interface named `name`.
    fn message(kind: u16, name: &str) -> Vec<u8> {
        let mut attr = Vec::new();
        let value = [name.as_bytes(), &[0]].concat();
        attr.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        attr.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
        attr.extend_from_slice(&value);
        attr.resize(align(attr.len()), 0);
        let len = NLMSG_HDRLEN + IFINFOMSG_LEN + attr.len();
        let mut msg = Vec::new();
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&[0; IFINFOMSG_LEN]);
        msg.extend_from_slice(&attr);
        msg
    }

    #[test]
    fn only_the_named_links_deletion_counts() {
        let mut data = message(16, "G000000001001H"); // RTM_NEWLINK
        data.extend(message(RTM_DELLINK, "G000000001002H"));
        assert!(!deletes(&data, "G000000001001H"));
        data.extend(message(RTM_DELLINK, "G000000001001H"));
        assert!(deletes(&data, "G000000001001H"));
        assert!(
            !deletes(&data[..data.len() - 3], "G000000001001H"),
            "a cut message is none"
        );
        let mut bridge_port = message(RTM_DELLINK, "G000000001001H");
        bridge_port[NLMSG_HDRLEN] = 7; // AF_BRIDGE
        assert!(
            !deletes(&bridge_port, "G000000001001H"),
            "a port leaving a bridge stays"
        );
    }
}
