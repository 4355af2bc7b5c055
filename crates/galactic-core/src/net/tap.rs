//! Persistent tap devices for VM workloads.
//!
//! The kernel does not create tun/tap devices through rtnetlink, so they are made the way
//! `ip tuntap add` does: `TUNSETIFF` on `/dev/net/tun`, then `TUNSETPERSIST` so the device outlives
//! the file descriptor, and the VMM attaches to it later by name.

use super::NetError;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;

/// How the tap is created (the VMM's needs; upstream's defaults when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapOptions {
    /// Owning user id (a VMM running unprivileged).
    pub owner: Option<u32>,
    /// Owning group id.
    pub group: Option<u32>,
    /// `IFF_MULTI_QUEUE`: one queue per vCPU.
    pub multi_queue: bool,
    /// `IFF_VNET_HDR`: virtio-net header offloads.
    pub vnet_hdr: bool,
}

/// Creates the persistent tap `name` (in the calling thread's namespace).
pub fn create(name: &str, options: &TapOptions) -> Result<(), NetError> {
    let what = || format!("create tap {name}");
    let tun = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|source| NetError::Io {
            what: what(),
            source,
        })?;
    // No packet-information header: every VMM attaches with IFF_NO_PI.
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_TUN_EXCL;
    if options.multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    if options.vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    let fd = tun.as_raw_fd();
    // SAFETY: `fd` is an open /dev/net/tun descriptor and `req` a valid, initialised ifreq that
    // outlives the call; TUNSETIFF reads and writes only within it.
    ioctl(unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut req) }, what)?;
    if let Some(uid) = options.owner {
        // SAFETY: TUNSETOWNER takes its argument by value.
        ioctl(
            unsafe { libc::ioctl(fd, libc::TUNSETOWNER, libc::c_ulong::from(uid)) },
            what,
        )?;
    }
    if let Some(gid) = options.group {
        // SAFETY: TUNSETGROUP takes its argument by value.
        ioctl(
            unsafe { libc::ioctl(fd, libc::TUNSETGROUP, libc::c_ulong::from(gid)) },
            what,
        )?;
    }
    // SAFETY: TUNSETPERSIST takes its argument by value.
    ioctl(
        unsafe { libc::ioctl(fd, libc::TUNSETPERSIST, 1 as libc::c_ulong) },
        what,
    )
}

fn ifreq(name: &str) -> Result<libc::ifreq, NetError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(NetError::Conflict(format!(
            "invalid interface name {name:?}"
        )));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

fn ioctl(rc: libc::c_int, what: impl FnOnce() -> String) -> Result<(), NetError> {
    if rc < 0 {
        return Err(NetError::kernel(what(), io::Error::last_os_error()));
    }
    Ok(())
}
