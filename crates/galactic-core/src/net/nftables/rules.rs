//! The rules of one nftables chain over netlink: dumped, inserted at the top, deleted by handle,
//! all without the `nft` binary (a process per call on the ADD/CHECK/DEL path).
//!
//! Only one rule shape is ever written: `iifname|oifname "<name>" accept comment "<comment>"`,
//! the same expressions and comment encoding `nft` produces for that text (`meta` into register
//! 1, `cmp eq` against the name padded to `IFNAMSIZ`, `immediate` accept; the comment as libnftnl
//! user data), so a rule written by either is found and removed by the other. Changes go in one
//! nfnetlink batch: all of them or none.

use super::message::{dump, transaction, Message, NLM_F_ACK, NLM_F_CREATE};
use super::{attributes, NFNL_SUBSYS_NFTABLES, NLM_F_DUMP, NLM_F_REQUEST};
use crate::net::NetError;

const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NFT_MSG_DELRULE: u16 = 8;

const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_HANDLE: u16 = 3;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_USERDATA: u16 = 7;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFT_REG_VERDICT: u32 = 0;
const NFT_REG_1: u32 = 1;
const NFT_CMP_EQ: u32 = 0;
const NF_ACCEPT: u32 = 1;
/// libnftnl's `NFTNL_UDATA_RULE_COMMENT`.
const UDATA_RULE_COMMENT: u8 = 0;
const IFNAMSIZ: usize = 16;

/// Which interface of a packet a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `iifname`: the packet came in on the interface.
    In,
    /// `oifname`: the packet leaves through it.
    Out,
}

impl Direction {
    fn meta_key(self) -> u32 {
        match self {
            Direction::In => 6,  // NFT_META_IIFNAME
            Direction::Out => 7, // NFT_META_OIFNAME
        }
    }
}

/// A chain, by family, table and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRef {
    /// `NFPROTO_*` family.
    pub family: u8,
    /// The table.
    pub table: String,
    /// The chain.
    pub name: String,
}

/// One rule of a chain, as much of it as ownership needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The kernel's handle (unique in the table).
    pub handle: u64,
    /// The rule's comment, if it has one.
    pub comment: Option<String>,
}

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Insert `<direction> "<ifname>" accept comment "<comment>"` at the top of the chain.
    InsertAccept {
        /// Where.
        chain: ChainRef,
        /// `iifname` or `oifname`.
        direction: Direction,
        /// The interface (at most 15 bytes).
        ifname: String,
        /// The comment.
        comment: String,
    },
    /// Delete the rule with this handle.
    Delete {
        /// Where.
        chain: ChainRef,
        /// The rule.
        handle: u64,
    },
}

/// Every rule of `chain` (none when the table or chain is gone).
pub fn rules(chain: &ChainRef) -> Result<Vec<Rule>, NetError> {
    let what = format!("dump the rules of {} {}", chain.table, chain.name);
    let mut msg = Message::new(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        1,
        chain.family,
        0,
    );
    msg.string(NFTA_RULE_TABLE, &chain.table);
    msg.string(NFTA_RULE_CHAIN, &chain.name);
    dump(&what, msg, |attrs, out| out.extend(rule(attrs)))
}

/// Applies `changes` in one transaction. An empty list does nothing.
pub fn apply(changes: &[Change]) -> Result<(), NetError> {
    transaction(
        "apply rule changes",
        changes.iter().map(|c| encode(c, 0)).collect(),
    )
}

/// One change as a netlink message with sequence number `seq`. Over 60 lines on purpose: one arm
/// per kind of change, each the literal attribute layout the kernel expects, read top to bottom.
fn encode(change: &Change, seq: u32) -> Vec<u8> {
    match change {
        Change::InsertAccept {
            chain,
            direction,
            ifname,
            comment,
        } => {
            // Without NLM_F_APPEND and a position the kernel inserts at the top of the chain.
            let mut msg = Message::new(
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
                NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
                seq,
                chain.family,
                0,
            );
            msg.string(NFTA_RULE_TABLE, &chain.table);
            msg.string(NFTA_RULE_CHAIN, &chain.name);
            let list = msg.open(NFTA_RULE_EXPRESSIONS);
            expression(&mut msg, "meta", |m| {
                m.u32(NFTA_META_KEY, direction.meta_key());
                m.u32(NFTA_META_DREG, NFT_REG_1);
            });
            expression(&mut msg, "cmp", |m| {
                m.u32(NFTA_CMP_SREG, NFT_REG_1);
                m.u32(NFTA_CMP_OP, NFT_CMP_EQ);
                let data = m.open(NFTA_CMP_DATA);
                let mut name = [0u8; IFNAMSIZ];
                let bytes = ifname.as_bytes();
                let n = bytes.len().min(IFNAMSIZ - 1);
                name[..n].copy_from_slice(&bytes[..n]);
                m.bytes(NFTA_DATA_VALUE, &name);
                m.close(data);
            });
            expression(&mut msg, "immediate", |m| {
                m.u32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
                let data = m.open(NFTA_IMMEDIATE_DATA);
                let verdict = m.open(NFTA_DATA_VERDICT);
                m.u32(NFTA_VERDICT_CODE, NF_ACCEPT);
                m.close(verdict);
                m.close(data);
            });
            msg.close(list);
            let mut udata = vec![UDATA_RULE_COMMENT, 0];
            udata.extend_from_slice(comment.as_bytes());
            udata.push(0);
            udata[1] = u8::try_from(udata.len() - 2).unwrap_or(u8::MAX);
            msg.bytes(NFTA_RULE_USERDATA, &udata);
            msg.finish()
        }
        Change::Delete { chain, handle } => {
            let mut msg = Message::new(
                (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE,
                NLM_F_REQUEST | NLM_F_ACK,
                seq,
                chain.family,
                0,
            );
            msg.string(NFTA_RULE_TABLE, &chain.table);
            msg.string(NFTA_RULE_CHAIN, &chain.name);
            msg.bytes(NFTA_RULE_HANDLE, &handle.to_be_bytes());
            msg.finish()
        }
    }
}

/// One element of an expression list: its name and its data.
fn expression(msg: &mut Message, name: &str, data: impl FnOnce(&mut Message)) {
    let elem = msg.open(NFTA_LIST_ELEM);
    msg.string(NFTA_EXPR_NAME, name);
    let inner = msg.open(NFTA_EXPR_DATA);
    data(msg);
    msg.close(inner);
    msg.close(elem);
}

/// The attributes of one NFT_MSG_NEWRULE of a dump.
fn rule(attrs: &[u8]) -> Option<Rule> {
    let handle = attributes(attrs).find_map(|(kind, value)| match value {
        [a, b, c, d, e, f, g, h] if kind == NFTA_RULE_HANDLE => {
            Some(u64::from_be_bytes([*a, *b, *c, *d, *e, *f, *g, *h]))
        }
        _ => None,
    })?;
    let comment = attributes(attrs)
        .find(|(kind, _)| *kind == NFTA_RULE_USERDATA)
        .and_then(|(_, udata)| comment(udata));
    Some(Rule { handle, comment })
}

/// The comment of libnftnl user data: type-length-value records, the comment NUL-terminated.
fn comment(mut udata: &[u8]) -> Option<String> {
    while let [kind, len, rest @ ..] = udata {
        let len = usize::from(*len);
        let value = rest.get(..len)?;
        if *kind == UDATA_RULE_COMMENT {
            let text = value.split(|b| *b == 0).next().unwrap_or(value);
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        udata = &rest[len..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comment_is_read_from_libnftnl_user_data() {
        assert_eq!(
            comment(b"\x00\x0bgalactic:x\x00").as_deref(),
            Some("galactic:x")
        );
        // Another record first, then the comment.
        assert_eq!(
            comment(b"\x01\x02ab\x00\x04abc\x00").as_deref(),
            Some("abc")
        );
        assert_eq!(comment(b"\x01\x02ab"), None);
        assert_eq!(comment(b"\x00\x09short"), None, "a length past the end");
    }
}
