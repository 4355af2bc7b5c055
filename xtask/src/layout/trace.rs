//! What a traced process ran: the functions of its executable whose code it executed, from
//! valgrind's `lackey --trace-superblocks=yes` log (one `SB <address>` line per superblock
//! entered; every function that runs enters at least one) and the executable's symbol table.

use anyhow::{Context, Result};
use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// The code symbols of an executable, by address.
pub struct Symbols {
    /// `(start, end, name)`, sorted by start.
    ranges: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// Reads the symbol table of the (unstripped) executable at `path`.
    pub fn of(path: &Path) -> Result<Self> {
        let data = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        let file =
            object::File::parse(&*data).with_context(|| format!("parse {}", path.display()))?;
        let mut ranges: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.size() > 0)
            .filter_map(|s| {
                Some((
                    s.address(),
                    s.address() + s.size(),
                    s.name().ok()?.to_owned(),
                ))
            })
            .collect();
        anyhow::ensure!(
            !ranges.is_empty(),
            "{} has no symbol table (built stripped?)",
            path.display()
        );
        ranges.sort();
        Ok(Self { ranges })
    }

    /// The function containing `address`.
    pub fn at(&self, address: u64) -> Option<&str> {
        let i = self
            .ranges
            .partition_point(|(start, _, _)| *start <= address);
        let (start, end, name) = self.ranges.get(i.checked_sub(1)?)?;
        (*start <= address && address < *end).then_some(name.as_str())
    }
}

/// One traced process.
pub struct Trace {
    /// The executable it ran (valgrind's `Command:` line).
    pub program: PathBuf,
    /// Addresses of the superblocks it entered, each once.
    pub executed: Vec<u64>,
}

/// Reads a lackey log.
pub fn read(log: &Path) -> Result<Trace> {
    let file = std::fs::File::open(log).with_context(|| format!("open {}", log.display()))?;
    let mut program = None;
    let mut seen = std::collections::HashSet::new();
    let mut executed = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        if let Some(address) = superblock(&line) {
            if seen.insert(address) {
                executed.push(address);
            }
        } else if program.is_none() {
            program = command(&line);
        }
    }
    Ok(Trace {
        program: program.with_context(|| format!("{}: no Command: line", log.display()))?,
        executed,
    })
}

/// The address of an `SB <hex>` line.
fn superblock(line: &[u8]) -> Option<u64> {
    let hex = line.strip_prefix(b"SB ")?;
    u64::from_str_radix(std::str::from_utf8(hex).ok()?.trim(), 16).ok()
}

/// The program of a `==<pid>== Command: <program> <args>` line.
fn command(line: &[u8]) -> Option<PathBuf> {
    let line = std::str::from_utf8(line).ok()?;
    let (_, rest) = line.split_once("== Command: ")?;
    rest.split_whitespace().next().map(PathBuf::from)
}

/// The functions `trace` executed.
pub fn functions<'a>(trace: &Trace, symbols: &'a Symbols) -> BTreeSet<&'a str> {
    trace
        .executed
        .iter()
        .filter_map(|address| symbols.at(*address))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lackey_lines_are_read() {
        assert_eq!(superblock(b"SB 004011a0"), Some(0x4011a0));
        assert_eq!(superblock(b" L 7ff000,8"), None);
        assert_eq!(superblock(b"==12== Command: /x/galactic-bgp"), None);
        assert_eq!(
            command(b"==12== Command: /x/galactic-bgp --flag"),
            Some(PathBuf::from("/x/galactic-bgp"))
        );
        assert_eq!(command(b"==12== Copyright (C) 2007"), None);
    }

    #[test]
    fn addresses_resolve_to_the_enclosing_symbol() {
        let symbols = Symbols {
            ranges: vec![(0x100, 0x110, "a".into()), (0x120, 0x130, "b".into())],
        };
        assert_eq!(symbols.at(0x100), Some("a"));
        assert_eq!(symbols.at(0x10f), Some("a"));
        assert_eq!(symbols.at(0x110), None);
        assert_eq!(symbols.at(0x12a), Some("b"));
        assert_eq!(symbols.at(0x50), None);
    }
}
