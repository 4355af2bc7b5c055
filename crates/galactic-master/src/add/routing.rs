//! ADD's routing-domain steps: the backend (before anything changes), the VPC's domain
//! (created, adopted or repaired, see `galactic_core::net::domain`), the VPC gateways, and their
//! undos.

use super::Add;
use crate::addressing;
use crate::converge;
use crate::device::Device;
use crate::error::MasterError;
use crate::retire;
use galactic_core::ident::VpcId;
use galactic_core::ip::Assignment;
use galactic_core::log;
use galactic_core::net::domain::{Change, Choice, Domain, Ensured};
use galactic_core::net::NetError;
use galactic_core::rollback::Rollback;
use serde_json::json;
use std::net::IpAddr;

impl<'a, D: Device> Add<'a, D> {
    /// The backend new routing domains get (`auto` with the Kubernetes publisher and no VRF is
    /// refused: see `galactic_core::net::domain::backend`).
    pub(super) fn choose_backend(&self) -> Result<Choice, MasterError> {
        self.domains
            .choose(self.req.node.routing_domain, self.req.node.publisher)
            .map_err(MasterError::node("choose the routing domain backend"))
    }

    /// Pushes the undo of the VPC's domain for this ADD (created, adopted, joined or not yet
    /// joined). It is pushed before the host interface's, so it runs after that interface is
    /// gone: a VRF keeps its slaves until their links are deleted, and a domain something is
    /// still enslaved to is left in place.
    pub(super) fn push_domain_undo(&'a self, rb: &mut Rollback<'a>) {
        // A domain this ADD did not create goes too when no other record of the VPC is left:
        // the VPC's last DEL kept it for this ADD's record (`retire.rs`), joined or not yet.
        rb.push("routing domain", move || match self.made.take() {
            None | Some(Change::Created | Change::Unchanged | Change::Healed(_)) => {
                release_if_unused(self, &self.conf.ids.vpc)
            }
            Some(Change::Adopted { opened, found }) => {
                let _lock = self.domains.lock()?;
                if others_use_vpc(self, &self.conf.ids.vpc)? {
                    return Ok(());
                }
                self.domains
                    .undo_adoption(&self.host, &self.conf.ids.vpc, &opened, &found)
            }
        });
    }

    /// The VPC's domain, created, adopted or repaired under the node-wide lock; what this call
    /// created or adopted is undone by [`Add::push_domain_undo`]'s undo (a repair stays: the
    /// record says it belongs). Returns it, and whether this call created, adopted or repaired
    /// it (the VPC's convergence then covers every attachment: `converge::rotation`).
    pub(super) fn ensure_domain(&'a self, choice: Choice) -> Result<(Domain, bool), MasterError> {
        let _lock = self
            .domains
            .lock()
            .map_err(MasterError::node("lock the routing domains"))?;
        let Ensured { domain, change } = self
            .domains
            .ensure(&self.host, &self.conf.ids.vpc, choice.backend)
            .map_err(MasterError::node("set up the routing domain"))?;
        if let Err(e) = self.domains.remember(&choice) {
            // Only a cache: the next ADD probes again.
            log::warn(
                "ADD: could not remember the kernel's VRF support",
                json!({"err": e.to_string()}),
            );
        }
        let changed = change != Change::Unchanged;
        match change {
            Change::Unchanged => {}
            Change::Healed(restored) => log::warn(
                "ADD: routing domain repaired: objects were missing behind its record",
                json!({"vpc": domain.vpc, "table": domain.table, "restored": restored}),
            ),
            Change::Created => {
                log::info(
                    "ADD: routing domain created",
                    json!({"vpc": domain.vpc, "table": domain.table, "backend": domain.backend,
                           "reason": choice.reason.to_string()}),
                );
                *self.made.borrow_mut() = Some(Change::Created);
            }
            Change::Adopted { opened, found } => {
                log::info(
                    "ADD: adopted the VPC's existing VRF with its table",
                    json!({"vpc": domain.vpc, "table": domain.table}),
                );
                *self.made.borrow_mut() = Some(Change::Adopted { opened, found });
            }
        }
        Ok((domain, changed))
    }

    /// The VPC's other live attachments brought back on `domain` ([`converge`]), under the
    /// VPC's lock (this ADD holds its attachment's lock: the order is the documented one). A
    /// failure there is another attachment's and does not fail this ADD: it is logged, and the
    /// next ADD of the VPC or CNI GC tries again.
    pub(super) fn converge_others(&self, domain: &Domain, changed: bool) {
        let vpc = &self.conf.ids.vpc;
        let converged = self
            .records
            .lock_vpc(vpc)
            .map_err(|e| NetError::Busy(e.to_string()))
            .and_then(|_lock| {
                converge::others(
                    &self.host,
                    &self.req.node.state_dir,
                    domain,
                    vpc,
                    &self.host_ifname,
                    changed,
                )
            });
        if let Err(e) = converged {
            log::warn(
                "ADD: could not converge the VPC's other attachments; the next ADD of the VPC or CNI GC retries",
                json!({"vpc": domain.vpc, "err": e.to_string()}),
            );
        }
    }

    pub(super) fn add_gateways(
        &'a self,
        assigned: &[Assignment],
        rb: &mut Rollback<'a>,
    ) -> Result<(), MasterError> {
        let gateways = addressing::gateways(assigned);
        if gateways.is_empty() {
            return Ok(());
        }
        let added = {
            let _lock = self
                .domains
                .lock()
                .map_err(MasterError::node("lock the routing domains"))?;
            self.domains
                .add_gateways(&self.host, &self.conf.ids.vpc, &gateways)
                .map_err(MasterError::node("add the VPC gateways"))?
        };
        if !added.is_empty() {
            rb.push("VPC gateways", move || {
                remove_gateways_if_unused(self, &added)
            });
        }
        Ok(())
    }
}

/// Tears the VPC's domain down when no other attachment record refers to it
/// ([`retire::if_unused`]: this ADD's own record goes right after).
fn release_if_unused(add: &Add<'_, impl Device>, vpc: &VpcId) -> Result<(), NetError> {
    retire::if_unused(
        &add.host,
        &add.req.node.state_dir,
        vpc,
        Some(&add.host_ifname),
    )
    .map(|_| ())
}

/// Removes gateways this ADD added, unless another attachment of the VPC exists (it may rely on
/// them; GC removes them with the domain).
fn remove_gateways_if_unused(
    add: &Add<'_, impl Device>,
    gateways: &[IpAddr],
) -> Result<(), NetError> {
    let _lock = add.domains.lock()?;
    if others_use_vpc(add, &add.conf.ids.vpc)? {
        return Ok(());
    }
    add.domains
        .remove_gateways(&add.host, &add.conf.ids.vpc, gateways)
}

fn others_use_vpc(add: &Add<'_, impl Device>, vpc: &VpcId) -> Result<bool, NetError> {
    Ok(add
        .records
        .all()?
        .iter()
        .any(|r| r.vpc == vpc.raw() && r.host_ifname != add.host_ifname))
}
