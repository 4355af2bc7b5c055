//! The tiers `cargo xtask test` runs after the native suites.

pub mod deploy;
