//! Addresses of a link.

use super::{counted, nl, tolerate_exists, tolerate_missing, NetError, Netlink};
use futures_util::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage, AddressScope};

/// Flags for an address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrFlags {
    /// Skip duplicate address detection (IPv6): the gateway sits on many links by design.
    pub nodad: bool,
    /// Do not add the prefix route the kernel would derive from the address.
    pub noprefixroute: bool,
}

impl Netlink {
    /// The address messages of a link, both families. The request is strictly checked and names
    /// the link, so the kernel sends that link's addresses only, however many the node's other
    /// links hold (kernels before 4.20 ignore the filter and send every address: checking the
    /// index again keeps the answer exact). A link that does not exist has none.
    fn address_messages(&self, index: u32) -> Result<Vec<AddressMessage>, NetError> {
        let mut request = self.filtered.address().get();
        request.message_mut().header.index = index;
        let msgs: Vec<AddressMessage> = match self.runtime.block_on(request.execute().try_collect())
        {
            Ok(msgs) => msgs,
            Err(e) => match nl(format!("list addresses of link {index}"))(e) {
                NetError::NotFound { .. } => Vec::new(),
                other => return Err(other),
            },
        };
        Ok(counted(msgs)
            .into_iter()
            .filter(|m| m.header.index == index)
            .collect())
    }

    /// Addresses on a link.
    pub fn addresses(&self, index: u32) -> Result<Vec<IpNetwork>, NetError> {
        Ok(self
            .address_messages(index)?
            .iter()
            .filter_map(address_from)
            .collect())
    }

    /// Global-scope addresses on a link, in the kernel's order.
    pub fn global_addresses(&self, index: u32) -> Result<Vec<IpNetwork>, NetError> {
        Ok(self
            .address_messages(index)?
            .iter()
            .filter(|m| m.header.scope == AddressScope::Universe)
            .filter_map(address_from)
            .collect())
    }

    /// Adds an address (host bits kept); an identical one already present is success.
    pub fn add_address(
        &self,
        index: u32,
        addr: IpNetwork,
        flags: AddrFlags,
    ) -> Result<(), NetError> {
        let mut request = self.handle.address().add(index, addr.ip(), addr.prefix());
        let mut bits = AddressFlags::empty();
        if flags.nodad {
            bits |= AddressFlags::Nodad;
        }
        if flags.noprefixroute {
            bits |= AddressFlags::Noprefixroute;
        }
        if !bits.is_empty() {
            request
                .message_mut()
                .attributes
                .push(AddressAttribute::Flags(bits));
        }
        tolerate_exists(
            self.runtime
                .block_on(request.execute())
                .map_err(nl(format!("add address {addr} to link {index}"))),
        )
    }

    /// Removes every global-scope address from a link (what IPAM assigned; the kernel's
    /// link-local ones stay); a link without any is success.
    pub fn flush_global_addresses(&self, index: u32) -> Result<(), NetError> {
        for msg in self
            .address_messages(index)?
            .into_iter()
            .filter(|m| m.header.scope == AddressScope::Universe)
        {
            tolerate_missing(
                self.runtime
                    .block_on(self.handle.address().del(msg).execute())
                    .map_err(nl(format!("delete the addresses of link {index}"))),
            )?;
        }
        Ok(())
    }
}

fn address_from(msg: &AddressMessage) -> Option<IpNetwork> {
    // IPv4 carries the interface's own address in IFA_LOCAL; IPv6 only in IFA_ADDRESS.
    let local = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let address = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Address(ip) => Some(*ip),
        _ => None,
    });
    IpNetwork::new(local.or(address)?, msg.header.prefix_len).ok()
}
