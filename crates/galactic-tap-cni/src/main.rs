//! `galactic-tap-cni`: see the crate description. Its operations arrive with the issue that builds them;
//! until then ADD refuses with a clear error and STATUS reports the plugin as not available,
//! so a runtime never believes an attachment was made.

use galactic_core::cni::{run, CniError, CniResult, Plugin, Request};
use std::process::ExitCode;

struct NotYetBuilt;

const WHY: &str = "galactic-tap-cni: this build does not implement attachments yet";

impl Plugin for NotYetBuilt {
    fn name(&self) -> &'static str {
        "galactic-tap-cni"
    }
    fn add(&self, _req: &Request) -> Result<CniResult, CniError> {
        Err(CniError::internal(WHY))
    }
    fn del(&self, _req: &Request) -> Result<(), CniError> {
        // Nothing is ever created, so there is nothing to release.
        Ok(())
    }
    fn check(&self, _req: &Request) -> Result<(), CniError> {
        Err(CniError::internal(WHY))
    }
    fn status(&self, _req: &Request) -> Result<(), CniError> {
        Err(CniError::not_available(WHY))
    }
    fn gc(&self, _req: &Request) -> Result<(), CniError> {
        Ok(())
    }
}

fn main() -> ExitCode {
    run(&NotYetBuilt)
}
