//! The production-kernel tier's parts the lab holds: fetching and unpacking its guest kernel
//! and finding its tools ([`provision`]), which `cargo xtask setup` uses too.

pub mod provision;
