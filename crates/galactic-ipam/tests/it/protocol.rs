//! The CNI protocol as a runtime sees it, against the built binary.

use galactic_testkit::{protocol_suite, ExpectStatus};
use serde_json::json;
use std::path::Path;

#[test]
fn speaks_the_cni_protocol() {
    protocol_suite(
        Path::new(env!("CARGO_BIN_EXE_galactic-ipam")),
        json!({"name": "net1", "type": "galactic-ipam", "ipam": {
            "type": "galactic-ipam",
            "ipv6_subnet": "fd00:10:ff01::/64",
            "ipv4_subnet": "10.20.0.0/24",
        }}),
        ExpectStatus::Ready,
    );
}
