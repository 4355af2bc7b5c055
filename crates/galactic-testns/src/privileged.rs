//! Throwaway network namespaces for privileged tests.
//!
//! Every kernel test runs against namespaces it creates and deletes (also when it fails: cleanup
//! is in `Drop`), so the machine's own links, routes, rules and sysctls are never touched. The
//! plugin's "host" is itself such a namespace: plugin processes are started inside it.
//!
//! Without root, privileged tests report themselves as skipped, except under `CI=true`, where a
//! missing capability fails the test instead: CI must never skip them silently. A test says it is
//! privileged with [`privileged!`](crate::privileged!) as its first statement; the macro names
//! the test itself, so the skip line always names the function it stands in.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Returns from the calling test, after printing `SKIPPED <test path>: <why>`, when privileged
/// tests cannot run here; panics under `CI=true` instead. The first statement of every
/// privileged test:
///
/// ```ignore
/// #[test]
/// fn a_pod_gets_its_routes() {
///     galactic_testkit::privileged!();
///     // … the test, as root
/// }
/// ```
///
/// The name is the test's path as the test harness lists it ([`test_name!`](crate::test_name!)),
/// so it cannot drift from the function name. For a test returning `()` only.
#[macro_export]
macro_rules! privileged {
    () => {
        if !$crate::privileged::privileged($crate::test_name!()) {
            return;
        }
    };
}

/// The path of the enclosing function as the test harness lists it (`chain::a_pod_gets_its_routes`
/// for `fn a_pod_gets_its_routes` in `tests/it/chain.rs`): what [`privileged!`](crate::privileged!)
/// prints, and what a test's own `SKIPPED` lines should name.
#[macro_export]
macro_rules! test_name {
    () => {{
        // A nested fn item's type name is the enclosing function's path plus `::here`.
        fn here() {}
        $crate::privileged::test_path(::std::any::type_name_of_val(&here))
    }};
}

/// The test harness's name of the function whose nested `fn here` has type name `type_name`:
/// without the crate (the harness lists paths inside the test binary), the closures an async test
/// body adds, and `here`.
pub fn test_path(type_name: &str) -> &str {
    let path = type_name.strip_suffix("::here").unwrap_or(type_name);
    let mut path = path.split_once("::").map_or(path, |(_crate, rest)| rest);
    while let Some(outer) = path.strip_suffix("::{{closure}}") {
        path = outer;
    }
    path
}

/// Whether privileged tests can run here; prints `SKIPPED {test}: <why>` when they cannot, and
/// panics instead under `CI=true`. What [`privileged!`](crate::privileged!) runs; tests call the
/// macro, which names them (the masters' VRF fixture, `inspect::vrf_host`, calls this with the
/// name its caller passes).
pub fn privileged(test: &str) -> bool {
    let reason = if !nix::unistd::geteuid().is_root() {
        Some("not running as root")
    } else if Command::new("ip")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        Some("the `ip` command (iproute2) is missing")
    } else {
        None
    };
    match reason {
        None => true,
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: privileged test cannot run under CI=true: {why}")
        }
        Some(why) => {
            eprintln!("SKIPPED {test}: {why}");
            false
        }
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`ip netns add`), deleted on drop with everything in it.
pub struct TestNetns {
    name: String,
}

impl TestNetns {
    /// Creates a fresh namespace with `lo` up; `tag` makes the name readable in `ip netns list`.
    pub fn new(tag: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("gt-{tag}-{}-{n}", std::process::id());
        run(&["ip", "netns", "add", &name]);
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// A fresh namespace set up as the plugins' host, with what a node running them has: on
    /// kernels without `net.ipv6.conf.*.force_forwarding` (before 6.17) the plugins need
    /// `net.ipv6.conf.all.forwarding=1` (docs/routing-domains.md). Newer kernels keep the
    /// default 0, so the per-interface `force_forwarding` the plugins set stays tested.
    pub fn node_host(tag: &str) -> Self {
        let ns = Self::new(tag);
        if !Path::new("/proc/sys/net/ipv6/conf/default/force_forwarding").exists() {
            run(&[
                "ip",
                "netns",
                "exec",
                &ns.name,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.forwarding=1",
            ]);
        }
        ns
    }

    /// The namespace name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its path (what a runtime passes as `CNI_NETNS`).
    pub fn path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(&self.name)
    }

    /// Runs `ip -n <ns> ARGS`, panicking on failure; returns stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "-n", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Runs `ip -n <ns> ARGS`; returns (success, stdout+stderr) without panicking.
    pub fn try_ip(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("ip")
            .args(["-n", &self.name])
            .args(args)
            .output()
            .expect("run ip");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// Runs an arbitrary command inside the namespace (`ip netns exec`).
    pub fn exec(&self, argv: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv)
            .output()
            .expect("run ip netns exec")
    }

    /// `ip -j …` parsed as JSON.
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        let text = self.ip(&full);
        if text.trim().is_empty() {
            return serde_json::Value::Array(vec![]);
        }
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("ip -j {args:?}: {e}: {text}"))
    }

    /// Reads a sysctl inside the namespace.
    pub fn sysctl(&self, key: &str) -> String {
        let out = self.exec(&["sysctl", "-n", key]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn run(argv: &[&str]) -> String {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(
        out.status.success(),
        "{argv:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::test_path;

    #[test]
    fn a_test_path_is_the_harness_name_of_the_function() {
        assert_eq!(
            test_path("it::chain::a_pod_routes::here"),
            "chain::a_pod_routes"
        );
        assert_eq!(
            test_path("galactic_core::net::tests::t::{{closure}}::{{closure}}::here"),
            "net::tests::t"
        );
        assert_eq!(test_path("fuzz::netconf::here"), "netconf");
    }

    #[test]
    fn the_macro_names_the_enclosing_test() {
        assert_eq!(
            crate::test_name!(),
            "privileged::tests::the_macro_names_the_enclosing_test"
        );
    }
}
