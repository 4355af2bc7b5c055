//! The publish algorithm, over any [`ObjectStore`](crate::store::ObjectStore) and in the typed
//! resources of `galactic_kube`: this node's router, the VPC's VRF instance (VRF id
//! allocation), the attachment's advertisement, and their retraction.

mod advertisement;
mod retract;
mod router;
mod vrf;

pub use advertisement::{first_advertisement, publish_advertisement, AdvertisementInput, Applied};
pub use retract::{
    leave_legacy_advertisement, migrate_local_legacy, retire_vrf_instance, retract_advertisement,
    Retraction,
};
pub use router::{lookup_router, router_of, Router};
pub use vrf::{
    ensure_vrf_instance, plan_claim, routers_instances, Allocation, PlannedClaim, VrfInstance,
    VrfTarget,
};

use std::time::Duration;

/// Lowest and highest VRF id handed out (the uSID argument is 12 bits; 0 is reserved).
pub const VRF_ID_RANGE: std::ops::RangeInclusive<u32> = 1..=4095;
/// Attempts at a contended write before giving up with code 11.
pub const MAX_ATTEMPTS: u32 = 8;

/// A short, process-dependent wait so that two colliding writers do not retry in lockstep.
fn jitter(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % 40;
    Duration::from_millis(u64::from(10 * attempt + spread))
}
