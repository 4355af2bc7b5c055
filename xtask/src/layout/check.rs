//! Whether a hot-code script still matches the code it orders, from the link map of the build it
//! was applied to ([`super::map`]). Each function of the script (one `*(.text.<f>
//! .text.unlikely.<f>)` statement, with the `*libc.a:<member>` statements written for it just
//! before) is
//! - **hot**: one of its input sections is in `.text.hot` (placed by its own statements, by an
//!   earlier statement whose pattern also matches it, or, for a C function, its symbol is defined
//!   in a libc member placed there);
//! - **stale**: no input section of the link matches its statements, kept or garbage-collected:
//!   it was renamed, its crate was, or it is no longer generated (inlined, removed);
//! - **elsewhere**: its sections exist but none went to `.text.hot` (the linker's garbage
//!   collection dropped them: nothing calls it any more).

use super::map::{Map, Pattern};

/// One function of a script and the statements that place it.
#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub patterns: Vec<Pattern>,
    /// The statement `*(.text.<f> …)` as written.
    pub text: String,
}

impl Function {
    /// `<f>` of its `.text.<f>` pattern, if it is a C name (no wildcard, not mangled Rust): libc
    /// is placed by member, so such a function may be known by its symbol only.
    fn c_name(&self) -> Option<&str> {
        let name = self
            .patterns
            .last()?
            .sections
            .first()?
            .strip_prefix(".text.")?;
        let rust = name.starts_with("_R") || name.starts_with("_ZN");
        (!rust && !name.contains('*')).then_some(name)
    }
}

/// The statements of a script's `.text.hot`, in order, and its functions.
pub struct Script {
    pub statements: Vec<String>,
    pub functions: Vec<Function>,
}

/// Reads the statements of `.text.hot` out of a script's text.
pub fn script(text: &str) -> Script {
    let mut statements = Vec::new();
    let mut functions = Vec::new();
    let mut members: Vec<Pattern> = Vec::new();
    let body = text.split_once(".text.hot : {").map_or("", |(_, rest)| {
        rest.split_once('}').map_or(rest, |(b, _)| b)
    });
    for line in body.lines().map(str::trim) {
        let Some(pattern) = Pattern::parse(line) else {
            continue;
        };
        statements.push(line.to_owned());
        if pattern.file.contains(':') {
            members.push(pattern);
            continue;
        }
        members.push(pattern);
        functions.push(Function {
            patterns: std::mem::take(&mut members),
            text: line.to_owned(),
        });
    }
    Script {
        statements,
        functions,
    }
}

/// Where a function of the script ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Hot,
    Elsewhere,
    Stale,
}

/// The placement of every function of `script` in the link `map` describes, or why the map does
/// not describe a link with this script.
pub fn placements(script: &Script, map: &Map) -> Result<Vec<Placement>, String> {
    if map.hot.is_none() {
        return Err("the binary was linked without its script (no .text.hot)".into());
    }
    let linked: Vec<&str> = map.statements.iter().map(|s| s.text.as_str()).collect();
    if linked != script.statements {
        return Err(format!(
            "the map's .text.hot ({} statements) is not the script's ({}): linked with another \
             version of the script (rebuild)",
            linked.len(),
            script.statements.len()
        ));
    }
    let hot: Vec<_> = map
        .inputs
        .iter()
        .filter(|(o, _)| o.as_deref() == Some(".text.hot"))
        .map(|(_, i)| i)
        .collect();
    let mut statement = 0;
    let mut out = Vec::with_capacity(script.functions.len());
    for function in &script.functions {
        let own = &map.statements[statement..statement + function.patterns.len()];
        statement += function.patterns.len();
        let matches =
            |input: &super::map::Input| function.patterns.iter().any(|p| p.matches(input));
        let symbol = |input: &super::map::Input| {
            function
                .c_name()
                .is_some_and(|name| input.symbols.iter().any(|s| s == name))
        };
        let placement = if own.iter().any(|s| !s.placed.is_empty())
            || hot.iter().any(|i| matches(i) || symbol(i))
        {
            Placement::Hot
        } else if map.inputs.iter().any(|(_, i)| matches(i) || symbol(i)) {
            Placement::Elsewhere
        } else {
            Placement::Stale
        };
        out.push(placement);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::map;
    use super::*;

    const SCRIPT: &str = "/* header */\nSECTIONS {\n  .text.hot : {\n    \
        *libc.a:exit.lo(.text .text.*)\n    \
        *(.text.exit .text.unlikely.exit)\n    \
        *(.text.__funcs_on_exit .text.unlikely.__funcs_on_exit)\n    \
        *(.text._RNvCs*_1h3one .text.unlikely._RNvCs*_1h3one)\n    \
        *(.text._RNvCs*_1h3one* .text.unlikely._RNvCs*_1h3one*)\n    \
        *(.text._RNvCs*_1h4gone .text.unlikely._RNvCs*_1h4gone)\n    \
        *(.text._RNvCs*_1h6unused .text.unlikely._RNvCs*_1h6unused)\n  \
        }\n} INSERT BEFORE .text;\n";

    /// The map of a link with [`SCRIPT`]: `one`'s `.1` part taken by the pattern before its own,
    /// `gone` renamed to `went`, `unused` garbage-collected.
    fn map_text(script: &str) -> String {
        let statements: Vec<String> = script
            .lines()
            .filter(|l| l.trim_start().starts_with('*'))
            .map(|l| format!(" {}", l.trim()))
            .collect();
        let input = |name: &str, file: &str| format!(" {name} 0x0000000000401000 0x10 {file}");
        [
            "Discarded input sections".to_owned(),
            input(".text._RNvCsQ_1h6unused", "h.o"),
            "Linker script and memory map".to_owned(),
            ".text.hot       0x0000000000401000       0x40".to_owned(),
            statements[0].clone(),
            input(".text.dummy", "/x/libc.a(exit.lo)"),
            "                0x0000000000401000                __funcs_on_exit".to_owned(),
            input(".text.exit", "/x/libc.a(exit.lo)"),
            statements[1].clone(),
            statements[2].clone(),
            statements[3].clone(),
            input(".text._RNvCsQ_1h3one", "h.o"),
            input(".text._RNvCsQ_1h3one.1", "h.o"),
            statements[4].clone(),
            statements[5].clone(),
            statements[6].clone(),
            ".text           0x0000000000402000       0x10".to_owned(),
            input(".text._RNvCsQ_1h4went", "h.o"),
        ]
        .join("\n")
    }

    #[test]
    fn functions_are_grouped_with_their_libc_members() {
        let script = script(SCRIPT);
        assert_eq!(script.statements.len(), 7);
        let sizes: Vec<usize> = script.functions.iter().map(|f| f.patterns.len()).collect();
        assert_eq!(sizes, [2, 1, 1, 1, 1, 1]);
        assert_eq!(script.functions[0].c_name(), Some("exit"));
        assert_eq!(script.functions[2].c_name(), None);
    }

    #[test]
    fn each_function_is_hot_stale_or_elsewhere() {
        let script = script(SCRIPT);
        let map = map::parse(&map_text(SCRIPT));
        use Placement::*;
        assert_eq!(
            placements(&script, &map),
            Ok(vec![Hot, Hot, Hot, Hot, Stale, Elsewhere])
        );
    }

    #[test]
    fn a_map_of_another_script_or_of_none_is_refused() {
        let script = script(SCRIPT);
        let edited = SCRIPT.replace("1h4gone", "1h4went");
        let map = map::parse(&map_text(&edited));
        assert!(
            placements(&script, &map).is_err_and(|e| e.contains("another version of the script"))
        );
        let unlaid = map::parse(&map_text(SCRIPT).replace(".text.hot ", ".text.none"));
        assert!(placements(&script, &unlaid).is_err_and(|e| e.contains("without its script")));
    }
}
