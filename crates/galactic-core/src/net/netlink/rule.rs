//! Policy rules (`ip rule`).

use super::{address_family, counted, nl, tolerate_exists, tolerate_missing, NetError, Netlink};
use crate::ip::Family;
use futures_util::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::route::RouteHeader;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use rtnetlink::IpVersion;

/// A policy rule (`ip rule`): `[iif IIF] [from SRC] [fwmark MARK/MASK] lookup TABLE` at
/// `priority`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// IPv4 or IPv6 rule list.
    pub family: Family,
    /// Priority (`pref`).
    pub priority: u32,
    /// Input interface name.
    pub iif: Option<String>,
    /// Source prefix.
    pub from: Option<IpNetwork>,
    /// Firewall mark and mask.
    pub fwmark: Option<MarkMatch>,
    /// Table to look up.
    pub table: u32,
}

/// `fwmark MARK/MASK`: the packet's mark, masked, equals `mark`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkMatch {
    /// The value.
    pub mark: u32,
    /// The bits compared.
    pub mask: u32,
}

impl Netlink {
    /// Policy rules of one family.
    pub fn rules(&self, family: Family) -> Result<Vec<RuleSpec>, NetError> {
        let version = match family {
            Family::V6 => IpVersion::V6,
            Family::V4 => IpVersion::V4,
        };
        let request = self.handle.rule().get(version).execute();
        let msgs: Vec<RuleMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list rules"))?;
        Ok(counted(msgs).iter().map(|m| rule_from(m, family)).collect())
    }

    /// Adds a rule; an identical one already present is success.
    pub fn add_rule(&self, spec: &RuleSpec) -> Result<(), NetError> {
        tolerate_exists(self.add_new_rule(spec))
    }

    /// Adds a rule, failing with "exists" when an identical one is there.
    fn add_new_rule(&self, spec: &RuleSpec) -> Result<(), NetError> {
        let mut request = self.handle.rule().add();
        *request.message_mut() = rule_message(spec);
        self.runtime
            .block_on(request.execute())
            .map_err(nl(format!("add rule {}", describe_rule(spec))))
    }

    /// Adds a rule unless an identical one is there (the kernel compares, `NLM_F_EXCL`): one
    /// request and no dump of the node's rules. Returns whether it was missing.
    pub fn ensure_rule(&self, spec: &RuleSpec) -> Result<bool, NetError> {
        match self.add_new_rule(spec) {
            Ok(()) => Ok(true),
            Err(e) if e.is_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Removes a rule if it is there: one request and no dump. Returns whether it was there.
    pub fn remove_rule(&self, spec: &RuleSpec) -> Result<bool, NetError> {
        let request = self.handle.rule().del(rule_message(spec));
        match self
            .runtime
            .block_on(request.execute())
            .map_err(nl(format!("delete rule {}", describe_rule(spec))))
        {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Removes a rule; a missing one is success.
    pub fn delete_rule(&self, spec: &RuleSpec) -> Result<(), NetError> {
        let request = self.handle.rule().del(rule_message(spec));
        tolerate_missing(
            self.runtime
                .block_on(request.execute())
                .map_err(nl(format!("delete rule {}", describe_rule(spec)))),
        )
    }
}

fn rule_from(msg: &RuleMessage, family: Family) -> RuleSpec {
    let mut spec = RuleSpec {
        family,
        priority: 0,
        iif: None,
        from: None,
        fwmark: None,
        table: u32::from(msg.header.table),
    };
    let (mut mark, mut mask) = (None, None);
    for attr in &msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => spec.priority = *p,
            RuleAttribute::Iifname(name) => spec.iif = Some(name.clone()),
            RuleAttribute::Source(ip) => spec.from = IpNetwork::new(*ip, msg.header.src_len).ok(),
            RuleAttribute::Table(t) => spec.table = *t,
            RuleAttribute::FwMark(m) => mark = Some(*m),
            RuleAttribute::FwMask(m) => mask = Some(*m),
            _ => {}
        }
    }
    // A mark without a mask compares every bit (the kernel's default).
    spec.fwmark = mark.map(|mark| MarkMatch {
        mark,
        mask: mask.unwrap_or(u32::MAX),
    });
    spec
}

fn rule_message(spec: &RuleSpec) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = address_family(spec.family);
    msg.header.table = u8::try_from(spec.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    msg.header.action = RuleAction::ToTable;
    msg.attributes.push(RuleAttribute::Priority(spec.priority));
    msg.attributes.push(RuleAttribute::Table(spec.table));
    if let Some(iif) = &spec.iif {
        msg.attributes.push(RuleAttribute::Iifname(iif.clone()));
    }
    if let Some(from) = spec.from {
        msg.header.src_len = from.prefix();
        msg.attributes.push(RuleAttribute::Source(from.ip()));
    }
    if let Some(m) = spec.fwmark {
        msg.attributes.push(RuleAttribute::FwMark(m.mark));
        msg.attributes.push(RuleAttribute::FwMask(m.mask));
    }
    msg
}

fn describe_rule(spec: &RuleSpec) -> String {
    let version = match spec.family {
        Family::V6 => 6,
        Family::V4 => 4,
    };
    let mut text = format!("-{version} pref {}", spec.priority);
    if let Some(iif) = &spec.iif {
        text += &format!(" iif {iif}");
    }
    if let Some(from) = spec.from {
        text += &format!(" from {from}");
    }
    if let Some(m) = spec.fwmark {
        text += &format!(" fwmark {:#x}/{:#x}", m.mark, m.mask);
    }
    text + &format!(" lookup {}", spec.table)
}
