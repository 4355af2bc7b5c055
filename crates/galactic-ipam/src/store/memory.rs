//! SQLite's memory comes from the process's Rust allocator.
//!
//! The release plugins are static musl executables (docs/performance.md), and musl's `malloc`
//! maps and unmaps a page for many of the short-lived buffers SQLite takes while it opens the
//! store and runs one transaction: ≈ 30 `mmap`/`munmap` pairs per call, each with a fresh
//! page fault. The Rust allocator (dlmalloc in those builds) keeps freed memory for reuse.
//! Installed once per process, before the first connection; every build uses it, so the tests
//! run the code the plugins run.
//!
//! Each block carries its size in a 16-byte header (SQLite asks for sizes back, and the Rust
//! allocator needs them to free); 16 keeps the 8-byte alignment SQLite requires and more.

use rusqlite::ffi;
use std::alloc::Layout;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const HEADER: usize = 16;

/// Blocks SQLite has taken from [`x_malloc`] in this process (the tests' evidence that it
/// runs on this allocator).
static BLOCKS: AtomicU64 = AtomicU64::new(0);

/// Points SQLite's allocator at Rust's; whether SQLite took it. Best effort: when something in
/// this process already initialised SQLite (a connection opened outside the store), SQLite
/// refuses (`SQLITE_MISUSE`) and keeps its own allocator, which works the same, only slower.
pub fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let methods = ffi::sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: called once, before this code opens any connection; SQLite copies the
        // methods before returning, and the functions below honour its contract (see each).
        let code = unsafe {
            ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_MALLOC,
                &methods as *const ffi::sqlite3_mem_methods,
            )
        };
        code == ffi::SQLITE_OK
    })
}

/// The layout of a block holding `size` bytes for SQLite behind the header.
fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, HEADER).ok()
}

/// The block's start and its size, from a pointer SQLite holds.
///
/// # Safety
/// `p` must come from [`x_malloc`] or [`x_realloc`] and not have been freed.
unsafe fn block(p: *mut c_void) -> (*mut u8, usize) {
    // SAFETY: per the contract, `p` is HEADER bytes into a live block whose first word is
    // the size written there.
    unsafe {
        let base = p.cast::<u8>().sub(HEADER);
        (base, base.cast::<usize>().read())
    }
}

/// Stores `size` in the header at `base` and returns the pointer SQLite gets.
///
/// # Safety
/// `base` must be a live block of at least `size + HEADER` bytes, aligned to HEADER.
unsafe fn hand_out(base: *mut u8, size: usize) -> *mut c_void {
    // SAFETY: per the contract, the header is inside the block and aligned for a usize.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(HEADER).cast()
    }
}

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    let Some(layout) = usize::try_from(n).ok().and_then(layout) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (it includes the header).
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return std::ptr::null_mut();
    }
    BLOCKS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: `base` was just allocated with room for the header and `n` bytes.
    unsafe { hand_out(base, layout.size() - HEADER) }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only what its xMalloc/xRealloc returned, once.
    let (base, size) = unsafe { block(p) };
    if let Some(layout) = layout(size) {
        // SAFETY: the block was allocated with exactly this layout.
        unsafe { std::alloc::dealloc(base, layout) };
    }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: forwarding to the allocator above.
        return unsafe { x_malloc(n) };
    }
    let Some(new) = usize::try_from(n).ok().and_then(layout) else {
        return std::ptr::null_mut();
    };
    // SAFETY: SQLite reallocates only live blocks of its xMalloc/xRealloc.
    let (base, size) = unsafe { block(p) };
    let Some(old) = layout(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `base` was allocated with `old`; the new size is non-zero and fits a Layout.
    let moved = unsafe { std::alloc::realloc(base, old, new.size()) };
    if moved.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `moved` is a live block of the new size.
    unsafe { hand_out(moved, new.size() - HEADER) }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: SQLite asks only about live blocks of its xMalloc/xRealloc.
    let (_, size) = unsafe { block(p) };
    c_int::try_from(size).unwrap_or(c_int::MAX)
}

/// What SQLite should ask for to get `n` bytes: `n` rounded up to 8, as its own allocator
/// reports (a block holds exactly what was asked for; SQLite then asks for the rounded size).
unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    n.checked_add(7).map_or(n, |m| m & !7)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_sizes_through_realloc_and_free() {
        // SAFETY: the allocator's contract exercised directly, as SQLite uses it.
        unsafe {
            let p = x_malloc(13);
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            assert_eq!(x_size(p), 13);
            p.cast::<u8>().write_bytes(0xab, 13);
            let q = x_realloc(p, 4000);
            assert_eq!(x_size(q), 4000);
            assert_eq!(q.cast::<u8>().add(12).read(), 0xab);
            let r = x_realloc(q, 5);
            assert_eq!(x_size(r), 5);
            assert_eq!(r.cast::<u8>().add(4).read(), 0xab);
            x_free(r);
            assert!(x_malloc(-1).is_null());
            assert_eq!(x_roundup(13), 16);
            assert_eq!(x_size(std::ptr::null_mut()), 0);
        }
    }

    /// Every connection in this crate is opened by the store, which installs the allocator
    /// first: a store's work allocates through it.
    #[test]
    fn the_store_runs_sqlite_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let before = BLOCKS.load(Ordering::Relaxed);
        let store =
            super::super::Store::open_or_create(dir.path(), std::time::Duration::from_secs(5))
                .unwrap();
        drop(store);
        assert!(
            install(),
            "SQLite was initialised before the store installed its allocator"
        );
        assert!(BLOCKS.load(Ordering::Relaxed) > before);
    }
}
