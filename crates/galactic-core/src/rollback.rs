//! An undo stack for multi-step operations.
//!
//! Every step that creates something pushes its undo right after it succeeds. [`Rollback::commit`]
//! disarms the stack once the whole operation succeeded; otherwise the undos run in reverse order,
//! either through [`Rollback::unwind`] (which logs what failed and returns the original error
//! unchanged) or when the stack is dropped (an early `?` return). An undo that fails is logged,
//! and the remaining undos still run: the original error is never masked.

use crate::log;
use serde_json::json;
use std::fmt::Display;

type Undo<'a> = Box<dyn FnOnce() -> Result<(), String> + 'a>;

/// The undo stack of one operation.
#[must_use = "a rollback that is neither committed nor unwound undoes everything when dropped"]
pub struct Rollback<'a> {
    steps: Vec<(String, Undo<'a>)>,
}

impl Default for Rollback<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Rollback<'a> {
    /// An empty stack.
    pub fn new() -> Self {
        Self { steps: Vec::new() }
    }

    /// Registers the undo of a step that has just succeeded. `what` names it in logs.
    pub fn push<E: Display>(
        &mut self,
        what: impl Into<String>,
        undo: impl FnOnce() -> Result<(), E> + 'a,
    ) {
        self.steps.push((
            what.into(),
            Box::new(move || undo().map_err(|e| e.to_string())),
        ));
    }

    /// Number of registered undos.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The operation succeeded: keep everything.
    pub fn commit(mut self) {
        self.steps.clear();
    }

    /// The operation failed with `cause`: undo everything in reverse and hand `cause` back.
    pub fn unwind<E: Display>(mut self, cause: E) -> E {
        log::error(
            "rolling back after a failed step",
            json!({"err": cause.to_string(), "steps": self.steps.len()}),
        );
        self.run_undos();
        cause
    }

    fn run_undos(&mut self) {
        while let Some((what, undo)) = self.steps.pop() {
            match undo() {
                Ok(()) => log::debug("rollback: undone", json!({"step": what})),
                Err(e) => log::error("rollback: undo failed", json!({"step": what, "err": e})),
            }
        }
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        self.run_undos();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn unwind_runs_undos_in_reverse_and_returns_the_cause() {
        let done = RefCell::new(Vec::new());
        let mut rb = Rollback::new();
        rb.push("a", || -> Result<(), String> {
            done.borrow_mut().push("a");
            Ok(())
        });
        rb.push("b", || -> Result<(), String> { Err("b failed".into()) });
        rb.push("c", || -> Result<(), String> {
            done.borrow_mut().push("c");
            Ok(())
        });
        let cause = rb.unwind("step d failed");
        assert_eq!(cause, "step d failed", "the original error is kept");
        assert_eq!(
            *done.borrow(),
            vec!["c", "a"],
            "reverse order, failures do not stop it"
        );
    }

    #[test]
    fn commit_disarms_and_drop_undoes() {
        let count = RefCell::new(0);
        let mut rb = Rollback::new();
        rb.push("x", || -> Result<(), String> {
            *count.borrow_mut() += 1;
            Ok(())
        });
        rb.commit();
        assert_eq!(*count.borrow(), 0);

        fn fails(count: &RefCell<i32>) -> Result<(), String> {
            let mut rb = Rollback::new();
            rb.push("y", || -> Result<(), String> {
                *count.borrow_mut() += 1;
                Ok(())
            });
            Err("early return".to_owned())?;
            rb.commit();
            Ok(())
        }
        assert!(fails(&count).is_err());
        assert_eq!(*count.borrow(), 1, "dropping an armed stack undoes");
    }
}
