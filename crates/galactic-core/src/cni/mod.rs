//! The CNI protocol layer: what every plugin binary speaks to its runtime.
//!
//! A plugin implements [`Plugin`] and hands control to [`run`]; everything about environment
//! variables, stdin, version negotiation, result printing and error codes lives here once.

pub mod conf;
mod dispatch;
pub mod env;
pub mod error;
pub mod result;
pub mod version;

pub use conf::{Attachment, NetConf};
pub use dispatch::{execute, run, run_step, version_flag, version_line, Plugin, Request};
pub use env::{CniArgs, CniEnv, Command, ContainerId, IfName};
pub use error::{CniError, Code, ErrorCode};
pub use result::{CniResult, Dns, Interface, IpConfig, Route};
pub use version::SpecVersion;
