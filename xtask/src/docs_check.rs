//! `check-docs`: the claims in README.md and docs/**/*.md that can be checked mechanically,
//! checked against the tree and the code, with no build of the plugins and no privileges:
//!
//! - every `cargo xtask <command>` written in code names a real subcommand, and every `--flag`
//!   written right after it is one of that subcommand's (asked of the clap parser itself);
//! - every relative markdown link's target exists;
//! - every repository path in code (`crates/…`, `deploy/…`, `xtask/…`, `docs/…`, `layout/…`,
//!   `.ci/…`, `fuzz/…`, and bare `tests/….rs`/`src/…` paths of some crate) exists, `<placeholder>`,
//!   `*` and `…` components matching any name;
//! - the key tables of docs/configuration.md (`<!-- fields: NAME -->`) list exactly the keys the
//!   parsers read (the node config's from `galactic_core::config::node_config_keys`, the stanzas'
//!   from the parsers' own field lists), and every key docs/tenancy.md's key table names is one.
//!
//! A failure lists every claim disproved, as `file:line: what`.

use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// `cargo xtask check-docs` has no options.
#[derive(Debug, Default, clap::Args)]
pub struct Args {}

/// One disproved claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    file: String,
    line: usize,
    what: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

pub fn run(_args: &Args) -> Result<()> {
    let root = crate::workspace_root();
    let docs = documents(&root)?;
    let findings = Checker::new(&root)?.check(&docs);
    if !findings.is_empty() {
        let list: Vec<String> = findings.iter().map(ToString::to_string).collect();
        bail!(
            "check-docs: {} claim(s) in the docs are false:\n{}",
            list.len(),
            list.join("\n")
        );
    }
    println!(
        "check-docs: {} files, every command, flag, path and key checked holds",
        docs.len()
    );
    Ok(())
}

/// README.md and every `*.md` under docs/, as (path relative to the root, text).
fn documents(root: &Path) -> Result<Vec<(String, String)>> {
    let mut files = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut files)?;
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("read {}", path.display()))?;
            let name = path.strip_prefix(root).unwrap_or(&path);
            Ok((name.display().to_string(), text))
        })
        .collect()
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("list {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            markdown_under(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// Text in backticks: an inline code span, or one (continued) line of a fenced block.
#[derive(Debug)]
struct Code {
    line: usize,
    text: String,
    fenced: bool,
}

/// A markdown file split into its code (spans and fenced lines) and its prose, by line.
#[derive(Debug, Default)]
struct Split {
    code: Vec<Code>,
    prose: Vec<(usize, String)>,
}

fn split(text: &str) -> Split {
    let mut out = Split::default();
    let mut fence: Option<&str> = None;
    let mut pending: Option<Code> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                pending = None;
            }
            (Some(open), Some(m)) if open == m => {
                fence = None;
                out.code.extend(pending.take());
            }
            (Some(_), _) => fenced_line(line, i + 1, &mut pending, &mut out.code),
            (None, None) => inline(line, i + 1, &mut pending, &mut out),
        }
    }
    out
}

/// A line of a fenced block; a shell line ending in `\` continues on the next one.
fn fenced_line(line: &str, number: usize, pending: &mut Option<Code>, out: &mut Vec<Code>) {
    let (body, continued) = match line.strip_suffix('\\') {
        Some(body) => (body, true),
        None => (line, false),
    };
    let code = pending.get_or_insert(Code {
        line: number,
        text: String::new(),
        fenced: true,
    });
    code.text.push_str(body);
    code.text.push(' ');
    if !continued {
        out.extend(pending.take());
    }
}

/// A prose line: its code spans (one may continue from the line before, as markdown allows
/// within a paragraph) and the prose between them. A blank line ends an unclosed span.
fn inline(line: &str, number: usize, open: &mut Option<Code>, out: &mut Split) {
    if line.trim().is_empty() {
        *open = None;
        return;
    }
    let mut prose = String::new();
    for (n, piece) in line.split('`').enumerate() {
        if n > 0 {
            // Each backtick opens or closes a span.
            match open.take() {
                Some(span) => out.code.push(span),
                None => {
                    *open = Some(Code {
                        line: number,
                        text: String::new(),
                        fenced: false,
                    })
                }
            }
        }
        match open {
            Some(span) => {
                span.text.push_str(piece);
                span.text.push(' ');
            }
            None => prose.push_str(piece),
        }
    }
    out.prose.push((number, prose));
}

/// What the docs are checked against.
pub struct Checker {
    root: PathBuf,
    cli: clap::Command,
    keys: Keys,
}

impl Checker {
    pub fn new(root: &Path) -> Result<Self> {
        let mut cli = crate::Cli::command();
        // Built, so the generated `--help` counts as a flag of every command.
        cli.build();
        Ok(Self {
            root: root.to_path_buf(),
            cli,
            keys: Keys::of(root)?,
        })
    }

    /// Every finding in `docs` ((path, text) pairs).
    pub fn check(&self, docs: &[(String, String)]) -> Vec<Finding> {
        let mut findings = Vec::new();
        for (file, text) in docs {
            let mut found = Vec::new();
            let parts = split(text);
            for code in &parts.code {
                found.extend(self.commands(code).into_iter().map(|w| (code.line, w)));
                found.extend(self.paths(code).into_iter().map(|w| (code.line, w)));
            }
            found.extend(self.links(file, &parts.prose));
            if file.ends_with("configuration.md") {
                found.extend(self.keys.config_tables(text));
            }
            if file.ends_with("tenancy.md") {
                found.extend(self.keys.tenancy_table(text));
            }
            if file == "docs/decisions/README.md" {
                found.extend(self.decisions_index(text));
            }
            // In reading order (a stable sort: one line's findings keep theirs).
            found.sort_by_key(|(line, _)| *line);
            findings.extend(found.into_iter().map(|(line, what)| Finding {
                file: file.clone(),
                line,
                what,
            }));
        }
        findings
    }

    /// The decisions index links every decision file (`docs/decisions/NNNN-*.md`).
    fn decisions_index(&self, text: &str) -> Vec<(usize, String)> {
        let dir = self.root.join("docs/decisions");
        let mut decisions: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".md") && n.starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        decisions.sort();
        decisions
            .into_iter()
            .filter(|name| !text.contains(&format!("({name})")))
            .map(|name| (1, format!("decision `{name}` is not in the index")))
            .collect()
    }

    /// `cargo xtask <command> [--flag]...` in one piece of code.
    fn commands(&self, code: &Code) -> Vec<String> {
        let mut found = Vec::new();
        for (at, _) in code.text.match_indices("cargo xtask") {
            let mut rest = &code.text[at + "cargo xtask".len()..];
            if code.fenced {
                // A shell comment, or the next command of the line, ends this one.
                for end in [" #", " && ", " || ", " | ", "; "] {
                    rest = rest.split(end).next().unwrap_or_default();
                }
            }
            found.extend(self.command_line(rest.split_whitespace().collect()));
        }
        found
    }

    fn command_line(&self, words: Vec<&str>) -> Vec<String> {
        let Some(first) = words.first() else {
            return Vec::new();
        };
        let name = first.trim_end_matches(|c: char| ",.;:)".contains(c));
        let (command, label, flags) = if name.starts_with("--") {
            (&self.cli, "cargo xtask".to_owned(), &words[..])
        } else if name.starts_with('<') || name.starts_with('…') || name.is_empty() {
            return Vec::new();
        } else {
            match self.cli.find_subcommand(name) {
                Some(sub) => (sub, format!("cargo xtask {name}"), &words[1..]),
                None => return vec![format!("`cargo xtask {name}`: there is no such command")],
            }
        };
        // A command that passes what it does not know on (`test`, to cargo test) takes any flag.
        let passes_on = command
            .get_positionals()
            .any(clap::Arg::is_allow_hyphen_values_set);
        let mut found = Vec::new();
        for word in flags.iter().map(|w| w.trim_start_matches(['[', '('])) {
            if word == "--" {
                break;
            }
            let Some(flag) = word.strip_prefix("--") else {
                continue;
            };
            let flag: String = flag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let known = command.get_arguments().any(|a| {
                a.get_long() == Some(flag.as_str())
                    || a.get_all_aliases()
                        .is_some_and(|aliases| aliases.contains(&flag.as_str()))
            });
            if !known && !passes_on && !flag.is_empty() {
                found.push(format!("`{label} --{flag}`: it has no option --{flag}"));
            }
        }
        found
    }

    /// Repository paths in one piece of code that do not exist.
    fn paths(&self, code: &Code) -> Vec<String> {
        code.text
            .split_whitespace()
            .filter_map(|word| {
                let path = repository_path(word)?;
                let exists = if ROOTED.iter().any(|p| path.starts_with(p)) {
                    matches(&self.root, &path)
                } else {
                    self.in_some_crate(&path)
                };
                (!exists).then(|| format!("`{path}` does not exist in the tree"))
            })
            .collect()
    }

    /// Relative markdown links (`[text](target)`) in the prose whose target does not exist.
    fn links(&self, file: &str, prose: &[(usize, String)]) -> Vec<(usize, String)> {
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        let mut found = Vec::new();
        for (line, text) in prose {
            for rest in text.split("](").skip(1) {
                let target = rest.split([')', ' ']).next().unwrap_or_default();
                let path = target.split('#').next().unwrap_or_default();
                if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                if !self.root.join(dir).join(path).exists() {
                    found.push((*line, format!("the link target `{target}` does not exist")));
                }
            }
        }
        found
    }

    /// A path relative to a crate (`tests/it/upgrade/mod.rs`) exists in at least one of them.
    fn in_some_crate(&self, path: &str) -> bool {
        let mut crates: Vec<PathBuf> = ["xtask", "fuzz"].map(|c| self.root.join(c)).into();
        if let Ok(entries) = std::fs::read_dir(self.root.join("crates")) {
            crates.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
        }
        crates.iter().any(|dir| matches(dir, path))
    }
}

/// Where repository paths start.
const ROOTED: [&str; 7] = [
    "crates/", "deploy/", "xtask/", "docs/", "layout/", ".ci/", "fuzz/",
];
/// Paths relative to some crate's directory.
const CRATE_RELATIVE: [&str; 3] = ["tests/", "src/", "benches/"];

/// The repository path a word of code names, if it names one: punctuation around it, an
/// `#anchor` and a `:line` suffix are not part of it.
fn repository_path(word: &str) -> Option<String> {
    let word = word.trim_matches(|c: char| "()[]{},;'\"".contains(c));
    let word = word.strip_prefix("./").unwrap_or(word);
    let rooted = ROOTED.iter().any(|p| word.starts_with(p));
    let relative = CRATE_RELATIVE.iter().any(|p| word.starts_with(p))
        && word.ends_with(".rs")
        && !word.contains('<');
    if word.contains("://") || !(rooted || relative) {
        return None;
    }
    let path = word.split(['#', ':']).next().unwrap_or_default();
    Some(path.trim_end_matches(['.', ',']).to_owned())
}

/// Whether `path` (relative to `base`) names something that exists; a component with a
/// `<placeholder>`, `*` or `…` matches any name that fits around it.
fn matches(base: &Path, path: &str) -> bool {
    let mut current = vec![base.to_path_buf()];
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let pattern = wildcard(part);
        current = current
            .iter()
            .flat_map(|dir| -> Vec<PathBuf> {
                if !pattern.contains('*') {
                    let next = dir.join(part);
                    return if next.exists() {
                        vec![next]
                    } else {
                        Vec::new()
                    };
                }
                std::fs::read_dir(dir)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok())
                            .filter(|e| glob(&pattern, &e.file_name().to_string_lossy()))
                            .map(|e| e.path())
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        if current.is_empty() {
            return false;
        }
    }
    true
}

/// A path component with every placeholder turned into `*`.
fn wildcard(part: &str) -> String {
    let mut out = String::new();
    let mut in_placeholder = false;
    for c in part.chars() {
        match c {
            '<' | '{' => {
                in_placeholder = true;
                out.push('*');
            }
            '>' | '}' => in_placeholder = false,
            '…' => out.push('*'),
            _ if in_placeholder => {}
            _ => out.push(c),
        }
    }
    out.replace("...", "*")
}

/// `name` matches `pattern`, whose only wildcard is `*` (any run of characters).
fn glob(pattern: &str, name: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// The keys each table of docs/configuration.md holds: the stanza tables as documented (whose
/// rows galactic-master's docs test holds to the parsers, through the real binaries, in both
/// directions) and the node config's keys from the list resolution itself reads.
struct Keys {
    tables: BTreeMap<&'static str, BTreeSet<String>>,
}

/// The stanza tables of docs/configuration.md.
const STANZA_TABLES: [&str; 6] = ["master", "ipam", "addresses", "route", "termination", "bgp"];

/// The CNI envelope's and the runtime's own keys, which every stanza may carry (the CNI spec's,
/// read by `galactic_core::cni`, not by a plugin's stanza parser).
const CNI_KEYS: [&str; 8] = [
    "cniVersion",
    "name",
    "type",
    "capabilities",
    "runtimeConfig",
    "args",
    "cni.dev/*",
    "prevResult",
];

impl Keys {
    fn of(root: &Path) -> Result<Self> {
        let file = "docs/configuration.md";
        let text =
            std::fs::read_to_string(root.join(file)).with_context(|| format!("read {file}"))?;
        let mut tables = BTreeMap::new();
        for name in STANZA_TABLES {
            let (_, rows) = fields_table(&text, name)
                .with_context(|| format!("{file} has no `<!-- fields: {name} -->` table"))?;
            tables.insert(name, rows.into_iter().map(|(_, key)| key).collect());
        }
        let node = galactic_core::config::node_config_keys().map(str::to_owned);
        tables.insert("node", node.collect());
        Ok(Self { tables })
    }

    /// The node table lists exactly the keys the node config accepts (the stanza tables are
    /// the docs test's).
    fn config_tables(&self, text: &str) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        for (name, accepted) in self.tables.iter().filter(|(name, _)| **name == "node") {
            let Some((line, rows)) = fields_table(text, name) else {
                found.push((1, format!("no `<!-- fields: {name} -->` table")));
                continue;
            };
            let documented: BTreeSet<&str> = rows.iter().map(|(_, k)| k.as_str()).collect();
            for (row, key) in &rows {
                if !accepted.contains(key) {
                    found.push((
                        *row,
                        format!("`{key}` ({name} table): the code reads no such key"),
                    ));
                }
            }
            for key in accepted.iter().filter(|k| !documented.contains(k.as_str())) {
                found.push((
                    line,
                    format!("`{key}`: the code reads it, the {name} table omits it"),
                ));
            }
        }
        found
    }

    /// Every key docs/tenancy.md's "Every stanza key and its owner" table names is one the code
    /// (or the CNI envelope) accepts, in a stanza or in the node config.
    fn tenancy_table(&self, text: &str) -> Vec<(usize, String)> {
        let heading = "## Every stanza key and its owner";
        let Some(start) = text.lines().position(|l| l.trim() == heading) else {
            return vec![(1, format!("no `{heading}` section"))];
        };
        let mut known: BTreeSet<String> = self.tables.values().flatten().cloned().collect();
        known.extend(CNI_KEYS.map(str::to_owned));
        let ipam_node = galactic_core::config::IPAM_NODE_KEYS;
        known.extend(
            ipam_node
                .iter()
                .map(|(stanza_key, _)| format!("ipam.{stanza_key}")),
        );
        let mut found = Vec::new();
        let rows = text.lines().enumerate().skip(start + 1);
        let rows = rows.skip_while(|(_, l)| !l.starts_with('|')).skip(2);
        for (i, row) in rows.take_while(|(_, l)| l.starts_with('|')) {
            let first = row.trim_matches('|').split('|').next().unwrap_or_default();
            for key in first.split('`').skip(1).step_by(2) {
                if !known.contains(key) {
                    found.push((
                        i + 1,
                        format!("`{key}`: no stanza or node-config key of that name"),
                    ));
                }
            }
        }
        found
    }
}

/// The first-column keys of the table after `<!-- fields: NAME -->`, with their lines, and the
/// marker's line.
fn fields_table(text: &str, name: &str) -> Option<(usize, Vec<(usize, String)>)> {
    let marker = format!("<!-- fields: {name} -->");
    let start = text.lines().position(|l| l.trim() == marker)?;
    let rows = text
        .lines()
        .enumerate()
        .skip(start + 3)
        .take_while(|(_, l)| l.starts_with('|'))
        .filter_map(|(i, l)| {
            let key = l
                .trim_matches('|')
                .split('|')
                .next()?
                .trim()
                .trim_matches('`');
            Some((i + 1, key.to_owned()))
        })
        .collect();
    Some((start + 1, rows))
}

#[cfg(test)]
mod tests {
    // A test fails by panicking.
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn root() -> PathBuf {
        crate::workspace_root()
    }

    fn findings_in(file: &str, text: &str) -> Vec<String> {
        let checker = Checker::new(&root()).unwrap();
        let docs = [(file.to_owned(), text.to_owned())];
        checker
            .check(&docs)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn real(file: &str) -> String {
        std::fs::read_to_string(root().join(file)).unwrap()
    }

    #[test]
    fn the_real_tree_passes() {
        let docs = documents(&root()).unwrap();
        assert!(docs.iter().any(|(f, _)| f == "docs/configuration.md"));
        let findings = Checker::new(&root()).unwrap().check(&docs);
        let list: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert!(list.is_empty(), "{}", list.join("\n"));
    }

    #[test]
    fn a_made_up_command_flag_and_path_fail_and_real_ones_pass() {
        let text = "Run `cargo xtask frobnicate`, then `cargo xtask demo --no-such-flag --release`,\n\
                    read `crates/galactic-core/src/no_such_file.rs` and `tests/no_such_suite.rs`\n\
                    ([gone](decisions/0999-none.md), [here](ipam.md#the-store)).\n\
                    `cargo xtask --helpp`. Fine: `cargo xtask --help`, `cargo xtask <command> --help`, `layout/<plugin>.ld`,\n\
                    `deploy/crds/*.yaml`, `docs/ipam.md#the-store`, `tests/it/upgrade/mod.rs`.\n\
                    ```sh\n\
                    cargo xtask test --no-fail-fast -- --test-threads 1   # --not-a-flag\n\
                    cargo xtask build-and-stage --release \\\n    --bin-dir /opt/cni/bin --made-up-too\n\
                    ```\n\
                    A span across lines: `kubectl get nads -o yaml >\n\
                    nads.yaml; cargo xtask lint-manifests --nope nads.yaml` (then [x](nope.md)).\n";
        let found = findings_in("docs/made-up.md", text);
        let expected = [
            "docs/made-up.md:1: `cargo xtask frobnicate`: there is no such command",
            "docs/made-up.md:1: `cargo xtask demo --no-such-flag`: it has no option --no-such-flag",
            "docs/made-up.md:2: `crates/galactic-core/src/no_such_file.rs` does not exist in the tree",
            "docs/made-up.md:2: `tests/no_such_suite.rs` does not exist in the tree",
            "docs/made-up.md:3: the link target `decisions/0999-none.md` does not exist",
            "docs/made-up.md:4: `cargo xtask --helpp`: it has no option --helpp",
            "docs/made-up.md:8: `cargo xtask build-and-stage --made-up-too`: it has no option --made-up-too",
            "docs/made-up.md:11: `cargo xtask lint-manifests --nope`: it has no option --nope",
            "docs/made-up.md:12: the link target `nope.md` does not exist",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn a_made_up_key_fails_and_so_does_a_key_left_out() {
        let real_text = real("docs/configuration.md");
        assert!(findings_in("docs/configuration.md", &real_text).is_empty());
        let row = real_text
            .lines()
            .find(|l| l.starts_with("| `log_max_bytes` |"))
            .unwrap();
        let edited = real_text.replace(
            row,
            "| `log_max_byte` | `10485760` | `1048576` | a misspelt key |",
        );
        let found = findings_in("docs/configuration.md", &edited);
        assert_eq!(found.len(), 2, "{found:#?}");
        let has = |what: &str| found.iter().any(|f| f.contains(what));
        assert!(has(
            "`log_max_byte` (node table): the code reads no such key"
        ));
        assert!(has(
            "`log_max_bytes`: the code reads it, the node table omits it"
        ));

        let tenancy = real("docs/tenancy.md").replace("`multi_queue`", "`multiqueue`");
        let found = findings_in("docs/tenancy.md", &tenancy);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("`multiqueue`: no stanza or node-config key"));
    }

    #[test]
    fn a_decision_left_out_of_the_index_fails() {
        let index = real("docs/decisions/README.md");
        assert!(findings_in("docs/decisions/README.md", &index).is_empty());
        let row = index.lines().find(|l| l.contains("(0074-")).unwrap();
        let found = findings_in("docs/decisions/README.md", &index.replace(row, ""));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("`0074-one-crate-per-owner.md` is not in the index"));
    }

    #[test]
    fn the_tables_and_the_node_list_are_read() {
        let keys = Keys::of(&root()).unwrap();
        let set = |name: &str| keys.tables[name].iter().cloned().collect::<Vec<_>>();
        assert!(set("master").contains(&"vnet_hdr".to_owned()));
        assert_eq!(set("termination"), ["network", "via"]);
        assert_eq!(set("route"), ["terminations", "vpc", "vpcattachment"]);
        assert!(set("node").contains(&"ipam_lock_timeout_ms".to_owned()));
    }

    #[test]
    fn placeholders_and_globs_match_only_what_fits() {
        assert!(glob("*.ld", "galactic-cni.ld"));
        assert!(!glob("*.ld", "link.rs"));
        assert!(glob("vpc-*.json", "vpc-1.json"));
        assert!(!glob("vpc-*.json", "vpc-1.yaml"));
        assert_eq!(wildcard("<plugin>.ld"), "*.ld");
        assert_eq!(wildcard("G{vpc:9}V"), "G*V");
        assert!(matches(&root(), "layout/<plugin>.ld"));
        assert!(!matches(&root(), "layout/<plugin>.nope"));
    }
}
