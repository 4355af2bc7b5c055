//! `galactic-ipam`: the delegated IPAM plugin of the Galactic CNI chain.
//!
//! - [`config`]: the `ipam` block, validated into an owned plan (code 7 on any error).
//! - [`pool`]: pool arithmetic, one code path for IPv6 and IPv4.
//! - [`request`]: the addresses the runtime asks for (`IP=`, the `ips` capability, `args.cni.ips`).
//! - [`store`]: the node's allocation store (SQLite, one transaction per operation).
//! - [`legacy`]: reading the upstream implementation's records for import.
//! - [`plugin`]: the CNI verbs; [`cli`]: operator commands (`migrate`, `verify`).
//!
//! The design and its reasons: `docs/ipam.md` and `docs/decisions/0003-ipam-store.md`.

pub mod cli;
pub mod config;
pub mod error;
pub mod legacy;
pub mod plugin;
pub mod pool;
pub mod request;
pub mod result;
pub mod rollback;
pub mod store;
