//! From the functions a plugin ran to its linker script: an output section `.text.hot`, placed
//! before `.text`, that gathers the input sections of those functions, so the code a call runs
//! sits in as few 64 KiB fault-around blocks as it needs (docs/performance.md).
//!
//! The script names input sections by pattern, not by exact symbol, so that it keeps matching
//! across builds: a Rust symbol's hash (legacy `17h<16 hex>E`, v0 crate disambiguators
//! `Cs<base62>_`) changes with the crate metadata (profile, features, versions), and LLVM's
//! numeric suffixes (`.47`) with the code around. A pattern that no longer matches only leaves
//! its function where the linker puts it by default: a stale script costs resident pages, never
//! correctness, and the build stays what its inputs say. glibc is not built with one section per
//! function: its functions are placed by archive member (`*libc.a:malloc.o`).

use std::collections::{BTreeMap, BTreeSet};

/// Where the input sections of a function are found.
pub fn patterns(symbol: &str, libc_members: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out: Vec<String> = libc_members
        .get(symbol)
        .into_iter()
        .flatten()
        .map(|member| format!("*libc.a:{member}(.text .text.*)"))
        .collect();
    let name = generalise(symbol);
    // `#[cold]` functions (and LLVM's outlined cold parts) are in `.text.unlikely.<name>`.
    out.push(format!("*(.text.{name} .text.unlikely.{name})"));
    out
}

/// `symbol` with what varies between builds replaced by `*`.
fn generalise(symbol: &str) -> String {
    let (base, suffixed) = match symbol.rsplit_once('.') {
        Some((base, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (base, true)
        }
        _ => (symbol, false),
    };
    let mut name = if base.starts_with("_ZN") {
        legacy_hash_globbed(base)
    } else if base.starts_with("_R") {
        v0_crates_globbed(base)
    } else {
        base.to_owned()
    };
    if suffixed {
        name.push('*');
    }
    name
}

/// `_ZN…17h<16 hex>E` → `_ZN…17h*E`.
fn legacy_hash_globbed(symbol: &str) -> String {
    match symbol.strip_suffix('E') {
        Some(body) if body.len() > 19 => {
            let (head, hash) = body.split_at(body.len() - 19);
            let is_hash =
                hash.starts_with("17h") && hash[3..].bytes().all(|b| b.is_ascii_hexdigit());
            if is_hash {
                format!("{head}17h*E")
            } else {
                symbol.to_owned()
            }
        }
        _ => symbol.to_owned(),
    }
}

/// Every `Cs<base62>_` (a crate's disambiguator in v0 mangling) → `Cs*_`.
fn v0_crates_globbed(symbol: &str) -> String {
    let bytes = symbol.as_bytes();
    let mut out = String::with_capacity(symbol.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"Cs") {
            let digits = bytes[i + 2..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
            if digits > 0 && bytes.get(i + 2 + digits) == Some(&b'_') {
                out.push_str("Cs*_");
                i += 2 + digits + 1;
                continue;
            }
        }
        out.push(char::from(bytes[i]));
        i += 1;
    }
    out
}

/// The functions a plugin ran, by command: how the hot section is ordered. Functions every
/// command runs come first (start-up, dispatch, the node config), then those fewer commands run,
/// grouped by command set; within a group, in the order first run.
#[derive(Default)]
pub struct Profile {
    /// function → (commands that ran it, as bits of `COMMANDS` order; rank of first run).
    functions: BTreeMap<String, (u8, usize)>,
}

impl Profile {
    /// Records that `command` (its index) ran `function`, first at `rank`.
    pub fn ran(&mut self, command: usize, function: &str, rank: usize) {
        let entry = self
            .functions
            .entry(function.to_owned())
            .or_insert((0, usize::MAX));
        if entry.0 == 0 || command < lowest(entry.0) {
            entry.1 = rank;
        } else if command == lowest(entry.0) {
            entry.1 = entry.1.min(rank);
        }
        entry.0 |= 1 << command;
    }

    /// The functions in layout order.
    pub fn ordered(&self) -> Vec<&str> {
        let mut all: Vec<(&String, &(u8, usize))> = self.functions.iter().collect();
        all.sort_by_key(|(name, (set, rank))| {
            (
                std::cmp::Reverse(set.count_ones()),
                std::cmp::Reverse(set.reverse_bits()),
                *rank,
                *name,
            )
        });
        all.into_iter().map(|(name, _)| name.as_str()).collect()
    }
}

fn lowest(set: u8) -> usize {
    set.trailing_zeros() as usize
}

/// The linker script of `plugin`.
pub fn render(
    plugin: &str,
    profile: &Profile,
    libc_members: &BTreeMap<String, BTreeSet<String>>,
) -> String {
    let mut seen = BTreeSet::new();
    let mut out = format!(
        "/* The hot code of {plugin}: generated by `cargo xtask layout` from traced ADD, CHECK and\n   \
         DEL calls; regenerate, do not edit (docs/performance.md). */\nSECTIONS {{\n  .text.hot : {{\n"
    );
    for function in profile.ordered() {
        for pattern in patterns(function, libc_members) {
            if seen.insert(pattern.clone()) {
                out.push_str("    ");
                out.push_str(&pattern);
                out.push('\n');
            }
        }
    }
    out.push_str("  }\n} INSERT BEFORE .text;\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_dependent_parts_of_names_are_globbed() {
        assert_eq!(
            generalise("_ZN13galactic_core3cni8dispatch6handle17h6760801112111d2eE"),
            "_ZN13galactic_core3cni8dispatch6handle17h*E"
        );
        assert_eq!(
            generalise("_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_growCsduwmD7cSIQq_5gimli"),
            "_RNvMs4_NtCs*_5alloc7raw_vecNtB5_11RawVecInner11finish_growCs*_5gimli"
        );
        assert_eq!(
            generalise("_RNvXsZ_NtCslNYArtu3iFV_5alloc6stringNtB5_6StringNtNtCsgEmfK2I1SDS_4core3fmt5Write9write_str.47"),
            "_RNvXsZ_NtCs*_5alloc6stringNtB5_6StringNtNtCs*_4core3fmt5Write9write_str*"
        );
        assert_eq!(generalise("sqlite3VdbeExec"), "sqlite3VdbeExec");
        assert_eq!(generalise("_ZN3foo3barE"), "_ZN3foo3barE");
    }

    #[test]
    fn glibc_functions_are_placed_by_member() {
        let members =
            BTreeMap::from([("malloc".to_owned(), BTreeSet::from(["malloc.o".to_owned()]))]);
        assert_eq!(
            patterns("malloc", &members),
            [
                "*libc.a:malloc.o(.text .text.*)",
                "*(.text.malloc .text.unlikely.malloc)"
            ]
        );
    }

    #[test]
    fn common_functions_come_first_then_by_command_set_and_first_run() {
        let mut p = Profile::default();
        p.ran(0, "add_only", 1);
        p.ran(0, "everywhere", 5);
        p.ran(1, "everywhere", 0);
        p.ran(2, "everywhere", 0);
        p.ran(2, "del_only", 0);
        p.ran(0, "add_and_del", 3);
        p.ran(2, "add_and_del", 1);
        p.ran(0, "add_first", 0);
        assert_eq!(
            p.ordered(),
            [
                "everywhere",
                "add_and_del",
                "add_first",
                "add_only",
                "del_only"
            ]
        );
    }

    #[test]
    fn the_script_inserts_the_hot_section_before_text() {
        let mut p = Profile::default();
        p.ran(0, "_ZN1a1b17h0123456789abcdefE", 0);
        let script = render("galactic-x", &p, &BTreeMap::new());
        assert!(script.contains("  .text.hot : {\n    *(.text._ZN1a1b17h*E .text.unlikely._ZN1a1b17h*E)\n  }\n} INSERT BEFORE .text;\n"));
    }
}
