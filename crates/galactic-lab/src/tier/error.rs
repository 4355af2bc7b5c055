//! Why a tier failed: one error type for the tiers, each wrapping error kept as its source.
//!
//! A variant's message is its own part only (what was being done); the causes follow as
//! sources, so a caller printing the chain (`anyhow`'s `{:#}`, or [`Chain`]) shows each once.

use galactic_testkit::harness;
use galactic_testkit::runtime::RuntimeError;

/// A tier's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a tier, or one of its steps, failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A search path could not be joined into one variable (a directory with a `:` in it).
    #[error(transparent)]
    JoinPaths(#[from] std::env::JoinPathsError),
    /// A program's output or a file was not the JSON expected.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A name the tier built was not a valid identifier.
    #[error(transparent)]
    Ident(#[from] galactic_core::ident::IdentError),
    /// The test kit's fixtures (a throwaway host, its runtime) failed.
    #[error(transparent)]
    Harness(#[from] harness::Error),
    /// The DaemonSet manifest says something the deployment tier does not apply.
    #[error(transparent)]
    Manifest(#[from] crate::tier::deploy::manifest::ManifestError),
    /// A check of the tier did not hold, or a program it runs failed: the message says which
    /// and what was found.
    #[error("{0}")]
    Failed(String),
    /// What was being done when `source` happened.
    #[error("{what}")]
    Context {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: Box<Error>,
    },
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Self::Harness(e.into())
    }
}

impl Error {
    /// A check that did not hold (or a program that failed), saying what was found.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

/// What was being done, added to an error (as `anyhow::Context` does in xtask).
pub trait Context<T> {
    /// Wraps the error with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Wraps the error with what `what` returns, computed only on error.
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what.into(),
            source: Box::new(e.into()),
        })
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what().into(),
            source: Box::new(e.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Failed(what.into()))
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Failed(what().into()))
    }
}

/// An error and its causes on one line, `: `-separated (what a tier prints on a FAIL line).
pub struct Chain<'a>(pub &'a Error);

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(self.0);
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Chain, Context, Error};

    /// Each cause is shown once, outermost first, as anyhow's `{:#}` shows it.
    #[test]
    fn a_chain_shows_every_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Err::<(), _>(io)
            .context("read the config")
            .context("start Podman")
            .unwrap_err();
        assert_eq!(
            Chain(&e).to_string(),
            "start Podman: read the config: no such file"
        );
        assert_eq!(
            Chain(&Error::failed("c1 does not reach c2")).to_string(),
            "c1 does not reach c2"
        );
    }
}
