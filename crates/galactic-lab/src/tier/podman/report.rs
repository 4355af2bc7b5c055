//! How the Podman tier's steps report and compare: each step printed PASS or FAIL with its
//! time, equality with both sides shown, two checks at once.

use crate::tier::{Chain, Context, Error, Result};
use std::time::Instant;

/// `a` and `b` at once (a ping that must go unanswered costs its whole wait); both must hold.
pub fn both(
    a: impl FnOnce() -> Result<()> + Send,
    b: impl FnOnce() -> Result<()> + Send,
) -> Result<()> {
    std::thread::scope(|scope| {
        let b = scope.spawn(b);
        let a = a();
        let b = b
            .join()
            .unwrap_or_else(|_| Err(Error::failed("a ping thread panicked")));
        a.and(b)
    })
}

/// Prints one step with PASS/FAIL (and why) and its wall time.
pub fn step<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    let out = f();
    let secs = started.elapsed().as_secs_f64();
    match &out {
        Ok(_) => println!("[PASS] {what} ({secs:.1} s)"),
        Err(e) => println!("[FAIL] {what} ({secs:.1} s): {}", Chain(e)),
    }
    out.context(what)
}

/// `got` must equal `want`; the error shows both.
pub fn expect_eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<()> {
    if got != want {
        fail!("{what}: got {got:?}, want {want:?}");
    }
    Ok(())
}

/// What only `before` and only `after` hold, for a check's message.
pub fn diff(before: &[String], after: &[String]) -> String {
    let gone: Vec<&String> = before.iter().filter(|b| !after.contains(b)).collect();
    let new: Vec<&String> = after.iter().filter(|a| !before.contains(a)).collect();
    format!("before only: {gone:?}; after only: {new:?}")
}
