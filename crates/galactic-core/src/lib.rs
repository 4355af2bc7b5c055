//! Everything two or more Galactic CNI plugins share.
//!
//! - [`cni`]: the CNI protocol (1.0.0/1.1.0): command dispatch, environment, configuration envelope,
//!   results, error codes and IPAM delegation by exec.
//! - [`attachment`]: the masters' attachment records, and the chain check every chained plugin
//!   makes against them.
//! - [`ident`]: VPC and attachment identifiers, base62/hex codecs, interface and resource names.
//! - [`ip`]: the address family and assigned-address types both families share.
//! - [`plugins`]: the chain's plugin names and their roles.
//! - [`state`]: node-local state files (one reader, one atomic writer).
//! - [`config`]: the node-level configuration and its resolution order.
//! - [`log`]: JSON-lines logging to the node's log file.
//! - [`rollback`]: the undo stack every ADD uses.
//! - [`lockfile`]: node-wide locks with a bounded wait.
//! - `memcpy`: the release plugins' `memcpy` (static musl builds link it in place of musl's).
//! - `net` (feature `net`): links, addresses, routes, rules, namespaces, routing domains.
//! - `bpf` (feature `bpf`): the eBPF uSID datapath's pinned-map ABI, uSID codec, registration.

pub mod attachment;
#[cfg(feature = "bpf")]
pub mod bpf;
pub mod cni;
pub mod config;
pub mod failpoint;
pub mod ident;
pub mod ip;
pub mod lockfile;
pub mod log;
mod memcpy;
pub mod plugins;
pub mod rollback;
pub mod state;

#[cfg(feature = "net")]
pub mod net;
