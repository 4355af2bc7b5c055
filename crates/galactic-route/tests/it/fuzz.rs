//! Fuzzing of the galactic-route stanza and the `prevResult` it reads, through the binary (the
//! parser lives in the binary crate): ADD, CHECK and DEL of mutated inputs in a throwaway host
//! namespace never panic and always answer with a proper CNI error. Seeds:
//! `fuzz/corpus/route-stanza/`.

use galactic_testkit::fuzz::plugin_campaign;

#[test]
fn route_stanza() {
    galactic_testkit::privileged!();
    plugin_campaign(
        "galactic-route",
        "route-stanza",
        &["ADD", "CHECK", "DEL"],
        48,
    );
}
