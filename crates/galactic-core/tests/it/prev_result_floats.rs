//! A chained plugin passes `prevResult` on unchanged (CNI spec §5, C25), floats included.

use galactic_core::cni::NetConf;

/// Found by `prev_result_both_versions`: without serde_json's exact float parsing, a float in an
/// unknown `prevResult` field changed in its last digit on the way through a chained plugin.
#[test]
fn prev_result_floats_pass_through_exactly() {
    let stdin = br#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","x":[4.882630993627448e+43,0.1,1e-300]}]}}"#;
    let prev = NetConf::decode(stdin)
        .and_then(|c| c.prev_result())
        .expect("decodes")
        .expect("has a prevResult");
    let text = serde_json::to_string(&prev).expect("serialises");
    assert!(
        text.contains("4.882630993627448e+43") && text.contains("1e-300"),
        "floats changed: {text}"
    );
}
