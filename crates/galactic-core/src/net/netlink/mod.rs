//! One thin, typed, synchronous layer over rtnetlink.
//!
//! A [`Netlink`] owns a netlink socket opened *inside* the namespace it acts on (see
//! [`Netlink::in_netns`]) and a current-thread runtime that drives it, so callers never switch
//! namespaces themselves and never see async code. "Not found" and "already exists" are typed
//! ([`NetError::NotFound`], [`NetError::is_exists`]); each method does one kernel operation.

mod address;
mod link;
mod link_watch;
mod neighbour;
mod route;
mod rule;

pub use address::AddrFlags;
pub use link::Link;
pub use link_watch::{LinkWatch, Watched};
pub use neighbour::{format_mac, parse_mac, NeighState, Neighbour};
pub use route::{masked, RouteKind, RouteLookup, RouteSpec, UplinkRoute};
pub use rule::{MarkMatch, RuleSpec};

use super::netns::{run_in, Netns};
use super::NetError;
use crate::ip::Family;
use netlink_packet_route::AddressFamily;
use rtnetlink::Handle;
use std::cell::Cell;
use std::io;
use tokio::runtime::{Builder, Runtime};

/// Synchronous netlink access to one network namespace.
pub struct Netlink {
    runtime: Runtime,
    handle: Handle,
    /// A second socket with `NETLINK_GET_STRICT_CHK`, for dumps the kernel filters itself (one
    /// routing table instead of every route of the family). Only for those: strict checking
    /// also rejects header fields other requests leave set, so everything else stays on
    /// `handle`.
    filtered: Handle,
}

thread_local! {
    static RECEIVED: Cell<u64> = const { Cell::new(0) };
}

/// How many kernel objects this thread has received in answers to dumps and lookups so far
/// (one per rtnetlink message; one per element of an nftables map): a deterministic measure of
/// how much kernel state an operation reads, which cost tests compare across node sizes (each
/// `Netlink` runs its requests on the calling thread). Every operation's closing log line
/// carries it as `netlinkReceived`.
pub fn received() -> u64 {
    RECEIVED.with(Cell::get)
}

/// Counts `n` objects received towards [`received`] (the nftables layer's answers).
pub(crate) fn count_received(n: usize) {
    RECEIVED.with(|r| r.set(r.get() + n as u64));
}

/// Counts a dump's messages towards [`received`].
fn counted<T>(answer: Vec<T>) -> Vec<T> {
    count_received(answer.len());
    answer
}

/// Counts a lookup's answer towards [`received`].
fn counted_one<T>(answer: Option<T>) -> Option<T> {
    RECEIVED.with(|r| r.set(r.get() + u64::from(answer.is_some())));
    answer
}

/// The netlink address family of `family`.
fn address_family(family: Family) -> AddressFamily {
    match family {
        Family::V6 => AddressFamily::Inet6,
        Family::V4 => AddressFamily::Inet,
    }
}

fn runtime() -> Result<Runtime, NetError> {
    Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|source| NetError::Io {
            what: "start the netlink runtime".into(),
            source,
        })
}

/// Opens the two sockets of a [`Netlink`] in the calling thread's namespace: the plain one and the
/// strictly checked one for filtered dumps.
fn connect() -> Result<(Handle, Handle), NetError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(|source| NetError::Io {
        what: "open a netlink socket".into(),
        source,
    })?;
    tokio::spawn(connection);
    // Kernels before 4.20 have no strict checking: they ignore the filter and send every
    // route, which `Netlink::routes` then filters itself (slower, still exact).
    let filtered = match rtnetlink::new_connection_with_strict_check() {
        Ok((connection, filtered, _)) => {
            tokio::spawn(connection);
            filtered
        }
        Err(_) => handle.clone(),
    };
    Ok((handle, filtered))
}

/// Maps an rtnetlink error to a typed one, saying what was being done.
fn nl(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetError {
    move |e| match &e {
        rtnetlink::Error::NetlinkError(msg) => {
            let errno = msg.code.map_or(libc::EIO, |c| -c.get());
            NetError::kernel(what, io::Error::from_raw_os_error(errno))
        }
        _ => NetError::Io {
            what: what.into(),
            source: io::Error::other(e.to_string()),
        },
    }
}

/// Treats "already exists" as success.
fn tolerate_exists(result: Result<(), NetError>) -> Result<(), NetError> {
    match result {
        Err(e) if e.is_exists() => Ok(()),
        other => other,
    }
}

/// Treats "not found" as success.
fn tolerate_missing(result: Result<(), NetError>) -> Result<(), NetError> {
    match result {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl Netlink {
    /// Netlink for the calling thread's namespace (the plugin's host).
    pub fn current() -> Result<Self, NetError> {
        let runtime = runtime()?;
        let (handle, filtered) = {
            let _entered = runtime.enter();
            connect()?
        };
        Ok(Self {
            runtime,
            handle,
            filtered,
        })
    }

    /// Netlink for `ns`: the socket is opened inside it on a dedicated thread, then used from here.
    pub fn in_netns(ns: &Netns) -> Result<Self, NetError> {
        let runtime = runtime()?;
        let rt = runtime.handle().clone();
        let (handle, filtered) = run_in(ns, move || {
            let _entered = rt.enter();
            connect()
        })??;
        Ok(Self {
            runtime,
            handle,
            filtered,
        })
    }
}
