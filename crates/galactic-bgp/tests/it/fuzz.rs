//! Fuzzing of the galactic-bgp stanza and the `prevResult` it infers the attachment from (one,
//! two or no sandboxed interfaces, addresses of either family), through the binary with the
//! local publisher: ADD, CHECK and DEL of mutated inputs never panic and always answer with a
//! proper CNI error. Seeds: `fuzz/corpus/bgp-stanza/`.

use galactic_testkit::fuzz::plugin_campaign;

#[test]
fn bgp_stanza() {
    galactic_testkit::privileged!();
    plugin_campaign("galactic-bgp", "bgp-stanza", &["ADD", "CHECK", "DEL"], 48);
}
