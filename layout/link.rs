// Shared by the plugin crates' build scripts (`#[path]`-included): links each static musl
// plugin with galactic-core's `memcpy`, and each release plugin with its hot-code layout,
// `layout/<binary>.ld` (docs/performance.md, decision 0063), and has the linker write a map of
// where every input section went, `<binary>.map` next to the binary, which `cargo xtask
// check-layout` reads to tell whether the script still matches the code.

use std::path::{Path, PathBuf};

/// Set to `off` to link the release plugins without their scripts (to measure what they buy);
/// the map is written either way.
const SWITCH: &str = "GALACTIC_LAYOUT";

/// Passes `layout/<bin>.ld` and `-Map` to the linker for each of `bins` in release builds.
pub fn link(bins: &[&str]) {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../../layout");
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-env-changed={SWITCH}");
    wrap_memcpy(bins);
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let scripts = std::env::var(SWITCH).as_deref() != Ok("off");
    let maps = map_dir();
    for bin in bins {
        let script = dir.join(format!("{bin}.ld"));
        println!("cargo:rerun-if-changed={}", script.display());
        if scripts && script.is_file() {
            println!("cargo:rustc-link-arg-bin={bin}=-Wl,-T,{}", script.display());
        }
        // A few MiB of text written by the link that produces the binary anyway: kept in every
        // release build so the check reads the very link `check-rss` measures, with no second
        // (fat LTO) build.
        let map = maps.join(format!("{bin}.map"));
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,-Map={}", map.display());
    }
}

/// Set to `musl` to link the static musl plugins with musl's own `memcpy` (to measure what
/// galactic-core's buys).
const MEMCPY_SWITCH: &str = "GALACTIC_MEMCPY";

/// Static musl builds on x86_64 call galactic-core's `__wrap_memcpy` wherever they call
/// `memcpy`, musl's own code included (`galactic-core/src/memcpy.rs`, decision 0085).
fn wrap_memcpy(bins: &[&str]) {
    println!("cargo:rerun-if-env-changed={MEMCPY_SWITCH}");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    let ours = std::env::var(MEMCPY_SWITCH).as_deref() != Ok("musl");
    if ours
        && target("CARGO_CFG_TARGET_ENV") == "musl"
        && target("CARGO_CFG_TARGET_ARCH") == "x86_64"
    {
        for bin in bins {
            println!("cargo:rustc-link-arg-bin={bin}=-Wl,--wrap=memcpy");
        }
    }
}

/// The directory of the release binaries (`<target>/<triple>/release`), three levels above the
/// build script's `OUT_DIR` (`…/release/build/<package>-<hash>/out`); `OUT_DIR` itself if the
/// layout is another (the check then reports the map missing).
fn map_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let build = out.parent().and_then(Path::parent);
    match build {
        Some(build) if build.file_name().is_some_and(|n| n == "build") => {
            build.parent().map_or(out.clone(), Path::to_path_buf)
        }
        _ => out,
    }
}
