//! Every allocation in the store, for operators (`galactic-ipam list`, `write-markers`) and for
//! tests that judge the store itself rather than a CHECK that could fail for another reason.

use super::lease::{leases_of, Lease};
use super::{rows, Store, StoreError};
use serde::Serialize;

/// One attachment's allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holding {
    /// Network name (empty for an imported record: upstream kept none).
    pub network: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME` (empty for an imported record).
    pub ifname: String,
    /// How it was recorded: `add`, `legacy-marker` or `legacy-annotation`.
    pub origin: String,
    /// The addresses with their prefix lengths, IPv6 first.
    pub addresses: Vec<String>,
}

impl Store {
    /// Every attachment and its addresses, oldest first. Walks the whole store: an operator
    /// command, never on a CNI operation's path.
    pub fn holdings(&mut self) -> Result<Vec<Holding>, StoreError> {
        self.every_attachment(|holding, _| holding)
    }

    /// Every lease with the container id holding it, oldest attachment first (for the markers
    /// a return to the Go chain needs: `galactic-ipam write-markers`).
    pub fn leases(&mut self) -> Result<Vec<(String, Lease)>, StoreError> {
        let per_attachment = self.every_attachment(|holding, leases| {
            leases
                .into_iter()
                .map(|lease| (holding.container_id.clone(), lease))
                .collect::<Vec<_>>()
        })?;
        Ok(per_attachment.into_iter().flatten().collect())
    }

    /// `f` of every attachment (as a [`Holding`]) and its leases, in one read transaction.
    fn every_attachment<T>(
        &mut self,
        f: impl Fn(Holding, Vec<Lease>) -> T,
    ) -> Result<Vec<T>, StoreError> {
        self.read(|tx, path| {
            let attachments = rows(
                tx,
                path,
                "SELECT id, network, container_id, ifname, origin FROM attachment ORDER BY id",
                [],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                    ))
                },
            )?;
            attachments
                .into_iter()
                .map(|(id, network, container_id, ifname, origin)| {
                    let leases = leases_of(tx, path, id)?;
                    let addresses = leases.iter().map(|l| l.address.to_string()).collect();
                    let holding = Holding {
                        network,
                        container_id,
                        ifname,
                        origin,
                        addresses,
                    };
                    Ok(f(holding, leases))
                })
                .collect()
        })
    }
}
