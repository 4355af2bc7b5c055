//! One thin, typed, synchronous layer over rtnetlink.
//!
//! A [`Netlink`] owns a netlink socket opened *inside* the namespace it acts on (see
//! [`Netlink::in_netns`]) and a current-thread runtime that drives it, so callers never switch
//! namespaces themselves and never see async code. "Not found" and "already exists" are typed
//! ([`NetError::NotFound`], [`NetError::is_exists`]); each method does one kernel operation.

mod address;
mod link;
mod neighbour;
mod route;
mod rule;

pub use address::AddrFlags;
pub use link::Link;
pub use neighbour::{format_mac, parse_mac, NeighState, Neighbour};
pub use route::{masked, RouteKind, RouteLookup, RouteSpec};
pub use rule::RuleSpec;

use super::netns::{run_in, Netns};
use super::NetError;
use crate::ip::Family;
use netlink_packet_route::AddressFamily;
use rtnetlink::Handle;
use std::io;
use tokio::runtime::{Builder, Runtime};

/// Synchronous netlink access to one network namespace.
pub struct Netlink {
    runtime: Runtime,
    handle: Handle,
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

fn connect() -> Result<Handle, NetError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(|source| NetError::Io {
        what: "open a netlink socket".into(),
        source,
    })?;
    tokio::spawn(connection);
    Ok(handle)
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
        let handle = {
            let _entered = runtime.enter();
            connect()?
        };
        Ok(Self { runtime, handle })
    }

    /// Netlink for `ns`: the socket is opened inside it on a dedicated thread, then used from here.
    pub fn in_netns(ns: &Netns) -> Result<Self, NetError> {
        let runtime = runtime()?;
        let rt = runtime.handle().clone();
        let handle = run_in(ns, move || {
            let _entered = rt.enter();
            connect()
        })??;
        Ok(Self { runtime, handle })
    }
}
