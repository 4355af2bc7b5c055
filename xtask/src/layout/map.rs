//! What a GNU ld link map (`-Wl,-Map=…`, written for every release plugin by `layout/link.rs`)
//! says about a hot-code script: which input sections each of its statements placed in
//! `.text.hot`, and every input section of the link (kept or garbage-collected), to tell a
//! statement that matched nothing from one whose sections an earlier statement had taken.
//!
//! The map's text is ld's: in the "Discarded input sections" and "Linker script and memory map"
//! parts, an input section is a line ` <name> <address> <size> <file>` (a long name on a line of
//! its own, the rest on the next), a statement of the script a line ` <file-pattern>(<section
//! patterns>)`, a global symbol a line of 16 spaces, its address and its name, an output section
//! a line starting with its name.

/// One input section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub name: String,
    /// `path` or `archive(member)`.
    pub file: String,
    pub size: u64,
    /// The global symbols it defines (ld lists no local ones).
    pub symbols: Vec<String>,
}

/// A statement of `.text.hot` and the input sections it placed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Statement {
    pub text: String,
    pub placed: Vec<Input>,
}

/// The parts of a map the check reads.
#[derive(Debug, Default)]
pub struct Map {
    /// `.text.hot`'s address and size, if the link had one.
    pub hot: Option<(u64, u64)>,
    /// `.text.hot`'s statements, in order.
    pub statements: Vec<Statement>,
    /// Every input section, by the output section it went to (`None`: discarded).
    pub inputs: Vec<(Option<String>, Input)>,
}

const HOT: &str = ".text.hot";

/// Where the parser is.
enum Part {
    Before,
    Discarded,
    Layout,
}

/// Parses the text of a map.
pub fn parse(text: &str) -> Map {
    let mut parser = Parser {
        map: Map::default(),
        part: Part::Before,
        output: None,
        pending_output: None,
        pending_input: None,
    };
    for line in text.lines() {
        parser.line(line);
    }
    parser.map
}

/// The map so far and where the parser is in it.
struct Parser {
    map: Map,
    part: Part,
    /// The output section the lines belong to.
    output: Option<String>,
    /// An output or input section whose name stood alone on its line.
    pending_output: Option<String>,
    pending_input: Option<String>,
}

impl Parser {
    fn line(&mut self, line: &str) {
        if let Some(part) = heading(line) {
            self.part = part;
        }
        if matches!(self.part, Part::Before) || line.is_empty() {
            return;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if self.completes_pending(&fields) {
            return;
        }
        let indented = line.starts_with(' ');
        if !indented && matches!(self.part, Part::Layout) {
            self.output_section(line, &fields);
        } else {
            self.input_line(line, &fields);
        }
    }

    /// The rest of a section whose name stood alone on the line before; whether `fields` was it.
    fn completes_pending(&mut self, fields: &[&str]) -> bool {
        if let Some(name) = self.pending_output.take() {
            self.output = Some(name.clone());
            self.map.open_output(&name, fields);
            return true;
        }
        if let Some(name) = self.pending_input.take() {
            if fields.len() >= 3 && fields[0].starts_with("0x") {
                self.map.add_input(&self.output, &self.part, name, fields);
                return true;
            }
        }
        false
    }

    /// An unindented line of the layout: an output section opens, or the sections end.
    fn output_section(&mut self, line: &str, fields: &[&str]) {
        if line.starts_with('.') || line.starts_with("/DISCARD/") {
            if fields.len() == 1 {
                self.pending_output = Some(fields[0].to_owned());
            } else {
                self.output = Some(fields[0].to_owned());
                self.map.open_output(fields[0], &fields[1..]);
            }
        } else {
            self.output = None;
        }
    }

    /// A symbol, a statement of the hot section, or an input section.
    fn input_line(&mut self, line: &str, fields: &[&str]) {
        let Some(first) = fields.first() else {
            return;
        };
        if line.starts_with("                ") {
            // A symbol (address, name) of the input section above, or an assignment.
            if fields.len() == 2 && first.starts_with("0x") {
                self.map.add_symbol(fields[1]);
            }
        } else if first.contains('(') {
            if self.output.as_deref() == Some(HOT) {
                self.map.statements.push(Statement {
                    text: fields.join(" "),
                    placed: Vec::new(),
                });
            }
        } else if first.starts_with('.') || first.starts_with("COMMON") {
            if fields.len() == 1 {
                self.pending_input = Some((*first).to_owned());
            } else if fields.len() >= 4 && fields[1].starts_with("0x") {
                self.map
                    .add_input(&self.output, &self.part, (*first).to_owned(), &fields[1..]);
            }
        }
    }
}

/// The part of the map a heading line starts.
fn heading(line: &str) -> Option<Part> {
    match line {
        "Discarded input sections" => Some(Part::Discarded),
        "Memory Configuration" => Some(Part::Before),
        "Linker script and memory map" => Some(Part::Layout),
        _ => None,
    }
}

impl Map {
    /// `fields`: the output section's address and size.
    fn open_output(&mut self, name: &str, fields: &[&str]) {
        if name == HOT {
            let address = fields.first().and_then(|f| hex(f));
            let size = fields.get(1).and_then(|f| hex(f));
            if let (Some(address), Some(size)) = (address, size) {
                self.hot = Some((address, size));
            }
        }
    }

    /// `fields`: address, size, file (a path may hold spaces).
    fn add_input(&mut self, output: &Option<String>, part: &Part, name: String, fields: &[&str]) {
        let (Some(size), Some(file)) = (fields.get(1).and_then(|f| hex(f)), fields.get(2..)) else {
            return;
        };
        let input = Input {
            name,
            file: file.join(" "),
            size,
            symbols: Vec::new(),
        };
        let output = match part {
            Part::Discarded => None,
            _ => output.clone(),
        };
        if output.as_deref() == Some(HOT) {
            if let Some(statement) = self.statements.last_mut() {
                statement.placed.push(input.clone());
            }
        }
        self.inputs.push((output, input));
    }

    fn add_symbol(&mut self, symbol: &str) {
        if let Some((output, input)) = self.inputs.last_mut() {
            input.symbols.push(symbol.to_owned());
            if output.as_deref() == Some(HOT) {
                if let Some(placed) = self.statements.last_mut().and_then(|s| s.placed.last_mut()) {
                    placed.symbols.push(symbol.to_owned());
                }
            }
        }
    }
}

fn hex(field: &str) -> Option<u64> {
    u64::from_str_radix(field.strip_prefix("0x")?, 16).ok()
}

/// A statement of a script: a file pattern and the section patterns it takes from those files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub file: String,
    pub sections: Vec<String>,
}

impl Pattern {
    /// `*libc.a:malloc.lo(.text .text.*)`, `*(.text.f .text.unlikely.f)`.
    pub fn parse(statement: &str) -> Option<Self> {
        let (file, rest) = statement.trim().split_once('(')?;
        let sections = rest.strip_suffix(')')?;
        Some(Self {
            file: file.to_owned(),
            sections: sections.split_whitespace().map(str::to_owned).collect(),
        })
    }

    /// Whether ld would take `input` for this statement: `archive:member` patterns match an
    /// `archive(member)` file by both parts, others the whole file name.
    pub fn matches(&self, input: &Input) -> bool {
        let file = match self.file.split_once(':') {
            Some((archive, member)) => match input.file.strip_suffix(')') {
                Some(f) => f
                    .split_once('(')
                    .is_some_and(|(a, m)| glob(archive, a) && glob(member, m)),
                None => false,
            },
            None => glob(&self.file, &input.file),
        };
        file && self.sections.iter().any(|s| glob(s, &input.name))
    }
}

/// ld's wildcards as the scripts use them: `*` any run, `?` any one character (no `[…]`).
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    // Cheap refusal first: most candidates differ in the literal head.
    let head = p.iter().take_while(|b| **b != b'*' && **b != b'?').count();
    if !t.starts_with(&p[..head]) {
        return false;
    }
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == b'?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            // Let the last `*` take one more character and retry.
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|b| *b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped as GNU ld 2.40 writes it (trimmed).
    const MAP: &str = "\
Archive member included to satisfy reference by file (symbol)

/x/libc.a(exit.lo)            h.o (exit)

Discarded input sections

 .text.gone     0x0000000000000000       0x12 h.o
 .text._RNvCsAbc_1h9long_name_dropped
                0x0000000000000000       0x20 h.o

Memory Configuration

Name             Origin             Length             Attributes
*default*        0x0000000000000000 0xffffffffffffffff

Linker script and memory map

LOAD h.o
                [!provide]                        PROVIDE (__executable_start = SEGMENT_START (\"text-segment\", 0x400000))
.init           0x0000000000401000        0x3
 *(SORT_NONE(.init))
 .init          0x0000000000401000        0x3 /x/crti.o
                0x0000000000401000                _init

.text.hot       0x0000000000401010       0x5d
 *libc.a:exit.lo(.text .text.*)
 .text.dummy    0x0000000000401010        0x1 /x/libc.a(exit.lo)
                0x0000000000401010                __funcs_on_exit
 .text.exit     0x0000000000401041       0x1b /x/libc.a(exit.lo)
                0x0000000000401041                exit
 *(.text.exit .text.unlikely.exit)
 *(.text._RNvCs*_1h7hot_one .text.unlikely._RNvCs*_1h7hot_one)
 *fill*         0x000000000040105c        0x4 
 .text._RNvCslCIAqueYAw2_1h7hot_one
                0x0000000000401060        0xd h.h.fbdfbb88-cgu.0.rcgu.o
 *(.text.nothing_here .text.unlikely.nothing_here)

.text           0x0000000000401070       0x30
 *(.text.unlikely .text.*_unlikely .text.unlikely.*)
 .text.cold_one 0x0000000000401070       0x30 h.o
OUTPUT(h elf64-x86-64)
";

    #[test]
    fn the_hot_section_its_statements_and_every_input_are_read() {
        let map = parse(MAP);
        assert_eq!(map.hot, Some((0x401010, 0x5d)));
        let texts: Vec<&str> = map.statements.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "*libc.a:exit.lo(.text .text.*)",
                "*(.text.exit .text.unlikely.exit)",
                "*(.text._RNvCs*_1h7hot_one .text.unlikely._RNvCs*_1h7hot_one)",
                "*(.text.nothing_here .text.unlikely.nothing_here)",
            ]
        );
        let placed: Vec<usize> = map.statements.iter().map(|s| s.placed.len()).collect();
        assert_eq!(placed, [2, 0, 1, 0]);
        assert_eq!(map.statements[0].placed[0].symbols, ["__funcs_on_exit"]);
        assert_eq!(
            map.statements[2].placed[0].file,
            "h.h.fbdfbb88-cgu.0.rcgu.o"
        );
        let inputs: Vec<(Option<&str>, &str)> = map
            .inputs
            .iter()
            .map(|(o, i)| (o.as_deref(), i.name.as_str()))
            .collect();
        assert_eq!(
            inputs,
            [
                (None, ".text.gone"),
                (None, ".text._RNvCsAbc_1h9long_name_dropped"),
                (Some(".init"), ".init"),
                (Some(".text.hot"), ".text.dummy"),
                (Some(".text.hot"), ".text.exit"),
                (Some(".text.hot"), ".text._RNvCslCIAqueYAw2_1h7hot_one"),
                (Some(".text"), ".text.cold_one"),
            ]
        );
    }

    #[test]
    fn a_map_without_a_hot_section_has_no_statements() {
        let map = parse(&MAP.replace(".text.hot ", ".text.other"));
        assert_eq!(map.hot, None);
        assert!(map.statements.is_empty());
    }

    #[test]
    fn globs_are_lds() {
        assert!(glob("*", ""));
        assert!(glob(".text.*", ".text.a.b"));
        assert!(!glob(".text.*", ".text"));
        assert!(glob("_RNvCs*_1h7hot_one", "_RNvCslCIAqueYAw2_1h7hot_one"));
        assert!(glob("a*b*c", "aXbYbZc"));
        assert!(!glob("a*b*c", "aXbYbZ"));
        assert!(glob("f?o", "foo"));
        assert!(!glob("foo", "foo.1"));
    }

    #[test]
    fn statements_match_by_file_and_section() {
        let input = |name: &str, file: &str| Input {
            name: name.into(),
            file: file.into(),
            size: 1,
            symbols: vec![],
        };
        let libc = Pattern::parse("*libc.a:exit.lo(.text .text.*)").expect("a statement");
        assert_eq!(libc.file, "*libc.a:exit.lo");
        assert!(libc.matches(&input(".text.exit", "/x/libc.a(exit.lo)")));
        assert!(!libc.matches(&input(".text.exit", "/x/libc.a(atexit.lo)")));
        assert!(!libc.matches(&input(".text.exit", "/x/exit.lo")));
        let rust = Pattern::parse("*(.text.f* .text.unlikely.f*)").expect("a statement");
        assert!(rust.matches(&input(".text.unlikely.f.3", "a.o")));
        assert!(!rust.matches(&input(".data.f", "a.o")));
        assert_eq!(Pattern::parse("no statement"), None);
    }
}
