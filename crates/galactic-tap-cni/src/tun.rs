//! Creating the tap: a persistent device in the host namespace that the VMM opens by name.
//!
//! The kernel does not create tun/tap devices through rtnetlink, so they are made the way
//! `ip tuntap add` does: `TUNSETIFF` on `/dev/net/tun`, then `TUNSETPERSIST` so the device outlives
//! the file descriptor, and the VMM attaches to it later by name.

use crate::options::TapOptions;
use galactic_core::net::NetError;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;

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

#[cfg(test)]
mod tests {
    use super::*;
    use galactic_core::net::netns::{run_in, Netns};
    use galactic_testkit::privileged::TestNetns;

    #[test]
    fn tap_is_persistent_with_the_requested_options() {
        galactic_testkit::privileged!();
        let host = TestNetns::new("tap");
        let ns = Netns::open(&host.path()).unwrap();
        let opts = TapOptions {
            owner: Some(54321),
            group: None,
            multi_queue: true,
            vnet_hdr: true,
            dan: false,
        };
        run_in(&ns, || create("G000000001001H", &opts))
            .unwrap()
            .unwrap();
        let link = host.ip_json(&["-d", "link", "show", "G000000001001H"]);
        let info = &link[0]["linkinfo"]["info_data"];
        assert_eq!(info["type"], "tap", "{link}");
        assert_eq!(info["pi"], false);
        assert_eq!(info["vnet_hdr"], true);
        assert_eq!(info["multi_queue"], true);
        assert_eq!(info["persist"], true);
        assert_eq!(
            info["user"], 54321,
            "an unnamed uid is printed as a number: {info}"
        );
    }
}
