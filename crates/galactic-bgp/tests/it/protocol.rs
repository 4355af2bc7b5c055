//! The CNI protocol as a runtime sees it, against the built binary.

use galactic_testkit::{protocol_suite, ExpectStatus};
use serde_json::json;
use std::path::Path;

#[test]
fn speaks_the_cni_protocol() {
    protocol_suite(
        Path::new(env!("CARGO_BIN_EXE_galactic-bgp")),
        json!({"name": "net1", "type": "galactic-bgp", "vpc": "1", "vpcattachment": "1"}),
        ExpectStatus::Ready,
    );
}
