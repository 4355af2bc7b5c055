//! The elements of one `ifname : mark` map over netlink, without the `nft` binary: dumped,
//! added and deleted in one nfnetlink batch (NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM).
//!
//! The encoding is the one `nft` uses for that map type, so elements written by either are read
//! by the other: the key is the interface name NUL-padded to `IFNAMSIZ` (16 bytes, the `ifname`
//! type), the value the mark as 4 bytes in host order (the `mark` type is host-endian, as the
//! packet's mark is).

use super::attributes;
use super::message::{dump, transaction, Message, NLM_F_ACK, NLM_F_CREATE};
use super::{NLM_F_DUMP, NLM_F_REQUEST};
use crate::net::NetError;

const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_GETSETELEM: u16 = 13;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_DATA_VALUE: u16 = 1;
const IFNAMSIZ: usize = 16;

/// A map, by family, table and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapRef<'a> {
    /// `NFPROTO_*` family.
    pub family: u8,
    /// The table.
    pub table: &'a str,
    /// The map.
    pub name: &'a str,
}

/// One element: an interface name and the mark it maps to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Element {
    /// The interface (at most 15 bytes).
    pub ifname: String,
    /// The mark.
    pub mark: u32,
}

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Add the element (an identical one already there is success; one with another mark
    /// fails: delete it first, in the same batch).
    Add(Element),
    /// Delete the element of this interface (a missing one fails the batch: delete only what
    /// [`elements`] listed).
    Delete(String),
}

/// Every element of `map` (none when the table or map is gone).
pub fn elements(map: MapRef<'_>) -> Result<Vec<Element>, NetError> {
    let mut msg = Message::nftables(NFT_MSG_GETSETELEM, NLM_F_REQUEST | NLM_F_DUMP, map.family);
    msg.string(NFTA_SET_ELEM_LIST_TABLE, map.table);
    msg.string(NFTA_SET_ELEM_LIST_SET, map.name);
    let what = format!("dump the elements of map {} {}", map.table, map.name);
    dump(&what, msg, parse_elements)
}

/// The element of `ifname` in `map`, if it has one (none when the table or map is gone): one
/// request for its key, which the kernel answers with that element alone however many the map
/// holds (a single-element NFT_MSG_GETSETELEM, Linux 4.15 and later).
pub fn element(map: MapRef<'_>, ifname: &str) -> Result<Option<Element>, NetError> {
    let msg = one_element(
        map,
        NFT_MSG_GETSETELEM,
        NLM_F_REQUEST | NLM_F_ACK,
        ifname,
        None,
    );
    let what = format!("get the element {ifname} of map {} {}", map.table, map.name);
    // A missing element is ENOENT, which the dump reads as an empty answer.
    Ok(dump(&what, msg, parse_elements)?
        .into_iter()
        .find(|e| e.ifname == ifname))
}

/// The elements of one NFT_MSG_NEWSETELEM message's attributes.
fn parse_elements(attrs: &[u8], out: &mut Vec<Element>) {
    let Some((_, list)) = attributes(attrs).find(|(kind, _)| *kind == NFTA_SET_ELEM_LIST_ELEMENTS)
    else {
        return;
    };
    out.extend(
        attributes(list)
            .filter(|(kind, _)| *kind == NFTA_LIST_ELEM)
            .filter_map(|(_, elem)| element_of(elem)),
    );
}

/// Applies `changes` to `map` in one transaction: all of them or none. An empty list does
/// nothing.
pub fn apply(map: MapRef<'_>, changes: &[Change]) -> Result<(), NetError> {
    let what = format!("change map {} {}", map.table, map.name);
    transaction(&what, changes.iter().map(|c| encode(map, c)).collect())
}

/// One change as an NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM of one element.
fn encode(map: MapRef<'_>, change: &Change) -> Vec<u8> {
    match change {
        Change::Add(e) => one_element(
            map,
            NFT_MSG_NEWSETELEM,
            NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
            &e.ifname,
            Some(e.mark),
        ),
        Change::Delete(ifname) => one_element(
            map,
            NFT_MSG_DELSETELEM,
            NLM_F_REQUEST | NLM_F_ACK,
            ifname,
            None,
        ),
    }
    .finish()
}

/// A message of `command` naming one element of `map` by its key (and its mark, to add it).
fn one_element(
    map: MapRef<'_>,
    command: u16,
    flags: u16,
    ifname: &str,
    mark: Option<u32>,
) -> Message {
    let mut msg = Message::nftables(command, flags, map.family);
    msg.string(NFTA_SET_ELEM_LIST_TABLE, map.table);
    msg.string(NFTA_SET_ELEM_LIST_SET, map.name);
    let list = msg.open(NFTA_SET_ELEM_LIST_ELEMENTS);
    let elem = msg.open(NFTA_LIST_ELEM);
    let key = msg.open(NFTA_SET_ELEM_KEY);
    msg.bytes(NFTA_DATA_VALUE, &padded(ifname));
    msg.close(key);
    if let Some(mark) = mark {
        let data = msg.open(NFTA_SET_ELEM_DATA);
        msg.bytes(NFTA_DATA_VALUE, &mark.to_ne_bytes());
        msg.close(data);
    }
    msg.close(elem);
    msg.close(list);
    msg
}

/// The `ifname` key: the name NUL-padded to `IFNAMSIZ` (a longer one is cut, as the kernel's
/// own names never are).
fn padded(ifname: &str) -> [u8; IFNAMSIZ] {
    let mut name = [0u8; IFNAMSIZ];
    let bytes = ifname.as_bytes();
    let n = bytes.len().min(IFNAMSIZ - 1);
    name[..n].copy_from_slice(&bytes[..n]);
    name
}

/// One element of a dump: its key and its data value.
fn element_of(attrs: &[u8]) -> Option<Element> {
    let value = |kind: u16| {
        attributes(attrs)
            .find(|(k, _)| *k == kind)
            .and_then(|(_, nested)| attributes(nested).find(|(k, _)| *k == NFTA_DATA_VALUE))
            .map(|(_, v)| v)
    };
    let key = value(NFTA_SET_ELEM_KEY)?;
    let ifname = key.split(|b| *b == 0).next().unwrap_or(key);
    let mark = match value(NFTA_SET_ELEM_DATA)? {
        [a, b, c, d, ..] => u32::from_ne_bytes([*a, *b, *c, *d]),
        _ => return None,
    };
    Some(Element {
        ifname: String::from_utf8_lossy(ifname).into_owned(),
        mark,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_element_reads_back_as_itself() {
        let map = MapRef {
            family: 1,
            table: "t",
            name: "m",
        };
        let msg = encode(
            map,
            &Change::Add(Element {
                ifname: "G000000001002H".into(),
                mark: 0x0200_0000,
            }),
        );
        // After the netlink header and nfgenmsg: table, set, then the element list.
        let attrs = &msg[20..];
        let (_, list) = attributes(attrs)
            .find(|(k, _)| *k == NFTA_SET_ELEM_LIST_ELEMENTS)
            .unwrap();
        let (_, elem) = attributes(list).next().unwrap();
        assert_eq!(
            element_of(elem),
            Some(Element {
                ifname: "G000000001002H".into(),
                mark: 0x0200_0000
            })
        );
    }
}
