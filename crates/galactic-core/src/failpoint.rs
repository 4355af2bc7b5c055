//! Named failure points for rollback tests.
//!
//! In debug builds, `GALACTIC_FAILPOINTS=name[,name…]` makes [`hit`] fail at those points, so a
//! test can stop an ADD after any step and prove that everything the ADD created is undone. In
//! release builds [`hit`] compiles to nothing.

use crate::cni::CniError;

/// Fails when `name` is armed (debug builds only).
#[inline]
pub fn hit(name: &str) -> Result<(), CniError> {
    #[cfg(debug_assertions)]
    {
        let armed = std::env::var("GALACTIC_FAILPOINTS").unwrap_or_default();
        if armed.split(',').any(|p| p.trim() == name) {
            return Err(CniError::internal(format!("failpoint {name} triggered")));
        }
    }
    let _ = name;
    Ok(())
}
