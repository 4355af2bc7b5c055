//! STATUS for both masters: ready when the kernel side works (netlink; /dev/net/tun for taps),
//! the state directory is writable and the IPAM delegate (if any) is found and ready itself.

use crate::conf::MasterConf;
use crate::error::MasterError;
use crate::error::NotReady;
use galactic_core::attachment::Kind;
use galactic_core::cni::delegate::Delegate;
use galactic_core::cni::{Command, Request};
use std::path::Path;

/// STATUS of a master of `kind`.
pub fn status(kind: Kind, req: &Request) -> Result<(), MasterError> {
    galactic_core::net::readiness(&req.node.state_dir).map_err(NotReady::Node)?;
    if kind == Kind::Tap && !Path::new("/dev/net/tun").exists() {
        return Err(NotReady::NoTun.into());
    }
    let conf = MasterConf::parse(&req.conf.raw)?;
    let Some(plugin_type) = conf.ipam_type.as_deref() else {
        return Ok(());
    };
    let delegate = Delegate::new(plugin_type, &req.env.path);
    delegate.find().map_err(NotReady::Delegate)?;
    Ok(delegate.call(Command::Status, &req.stdin)?)
}
