//! Named failure points for rollback tests.
//!
//! In debug builds, `GALACTIC_FAILPOINTS=name[,name…]` makes [`hit`] fail at those points, so a
//! test can stop an ADD after any step and prove that everything the ADD created is undone.
//! `name:kill` instead SIGKILLs the process at that point (no rollback, no destructors: a crash
//! exactly there), for the crash campaign's recovery checks. `name:pause` sleeps there for
//! [`PAUSE`] and carries on, so a test can hold a process at one step while another runs (an
//! interleaving that would otherwise be left to chance). In release builds [`hit`] compiles to
//! nothing.

/// How long a `name:pause` failure point holds the process.
pub const PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// A failure point that was armed and hit. Each plugin's error type wraps it (code 999: it
/// stands for an unexpected failure at that step).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failpoint {name} triggered")]
pub struct Injected {
    /// The failure point.
    pub name: String,
}

/// Fails when `name` is armed (debug builds only).
#[inline]
pub fn hit(name: &str) -> Result<(), Injected> {
    #[cfg(debug_assertions)]
    {
        let armed = std::env::var("GALACTIC_FAILPOINTS").unwrap_or_default();
        for point in armed.split(',').map(str::trim) {
            if point == name {
                return Err(Injected {
                    name: name.to_owned(),
                });
            }
            if point.strip_suffix(":pause") == Some(name) {
                std::thread::sleep(PAUSE);
            }
            if point.strip_suffix(":kill") == Some(name) {
                // If raising fails the process carries on, which the caller sees as no crash.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    let _ = name;
    Ok(())
}
