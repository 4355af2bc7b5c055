//! The campaign's own tests: a short campaign finds nothing, and its checks can fail.

use super::*;

/// The CI pass: a short campaign with every kind of fault must find nothing.
#[test]
fn short_crash_campaign_finds_no_leak_or_duplicate() {
    galactic_testkit::privileged!();
    let lab = Lab::for_tests("crash").expect("lab");
    let report = campaign(&lab, 60, Some(60), Rng::time_seed()).expect("campaign runs");
    println!("{report}");
    assert!(report.kills > 0, "no process was killed: {report:?}");
    report.verdict().expect("invariants hold");
}

/// The checks can fail: an attachment the runtime forgot (no DEL, no GC yet) is reported.
#[test]
fn a_forgotten_attachment_is_a_leak() {
    galactic_testkit::privileged!();
    let lab = Lab::for_tests("leak").expect("lab");
    let mut c = Campaign {
        lab: &lab,
        rng: Rng::new(7),
        live: Vec::new(),
        report: Report::default(),
        next_id: 0,
        typical: BTreeMap::new(),
    };
    let a = c.new_attachment();
    assert!(matches!(c.add(&a, &Fault::None), Ok(Ending::Done(_))));
    c.quick_check("forgotten").expect("check runs");
    let leaks = c.report.leaks.join("\n");
    assert!(leaks.contains("1 attachments / 2 leases"), "{leaks}");
    assert!(leaks.contains("host interface"), "{leaks}");
    assert!(matches!(c.del(&a, &Fault::None), Ok(Ending::Done(_))));
}

#[test]
fn rng_is_deterministic_per_seed() {
    let (mut a, mut b) = (Rng::new(42), Rng::new(42));
    let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
    let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
    assert_eq!(xs, ys);
    assert!(xs.windows(2).all(|w| w[0] != w[1]));
}
