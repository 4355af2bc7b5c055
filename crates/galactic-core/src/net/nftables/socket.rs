//! Opening netfilter netlink sockets, and when they are closed.
//!
//! Closing one is not free after a transaction that deleted something (a map element, a rule):
//! the kernel frees deleted objects after an RCU grace period, in a work item it queues at the
//! commit, and the release of every nfnetlink socket waits for that work item while holding the
//! namespace's nf_tables commit mutex (`nft_rcv_nl_event`). An interface unregistered meanwhile
//! waits for the same mutex under the RTNL lock (`nf_tables_netdev_event`). A DEL that removes
//! its map element while another thread deletes its veth pair, and then closes the socket, thus
//! made the deletion wait a whole grace period behind it (≈ 8–13 ms here, with every netlink
//! user of the node blocked on RTNL meanwhile).
//!
//! [`hold_closes`] defers the closing of every socket the calling thread opens until its guard
//! is dropped: once the interfaces are gone, and the work item long done, closing is free.

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};
use std::cell::RefCell;
use std::io;
use std::marker::PhantomData;
use std::ops::Deref;

/// How long a reply may take before the call fails (the kernel answers at once; this bounds a
/// wedged socket, never a normal call).
const REPLY_TIMEOUT_SECS: u8 = 5;

thread_local! {
    /// The sockets whose closing is held, while a [`HeldCloses`] of this thread lives.
    static HELD: RefCell<Option<Vec<Socket>>> = const { RefCell::new(None) };
}

/// A netfilter netlink socket; dropping it closes it, or hands it to the thread's
/// [`HeldCloses`].
pub(crate) struct NfSocket(Option<Socket>);

impl Deref for NfSocket {
    type Target = Socket;

    fn deref(&self) -> &Socket {
        // Always `Some` until drop takes it.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("taken only by drop"))
    }
}

impl Drop for NfSocket {
    fn drop(&mut self) {
        let Some(socket) = self.0.take() else { return };
        let unheld = HELD.with_borrow_mut(|held| match held {
            Some(sockets) => {
                sockets.push(socket);
                None
            }
            None => Some(socket),
        });
        drop(unheld);
    }
}

/// A netfilter netlink socket, bound and connected to the kernel, with a bounded wait for
/// replies.
pub(crate) fn open() -> io::Result<NfSocket> {
    let mut socket = Socket::new(NETLINK_NETFILTER)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let timeout = libc::timeval {
        tv_sec: REPLY_TIMEOUT_SECS.into(),
        tv_usec: 0,
    };
    crate::net::set_receive_timeout(&socket, timeout)?;
    Ok(NfSocket(Some(socket)))
}

/// Holds the closing of the netfilter sockets this thread opens from now on until the guard is
/// dropped (module comment). Within an outer hold it adds nothing: the outer one closes them.
pub fn hold_closes() -> HeldCloses {
    let outer = HELD.with_borrow_mut(|held| match held {
        Some(_) => true,
        None => {
            *held = Some(Vec::new());
            false
        }
    });
    HeldCloses {
        outer,
        _thread: PhantomData,
    }
}

/// Closes the held sockets when dropped; tied to the thread that made it.
#[must_use = "the sockets are closed when the guard is dropped"]
pub struct HeldCloses {
    /// Made within another hold, which closes the sockets.
    outer: bool,
    /// Not `Send`: the sockets are the thread's.
    _thread: PhantomData<*const ()>,
}

impl HeldCloses {
    /// How many sockets are held now (for tests).
    pub fn held(&self) -> usize {
        HELD.with_borrow(|held| held.as_ref().map_or(0, Vec::len))
    }
}

impl Drop for HeldCloses {
    fn drop(&mut self) {
        if !self.outer {
            drop(HELD.with_borrow_mut(Option::take));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_opened_under_a_hold_close_with_its_guard() {
        let held = hold_closes();
        let inner = hold_closes();
        drop(open().unwrap());
        drop(open().unwrap());
        drop(inner);
        assert_eq!(
            held.held(),
            2,
            "the inner guard leaves them to the outer one"
        );
        drop(held);
        assert!(
            HELD.with_borrow(Option::is_none),
            "closed with the outer guard, and no hold left"
        );
        drop(open().unwrap());
        assert!(
            HELD.with_borrow(Option::is_none),
            "unheld, a socket closes when dropped"
        );
    }
}
