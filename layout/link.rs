// Shared by the plugin crates' build scripts (`#[path]`-included): links each release plugin
// with its hot-code layout, `layout/<binary>.ld` (docs/performance.md, decision 0063).

use std::path::PathBuf;

/// Passes `layout/<bin>.ld` to the linker for each of `bins` in release builds.
pub fn link(bins: &[&str]) {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../../layout");
    println!("cargo:rerun-if-changed={}", dir.display());
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    for bin in bins {
        let script = dir.join(format!("{bin}.ld"));
        println!("cargo:rerun-if-changed={}", script.display());
        if script.is_file() {
            println!("cargo:rustc-link-arg-bin={bin}=-Wl,-T,{}", script.display());
        }
    }
}
