//! Waiting for the store lock: short, bounded polls instead of SQLite's default busy handler.
//!
//! SQLite's built-in `busy_timeout` sleeps 1, 2, 5, 10, 15, 20, 25… ms between attempts, so a
//! process that misses a lock held for 100 µs waits milliseconds; with 32 concurrent ADDs that
//! backoff, not the work, dominated the tail. Here a waiter polls every 100 µs (a write transaction
//! holds the lock for about that long) and gives up at the configured bound, which turns into
//! CNI code 11.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The bound, in microseconds, shared by every connection of this process (there is one).
static BOUND_US: AtomicU64 = AtomicU64::new(5_000_000);
const POLL: Duration = Duration::from_micros(100);

thread_local! {
    /// When the current wait started (reset at the first retry of each wait).
    static STARTED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Sets the bound for later waits.
pub fn set_bound(bound: Duration) {
    BOUND_US.store(
        u64::try_from(bound.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// SQLite's busy callback: `retries` counts the attempts of the current wait. Returns whether to
/// try again.
pub fn handler(retries: i32) -> bool {
    let now = Instant::now();
    let started = STARTED.with(|s| {
        if retries == 0 || s.get().is_none() {
            s.set(Some(now));
        }
        s.get().unwrap_or(now)
    });
    let bound = Duration::from_micros(BOUND_US.load(Ordering::Relaxed));
    if now.duration_since(started) >= bound {
        return false;
    }
    std::thread::sleep(POLL);
    true
}
