//! The masters' shared flow as runtimes drive it, through both binaries (galactic-cni and
//! galactic-tap-cni), on real kernel objects in throwaway namespaces. One module per topic;
//! privileged tests start with `galactic_testkit::privileged!()`.

mod common;

mod bad_input;
mod chain;
mod conflists;
mod converge;
mod docs;
mod domains;
mod firewall;
mod full_disk;
mod fuzz;
mod go_configs;
mod hostile_nad;
mod killed;
mod last_attachment;
mod mark_mask;
mod overlap;
mod protocol;
mod requests;
mod rotation;
mod router_gc;
mod upgrade;
mod vrf;
mod vrf_domains;
