//! Which rules of the node's nftables ruleset, outside our own table, set or match bits of the
//! packet mark (read-only, over netlink): table mode's VPC marks share the mark with every other
//! component of the node, and a rule that sets bits of `table_mark_mask` steers traffic into a
//! VPC table (or wipes a VPC's mark), one that matches them misreads our marks as its own.
//!
//! What is read, per rule: `meta mark set …` (native nftables) and the `MARK` target of
//! iptables-nft (xtables compat, revision 2) as setting, `meta mark` loads compared or masked and
//! the `mark` match of iptables-nft as matching. The bits are what the rule can change or look
//! at: a set through `bitwise` changes `~mask | xor`, any other set replaces the whole mark (all
//! bits), `MARK --set-xmark v/m` changes `v | m`; a masked match looks at its mask, an unmasked
//! compare at the whole mark, the `mark` match at its mask. iptables-legacy rules (x_tables) are
//! not in the nftables ruleset and are not seen; nor are marks set by eBPF or by other means.

use super::message::{dump, Message};
use super::{attributes, NFNL_SUBSYS_NFTABLES, NLM_F_DUMP, NLM_F_REQUEST};
use crate::net::NetError;

const NFT_MSG_GETRULE: u16 = 7;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_META_SREG: u16 = 3;
const NFT_META_MARK: u32 = 3;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_TARGET_NAME: u16 = 1;
const NFTA_TARGET_REV: u16 = 2;
const NFTA_TARGET_INFO: u16 = 3;
const NFTA_MATCH_NAME: u16 = 1;
const NFTA_MATCH_INFO: u16 = 3;

/// A rule that sets or matches mark bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkUser {
    /// Its table.
    pub table: String,
    /// Its chain.
    pub chain: String,
    /// Whether it sets bits (else it only matches them).
    pub sets: bool,
    /// The bits it sets or looks at.
    pub bits: u32,
}

impl MarkUser {
    /// `table T chain C sets|matches 0x…`, for messages.
    pub fn label(&self) -> String {
        let verb = if self.sets { "sets" } else { "matches" };
        format!(
            "table {} chain {} {verb} mark bits {:#x}",
            self.table, self.chain, self.bits
        )
    }
}

/// Every rule outside `own_table` that sets or matches bits of the packet mark.
pub fn mark_users(own_table: &str) -> Result<Vec<MarkUser>, NetError> {
    let msg = Message::new(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        1,
        0, // every family
        0,
    );
    let users = dump("dump the nftables rules", msg, |attrs, out| {
        out.extend(user(attrs));
    })?;
    Ok(users.into_iter().filter(|u| u.table != own_table).collect())
}

/// What one rule does with the mark, if anything.
fn user(attrs: &[u8]) -> Option<MarkUser> {
    let text = |kind: u16| {
        attributes(attrs).find(|(k, _)| *k == kind).map(|(_, v)| {
            String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(v)).into_owned()
        })
    };
    let (_, list) = attributes(attrs).find(|(k, _)| *k == NFTA_RULE_EXPRESSIONS)?;
    let mut seen = Seen::default();
    for (_, expr) in attributes(list).filter(|(k, _)| *k == NFTA_LIST_ELEM) {
        seen.add(expr);
    }
    let (sets, bits) = seen.verdict()?;
    Some(MarkUser {
        table: text(NFTA_RULE_TABLE)?,
        chain: text(NFTA_RULE_CHAIN)?,
        sets,
        bits,
    })
}

/// What a rule's expressions did with the mark, in order.
#[derive(Default)]
struct Seen {
    loads_mark: bool,
    sets_mark: bool,
    /// `~mask | xor` of the last `bitwise`, and its mask.
    bitwise: Option<(u32, u32)>,
    compared: bool,
    /// Bits an xtables `MARK` target changes or a `mark` match looks at.
    xt_set: u32,
    xt_match: u32,
}

impl Seen {
    fn add(&mut self, expr: &[u8]) {
        let name = attributes(expr)
            .find(|(k, _)| *k == NFTA_EXPR_NAME)
            .map(|(_, v)| v.split(|b| *b == 0).next().unwrap_or(v));
        let Some((_, data)) = attributes(expr).find(|(k, _)| *k == NFTA_EXPR_DATA) else {
            return;
        };
        let attr = |kind: u16| attributes(data).find(|(k, _)| *k == kind).map(|(_, v)| v);
        let value = |kind: u16| {
            attr(kind)
                .and_then(|nested| attributes(nested).find(|(k, _)| *k == NFTA_DATA_VALUE))
                .and_then(|(_, v)| u32_ne(v))
        };
        match name {
            Some(b"meta") if attr(NFTA_META_KEY).and_then(u32_be) == Some(NFT_META_MARK) => {
                self.loads_mark |= attr(NFTA_META_DREG).is_some();
                self.sets_mark |= attr(NFTA_META_SREG).is_some();
            }
            Some(b"bitwise") if self.loads_mark => {
                if let (Some(mask), Some(xor)) = (value(NFTA_BITWISE_MASK), value(NFTA_BITWISE_XOR))
                {
                    self.bitwise = Some((!mask | xor, mask));
                }
            }
            Some(b"cmp") if self.loads_mark => self.compared |= value(NFTA_CMP_DATA).is_some(),
            Some(b"target") if attr(NFTA_TARGET_NAME).map(nul_free) == Some(b"MARK") => {
                // Revision 2, `xt_mark_tginfo2 { mark, mask }`; earlier ones: the whole mark.
                let info = attr(NFTA_TARGET_INFO).unwrap_or_default();
                self.xt_set |= match (attr(NFTA_TARGET_REV).and_then(u32_be), info) {
                    (Some(2), [a, b, c, d, e, f, g, h, ..]) => {
                        u32::from_ne_bytes([*a, *b, *c, *d]) | u32::from_ne_bytes([*e, *f, *g, *h])
                    }
                    _ => u32::MAX,
                };
            }
            Some(b"match") if attr(NFTA_MATCH_NAME).map(nul_free) == Some(b"mark") => {
                // `xt_mark_mtinfo1 { mark, mask, invert }`: the mask is what it looks at.
                self.xt_match |= match attr(NFTA_MATCH_INFO).unwrap_or_default() {
                    [_, _, _, _, a, b, c, d, ..] => u32::from_ne_bytes([*a, *b, *c, *d]),
                    _ => u32::MAX,
                };
            }
            _ => {}
        }
    }

    /// (sets, bits), or `None` when the rule leaves the mark alone.
    fn verdict(&self) -> Option<(bool, u32)> {
        if self.sets_mark || self.xt_set != 0 {
            let native = match (self.sets_mark, self.bitwise) {
                (false, _) => 0,
                (true, Some((changed, _))) => changed,
                (true, None) => u32::MAX,
            };
            return Some((true, native | self.xt_set));
        }
        let native = match (self.loads_mark, self.bitwise, self.compared) {
            (true, Some((_, mask)), _) => mask,
            (true, None, true) => u32::MAX,
            _ => 0,
        };
        let bits = native | self.xt_match;
        (bits != 0).then_some((false, bits))
    }
}

fn nul_free(v: &[u8]) -> &[u8] {
    v.split(|b| *b == 0).next().unwrap_or(v)
}

fn u32_be(v: &[u8]) -> Option<u32> {
    match v {
        [a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

fn u32_ne(v: &[u8]) -> Option<u32> {
    match v {
        [a, b, c, d, ..] => Some(u32::from_ne_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}
