//! The calls a layout is made from and checked against: ADD, CHECK and DEL of our full chain,
//! once with each master (`galactic-cni`, `galactic-tap-cni`, each delegating to
//! `galactic-ipam`), and of the reference chain (`bridge` + `host-local`). Every chain entry runs
//! behind a wrapper (a `sh` script exec'ing a launcher such as valgrind or rss-probe on the real
//! binary); delegated plugins are found in the real bin dir, so the launcher follows them.

use anyhow::{Context, Result};
use galactic_core::plugins;
use galactic_testkit::harness::Entered;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The commands measured, in the order a runtime issues them.
pub const COMMANDS: [&str; 3] = ["ADD", "CHECK", "DEL"];

/// Attachments per chain: the first ADD on a node takes paths (state directories, the first
/// routing domain) that later ones do not, and both count.
const ATTACHMENTS: usize = 2;

/// Our chain with `master` first, as `bench-chain` runs it (local publisher).
pub fn ours(master: &str) -> Conflist {
    Conflist::new(
        "1.0.0",
        "layout-galactic",
        vec![
            json!({"type": master, "vpc": "1", "vpcattachment": "1", "ipam": {
                "type": plugins::IPAM, "ipv6_subnet": "fd90::/64", "ipv4_subnet": "10.90.0.0/16"}}),
            json!({"type": plugins::ROUTE, "vpc": "1", "vpcattachment": "1",
                "terminations": [{"network": "fd91::/64"}, {"network": "10.91.0.0/24"}]}),
            json!({"type": plugins::BGP, "vpc": "1", "vpcattachment": "1"}),
        ],
    )
}

/// The reference chain of `bench-chain`.
pub fn reference(work: &Path) -> Conflist {
    Conflist::new(
        "1.0.0",
        "layout-reference",
        vec![
            json!({"type": "bridge", "bridge": "glayout0", "isGateway": true, "ipMasq": false,
                "ipam": {"type": "host-local", "dataDir": work.join("host-local"),
                         "ranges": [[{"subnet": "fd92::/64"}], [{"subnet": "10.92.0.0/16"}]]}}),
        ],
    )
}

/// Writes `dir/<type>`, a wrapper for each chain entry of `list`: `launch(real binary)` is the
/// command line it execs (already shell-quoted where needed).
pub fn wrappers(
    list: &Conflist,
    bins: &Path,
    dir: &Path,
    launch: &dyn Fn(&str, &Path) -> String,
) -> Result<()> {
    for i in 0..list.plugins.len() {
        let name = list.plugin_type(i);
        let script = dir.join(name);
        std::fs::write(
            &script,
            format!("#!/bin/sh\nexec {}\n", launch(name, &bins.join(name))),
        )
        .with_context(|| format!("write {}", script.display()))?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// Runs [`ATTACHMENTS`] attachments of each of `lists` (ADD, CHECK, DEL), every chain entry
/// through its wrapper in `wrappers` and every delegate from `bins` of its list, in a throwaway
/// host namespace.
pub fn run(lists: &[(&Conflist, &Path)], wrappers: &Path) -> Result<()> {
    let host = TestNetns::new("glayout-host");
    let _entered = Entered::new(&host)?;
    let node = TestNode::new(json!({"log_level": "info", "routing_domain": "auto"}));
    for (list, bins) in lists {
        let mut runtime = Runtime::new(&node, bins, None);
        for i in 0..list.plugins.len() {
            let name = list.plugin_type(i);
            runtime = runtime.binary(name, &wrappers.join(name));
        }
        for n in 0..ATTACHMENTS {
            let pod = TestNetns::new("glayout-pod");
            let att = Attachment::new(
                &format!("layout{n:04}"),
                &pod.path().display().to_string(),
                "eth0",
            );
            let what = |command: &str| format!("{command} of {}", list.plugin_type(0));
            let _: Value = runtime.add(list, &att).with_context(|| what("ADD"))?;
            runtime.check(list, &att).with_context(|| what("CHECK"))?;
            runtime.del(list, &att).with_context(|| what("DEL"))?;
        }
    }
    Ok(())
}
