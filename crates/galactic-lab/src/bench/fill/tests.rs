//! The harness at a tiny size, so it cannot rot: both chains filled and probed, the kernel
//! objects counted, and nothing left behind. A behaviour test, not a timing test.

use super::*;

/// Debian's reference plugins, when installed here.
fn reference() -> Option<&'static Path> {
    let dir = Path::new("/usr/lib/cni");
    ["bridge", "host-local"]
        .iter()
        .all(|p| dir.join(p).is_file())
        .then_some(dir)
}

fn row(report: &Report, chain: Chain, live: usize) -> &Row {
    report
        .rows
        .iter()
        .find(|r| r.chain == chain && r.live == live)
        .unwrap_or_else(|| panic!("no {chain:?} row at {live}: {report:?}"))
}

/// Two levels, two VPCs, one round: every verb of every plugin measured, objects counted.
#[test]
fn a_tiny_fill_measures_every_verb_and_leaves_nothing() {
    galactic_testkit::privileged!();
    let reference = reference();
    if reference.is_none() {
        eprintln!(
            "{}: Debian's containernetworking-plugins are not installed; our chain only",
            galactic_testkit::test_name!()
        );
    }
    let options = Options {
        levels: vec![4, 0],
        vpcs: vec![2],
        iterations: 1,
        backend: None,
        workers: 2,
    };
    let paths = Paths {
        ours: None,
        reference,
    };
    let report = run(&paths, &options, &|step| eprintln!("{step}")).expect("the bench runs");
    println!("{}", table(&report));

    let (empty, full) = (row(&report, Chain::Ours, 0), row(&report, Chain::Ours, 4));
    assert_eq!((full.vpcs, full.filled), (2, 4), "{full:?}");
    for verb in Verb::ALL {
        let s = &full.verbs[&verb];
        assert_eq!(s.wall.len(), 1, "{verb:?}: {s:?}");
        for plugin in ["galactic-cni", "galactic-route", "galactic-bgp"] {
            assert_eq!(s.stages[plugin].len(), 1, "{verb:?} {plugin}: {s:?}");
            assert_eq!(
                s.own[plugin].len(),
                1,
                "{verb:?} {plugin}'s own time: {s:?}"
            );
        }
    }
    assert!(full.verbs[&Verb::Add].own.contains_key("galactic-ipam"));
    // Each live attachment has its host interface, and at least its pod's and its
    // terminations' routes.
    assert!(full.objects.links >= empty.objects.links + 4, "{report:?}");
    assert!(
        full.objects.routes4 >= empty.objects.routes4 + 8,
        "{report:?}"
    );
    assert!(
        full.objects.routes6 >= empty.objects.routes6 + 8,
        "{report:?}"
    );
    assert_ne!(report.backend, "none", "no routing domain was found");

    if reference.is_some() {
        let full = row(&report, Chain::Reference, 4);
        assert_eq!(full.filled, 4);
        assert!(!full.verbs.contains_key(&Verb::Gc), "1.0.0 has no GC");
        assert_eq!(full.verbs[&Verb::Del].stages["bridge"].len(), 1);
        let empty = row(&report, Chain::Reference, 0);
        assert!(full.objects.links >= empty.objects.links + 4, "{report:?}");
    }
    assert_eq!(report.leftovers, Vec::<String>::new());
    assert!(table(&report).contains("| ours | 2 | 4 |"));
}
