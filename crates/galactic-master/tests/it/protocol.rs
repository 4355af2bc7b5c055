//! The CNI protocol as a runtime sees it, against both built master binaries.

use galactic_testkit::{protocol_suite, ExpectStatus};
use serde_json::json;

#[test]
fn the_veth_master_speaks_the_cni_protocol() {
    protocol_suite(
        galactic_testkit::plugin_binary("galactic-cni"),
        json!({"name": "net1", "type": "galactic-cni", "vpc": "1", "vpcattachment": "1"}),
        ExpectStatus::Ready,
    );
}

#[test]
fn the_tap_master_speaks_the_cni_protocol() {
    protocol_suite(
        galactic_testkit::plugin_binary("galactic-tap-cni"),
        json!({"name": "net1", "type": "galactic-tap-cni", "vpc": "1", "vpcattachment": "1"}),
        ExpectStatus::Ready,
    );
}
