//! The runtime's layering, checked rather than hoped for (issue 25).
//!
//! This test reads every `.rs` file under `runtime/src`, collects the paths it names through
//! `crate::` (in `use` lines and in code), `$crate::`, `super::` and `self::`, and checks them
//! against the layer table below, which `docs/DESIGN.md` draws as its opening diagram:
//!
//! ```text
//! top          public types: Context, Stream, buffers, Module, Graph, pipelines, ...
//!   |
//! backends     cuda/   cpu/      (peers: neither imports the other)
//!   |
//! driver       driver/           (the function table; returns the vocabulary's errors)
//!   |
//! vocabulary   error kinds, launch configuration, element and access kinds, ids, rules
//!   |
//! sys          sys/              (raw FFI types)
//! ```
//!
//! A module may import its own layer and any layer below it, never one above; the two
//! backends never import each other; and no import circle may join two modules of the table
//! (top-level modules, and the submodules it places on their own, such as `launch::config`).
//! Comments, doc comments and string literals are not read, so a doc link up the layers is
//! allowed (it is not a dependency of the code).
//!
//! The checker is a pure function of a source tree, so [`planted_violations_are_caught`]
//! feeds it a small synthetic tree with one violation of each rule and expects each one
//! reported: the check can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// The layers, top to bottom. A module may import its own layer and the ones below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Sys,
    Vocabulary,
    Driver,
    Backend,
    Communication,
    Top,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Sys => "the sys layer",
            Layer::Vocabulary => "the shared vocabulary",
            Layer::Driver => "the driver layer",
            Layer::Backend => "a backend",
            Layer::Communication => "the communication backend",
            Layer::Top => "a public-type module",
        })
    }
}

/// Every module of runtime/src and its layer; the longest matching prefix of a path wins,
/// so a vocabulary submodule can sit inside a top-level module of another layer. A module
/// missing here fails the test: place each new module on purpose.
const LAYERS: &[(&str, Layer)] = &[
    // Top: the public types and what assembles them.
    ("", Layer::Top), // lib.rs, the crate root
    ("communicator", Layer::Top),
    ("context", Layer::Top),
    ("event", Layer::Top),
    ("graph", Layer::Top),
    ("launch", Layer::Top),
    ("launcher", Layer::Top),
    ("memory", Layer::Top),
    ("module", Layer::Top),
    ("peer", Layer::Top),
    ("pipeline", Layer::Top),
    ("private", Layer::Top),
    ("stream", Layer::Top),
    ("window", Layer::Top),
    ("interop", Layer::Top),
    // Backends, side by side.
    ("cuda", Layer::Backend),
    ("cpu", Layer::Backend),
    // The communication backend (NCCL, its twin the CPU collectives in `cpu`): above the CUDA
    // backend, whose streams and captures NCCL's calls run on, as NCCL runs on CUDA.
    ("nccl", Layer::Communication),
    // The driver's function table.
    ("driver", Layer::Driver),
    // The shared vocabulary: plain data and pure rules both backends and the public types use.
    ("call_scope", Layer::Vocabulary),
    ("collective", Layer::Vocabulary),
    ("error", Layer::Vocabulary),
    ("free_rule", Layer::Vocabulary),
    ("image", Layer::Vocabulary),
    ("launch::config", Layer::Vocabulary),
    ("launch::index", Layer::Vocabulary),
    ("launch::param", Layer::Vocabulary),
    ("launch::violation", Layer::Vocabulary),
    ("panic_log", Layer::Vocabulary),
    // Rank discovery: not plain data, but it imports nothing of the crate, and `error` and
    // the NCCL communicator name its types.
    ("rendezvous", Layer::Vocabulary),
    ("vocab", Layer::Vocabulary),
    // The backend interface returns the crate's `Result`, so it sits above `error`, which
    // carries the vocabulary's faults: its own entry, or `error` and `vocab` would circle.
    ("vocab::backend", Layer::Vocabulary),
    // The bottom: raw FFI types.
    ("sys", Layer::Sys),
];

/// Imports that run against the layers today, each with the reason it is still there. The
/// test fails when one of these disappears too, so the list stays exact and only shrinks.
/// Each is (file under src, the LAYERS entry it imports, why).
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "cuda/capture.rs",
        "nccl",
        "a capture's end runs the NCCL aborts that were deferred while it was open (aborting a \
         communicator inside a capture would invalidate it); a hook registered by the \
         communication backend would remove this",
    ),
    ("nccl/adapt.rs", "context", NCCL),
    ("nccl/adapt.rs", "memory", NCCL),
    ("nccl/adapt.rs", "stream", NCCL),
    ("nccl/comm.rs", "context", NCCL),
    ("nccl/ops.rs", "memory", NCCL),
    ("nccl/ops.rs", "stream", NCCL),
    ("nccl/stage.rs", "stream", NCCL),
    ("nccl/watchdog.rs", "event", NCCL),
    ("nccl/watchdog.rs", "stream", NCCL),
];

/// Circles that exist today: (their members, sorted; why). Same rule as [`KNOWN`].
const KNOWN_CIRCLES: &[(&[&str], &str)] = &[
    (
        &["context", "cuda", "event", "memory", "nccl", "stream"],
        NCCL,
    ),
    (
        &["graph", "launch"],
        "the launch traits name graph's `ConditionHandle` (`KernelArg::condition`, \
         `KernelArgs::visit_conditions`: a kernel argument that sets a graph condition), and \
         graph launches typed kernels; the condition argument's kind belongs in the vocabulary",
    ),
];

/// Why the NCCL files still reach public types.
const NCCL: &str = "cuda/nccl/ takes and returns public types (Context, Stream, buffers, Event); \
     issue 25 gives NCCL a communication backend of its own, with adapters above it (helper \
     `shapes`)";

/// One path a source file names: where, and the module path it reaches.
#[derive(Clone, Debug)]
struct Reference {
    file: String,
    line: usize,
    from: Vec<String>,
    to: Vec<String>,
}

/// What the checker found wrong.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Finding {
    /// `file` (in unit `from`, layer `from_layer`) imports `to` of a higher layer or a peer
    /// backend.
    Against {
        file: String,
        line: usize,
        from: String,
        to: String,
        path: String,
        why: String,
    },
    /// A module that the layer table does not place.
    Unplaced { module: String, file: String },
    /// A circle of imports between modules of the layer table.
    Circle(Circle),
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Against {
                file,
                line,
                path,
                why,
                ..
            } => {
                write!(f, "{file}:{line}: `crate::{path}`: {why}")
            }
            Finding::Unplaced { module, file } => write!(
                f,
                "{file}: module `{module}` has no layer; add it to LAYERS in runtime/tests/layers.rs \
                 and to the diagram in docs/DESIGN.md"
            ),
            Finding::Circle(circle) => write!(
                f,
                "import circle between modules: {}{}; move the shared part down a layer",
                circle.example.join(" -> "),
                if circle.members.len() + 1 > circle.example.len() {
                    format!(" (and through them: {})", circle.members.join(", "))
                } else {
                    String::new()
                }
            ),
        }
    }
}

// ----- reading source -------------------------------------------------------------------

/// The source with comments, string and char literals blanked out (newlines kept, so line
/// numbers stay right).
fn strip(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j]);
            i = j;
        } else if (c == b'r' || c == b'b')
            && !prev_is_ident(b, i)
            && raw_string_start(b, i).is_some()
        {
            let (hashes, body) = raw_string_start(b, i).unwrap_or((0, i));
            let closing: Vec<u8> = std::iter::once(b'"')
                .chain((0..hashes).map(|_| b'#'))
                .collect();
            let end = b[body..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(b.len(), |n| body + n + closing.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): blank only the former.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|n| i + 2 + n + 1)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                // A multi-byte char literal, or a lifetime.
                let ch_len = source[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = source[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// At `r"`, `r#"`, `br"`, `br#"`: the number of `#`s and where the body starts.
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    (b.get(j) == Some(&b'"')).then_some((hashes, j + 1))
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Sep, // `::`
    Open,
    Close,
    Comma,
    Semi,
    Other,
}

/// Tokens with their line numbers; only what paths and `use` trees need.
fn tokens(stripped: &str) -> Vec<(Tok, usize)> {
    let b = stripped.as_bytes();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(stripped[start..i].to_string()), line));
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((
                match c {
                    b'{' => Tok::Open,
                    b'}' => Tok::Close,
                    b',' => Tok::Comma,
                    b';' => Tok::Semi,
                    _ => Tok::Other,
                },
                line,
            ));
            i += stripped[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// Expands the use tree starting at `toks[*i]` into whole paths (`a::{b, c::d}` gives
/// `a::b` and `a::c::d`), stopping after the closing `;`, `,` or `}` of this tree.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<UsePath>) {
    let mut path = prefix.to_vec();
    let mut rename = None;
    let line = toks.get(*i).map_or(0, |t| t.1);
    while let Some((tok, _)) = toks.get(*i) {
        match tok {
            Tok::Ident(name) if name == "as" => {
                if let Some((Tok::Ident(alias), _)) = toks.get(*i + 1) {
                    rename = Some(alias.clone());
                }
                *i += 2;
            }
            Tok::Ident(name) => {
                path.push(name.clone());
                *i += 1;
            }
            Tok::Sep => *i += 1,
            Tok::Open => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Close) => {
                            *i += 1;
                            break;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        Some(_) => use_tree(toks, i, &path, out),
                    }
                }
                return;
            }
            Tok::Comma | Tok::Close | Tok::Semi => break,
            Tok::Other => *i += 1, // `*`
        }
    }
    out.push(UsePath { path, line, rename });
}

/// One leaf of a `use` tree: the whole path, its line, and its `as` name if renamed.
struct UsePath {
    path: Vec<String>,
    line: usize,
    rename: Option<String>,
}

/// The module path of a file under src: `cuda/graph/mod.rs` is `cuda::graph`, `lib.rs` is the
/// root.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    if parts.first().map(String::as_str) == Some("bin") {
        return vec!["bin".into()];
    }
    parts
}

/// Resolves a path as written to a path from the crate root, or `None` for a path that
/// leaves the crate (`std::`, a dependency, a local item).
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    match first {
        "crate" | "$crate" => Some(path[1..].to_vec()),
        "self" | "super" => {
            // `self` is the file's module; each `super` goes one up. A file `a/b.rs` is
            // module `a::b`; in `a/mod.rs`, `self` is `a`.
            let mut base = module.to_vec();
            let mut rest = path;
            if first == "self" {
                rest = &path[1..];
            }
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => None,
    }
}

/// Every path into the crate that `file` names, outside comments and strings. Inline
/// modules (`mod tests { use super::*; }`) are followed, so `super` resolves right; a path
/// through a re-export of the crate root (`crate::Error`) is followed to where `aliases`
/// (from [`root_aliases`]) says the item lives.
fn references(file: &str, source: &str, aliases: &Aliases) -> Vec<Reference> {
    let file_module = module_of(file);
    let toks = tokens(&strip(source));
    let mut found = Vec::new();
    // Inline modules open at the current brace depth: (name, depth inside its braces).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let mut module = file_module.clone();
        module.extend(inline.iter().map(|(name, _)| name.clone()));
        let mut push = |path: &[String], line: usize| {
            let Some(mut to) = resolve(&module, path) else {
                return;
            };
            if let Some(real) = to.first().and_then(|first| aliases.get(first)) {
                match real {
                    Some(real) => drop(to.splice(0..1, real.iter().cloned())),
                    None => return, // a re-export of another crate's item
                }
            }
            found.push(Reference {
                file: file.to_string(),
                line,
                from: module.clone(),
                to,
            });
        };
        match &toks[i].0 {
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(word) if word == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(word) if word == "use" => {
                i += 1;
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, &[], &mut paths);
                for leaf in paths {
                    push(&leaf.path, leaf.line);
                }
            }
            Tok::Ident(word)
                if matches!(word.as_str(), "crate" | "$crate" | "super" | "self")
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Sep)
                    // Not the tail of a longer path (`a::super`), which rustc rejects anyway.
                    && (i == 0 || toks[i - 1].0 != Tok::Sep) =>
            {
                let line = toks[i].1;
                let mut path = vec![word.clone()];
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::Sep) {
                    match toks.get(j + 1) {
                        Some((Tok::Ident(name), _)) => {
                            path.push(name.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                push(&path, line);
                i = j;
            }
            _ => i += 1,
        }
    }
    found
}

/// Item names the crate root re-exports, to the path of the item (`None` for another
/// crate's item).
type Aliases = BTreeMap<String, Option<Vec<String>>>;

/// The crate root's re-exports (`pub use error::{Error, Result};` in lib.rs), so that
/// `crate::Error` counts as an import of `error`, and `crate::Pod` (bytemuck's) as none.
/// A glob re-export is left out: a path through one counts as an import of the root.
fn root_aliases(lib: &str) -> Aliases {
    let toks = tokens(&strip(lib));
    let modules: BTreeSet<&str> = toks
        .windows(2)
        .filter_map(|w| match w {
            [(Tok::Ident(kw), _), (Tok::Ident(name), _)] if kw == "mod" => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut aliases = Aliases::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].0 != Tok::Ident("use".into()) {
            i += 1;
            continue;
        }
        i += 1;
        let mut leaves = Vec::new();
        use_tree(&toks, &mut i, &[], &mut leaves);
        for mut leaf in leaves {
            if leaf.path.first().map(String::as_str) == Some("crate") {
                leaf.path.remove(0);
            }
            let Some(last) = leaf
                .path
                .last()
                .filter(|l| *l != "self" && leaf.path.len() > 1)
            else {
                continue;
            };
            let name = leaf.rename.clone().unwrap_or_else(|| last.clone());
            let ours = leaf
                .path
                .first()
                .is_some_and(|first| modules.contains(first.as_str()));
            aliases.insert(name, ours.then(|| leaf.path.clone()));
        }
    }
    aliases
}

// ----- checking -------------------------------------------------------------------------

/// The LAYERS entry a module path falls under: its longest listed prefix.
fn unit_of<'a>(layers: &'a [(&'a str, Layer)], path: &[String]) -> Option<(&'a str, Layer)> {
    layers
        .iter()
        .filter(|(prefix, _)| {
            let want: Vec<&str> = if prefix.is_empty() {
                vec![]
            } else {
                prefix.split("::").collect()
            };
            want.len() <= path.len() && want.iter().zip(path).all(|(a, b)| *a == b)
        })
        .max_by_key(|(prefix, _)| {
            if prefix.is_empty() {
                0
            } else {
                prefix.split("::").count()
            }
        })
        .map(|&(prefix, layer)| (prefix, layer))
}

/// The top-level module a path belongs to (`""` for the crate root).
fn top(path: &[String]) -> &str {
    path.first().map_or("", String::as_str)
}

/// Checks a source tree (file path under src, source text) against `layers`.
fn check(
    tree: &BTreeMap<String, String>,
    layers: &[(&str, Layer)],
) -> (Vec<Finding>, Vec<Reference>) {
    let mut findings = BTreeSet::new();
    let mut refs = Vec::new();
    let aliases = tree
        .get("lib.rs")
        .map(|lib| root_aliases(lib))
        .unwrap_or_default();
    for (file, source) in tree {
        let module = module_of(file);
        if module.first().map(String::as_str) == Some("bin") {
            continue; // a separate binary crate: it reaches the library only through its public API
        }
        if unit_of(layers, &module).is_none_or(|(p, _)| p.is_empty() && !module.is_empty()) {
            findings.insert(Finding::Unplaced {
                module: module.join("::"),
                file: file.clone(),
            });
            continue;
        }
        refs.extend(references(file, source, &aliases));
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &refs {
        let (Some((from_unit, from_layer)), Some((to_unit, to_layer))) =
            (unit_of(layers, &r.from), unit_of(layers, &r.to))
        else {
            continue;
        };
        if top(&r.to).is_empty() && r.to.is_empty() {
            continue; // `crate` itself
        }
        let (from_top, to_top) = (top(&r.from), top(&r.to));
        if from_unit != to_unit && !from_unit.is_empty() && !to_unit.is_empty() {
            graph
                .entry(from_unit.to_string())
                .or_default()
                .insert(to_unit.to_string());
        }
        let why = if to_layer > from_layer {
            Some(format!(
                "{from_layer} (`{from_unit}`) may not import {to_layer} (`{to_unit}`); move what it \
                 needs down into the vocabulary, or the code that needs it up"
            ))
        } else if from_layer == Layer::Backend && to_layer == Layer::Backend && from_top != to_top {
            Some(format!(
                "the backends are peers: `{from_top}` may not import `{to_top}`; move what both \
                 need into the shared vocabulary"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            findings.insert(Finding::Against {
                file: r.file.clone(),
                line: r.line,
                from: from_unit.to_string(),
                to: to_unit.to_string(),
                path: r.to.join("::"),
                why,
            });
        }
    }
    for circle in circles(&graph) {
        findings.insert(Finding::Circle(circle));
    }
    (findings.into_iter().collect(), refs)
}

/// One circle per strongly connected component of more than one module (a LAYERS entry:
/// a top-level module, or a submodule the table places on its own) (Tarjan's
/// algorithm, recursive: the graph has a few dozen nodes), shown as a path that returns to
/// its start.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Circle> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        components: Vec<Vec<&'g str>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.components.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    // Each component: its members, and one circle through its smallest member (the
    // shortest way back, found breadth-first inside the component).
    s.components
        .into_iter()
        .map(|component| {
            let members: BTreeSet<&str> = component.into_iter().collect();
            let start = *members.iter().next().expect("non-empty");
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut last = start;
            'search: while let Some(at) = queue.pop_front() {
                for w in graph.get(at).into_iter().flatten().map(String::as_str) {
                    if w == start {
                        last = at;
                        break 'search;
                    }
                    if members.contains(w) && !came_from.contains_key(w) {
                        came_from.insert(w, at);
                        queue.push_back(w);
                    }
                }
            }
            let mut path = vec![start.to_string()];
            let mut at = last;
            while at != start {
                path.insert(1, at.to_string());
                at = came_from[at];
            }
            path.push(start.to_string());
            Circle {
                members: members.iter().map(|m| m.to_string()).collect(),
                example: path,
            }
        })
        .collect()
}

/// Modules that import each other, directly or through others.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Circle {
    /// Every module of the circle, sorted.
    members: Vec<String>,
    /// One circle through them, returning to its start.
    example: Vec<String>,
}

/// runtime/src as a tree of (path under src, source).
fn read_tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read runtime/src")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&path).expect("read source"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn src_tree() -> BTreeMap<String, String> {
    read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

// ----- the tests ------------------------------------------------------------------------

#[test]
fn runtime_follows_the_layers() {
    let (findings, refs) = check(&src_tree(), LAYERS);
    assert!(
        refs.len() > 100,
        "the checker found only {} paths into the crate; is it reading runtime/src?",
        refs.len()
    );
    let mut unexpected = Vec::new();
    let mut still_known = BTreeSet::new();
    let mut still_circles = BTreeSet::new();
    for finding in &findings {
        let known = match finding {
            Finding::Against { file, to, .. } => KNOWN
                .iter()
                .position(|(f, t, _)| f == file && t == to)
                .map(|k| still_known.insert(k)),
            Finding::Circle(circle) => KNOWN_CIRCLES
                .iter()
                .position(|(members, _)| *members == circle.members)
                .map(|k| still_circles.insert(k)),
            Finding::Unplaced { .. } => None,
        };
        if known.is_none() {
            unexpected.push(finding.to_string());
        }
    }
    let gone: Vec<String> = KNOWN
        .iter()
        .enumerate()
        .filter(|(k, _)| !still_known.contains(k))
        .map(|(_, (f, t, _))| format!("{f} -> {t}"))
        .chain(
            KNOWN_CIRCLES
                .iter()
                .enumerate()
                .filter(|(k, _)| !still_circles.contains(k))
                .map(|(_, (members, _))| format!("circle {}", members.join(", "))),
        )
        .collect();
    assert!(
        unexpected.is_empty(),
        "imports against the layers (see docs/DESIGN.md, \"Layers\"):\n{}",
        unexpected.join("\n")
    );
    assert!(
        gone.is_empty(),
        "these KNOWN exceptions no longer occur; delete them from KNOWN or KNOWN_CIRCLES in runtime/tests/layers.rs (and from the diagram's notes in docs/DESIGN.md):\n{}",
        gone.join("\n")
    );
}

/// The most lines a file of runtime/src may have without a reason at its top.
const MAX_LINES: usize = 900;

/// Files over [`MAX_LINES`] today without a reason line, and why (helper `shapes` splits
/// these in issue 25). Same rule as [`KNOWN`]: an entry that no longer applies fails.
const KNOWN_LONG: &[(&str, &str)] = &[];

/// Files over `max` lines whose first 30 lines give no reason (a line saying "Longer than
/// 900 lines", as `sys/mod.rs` does).
fn too_long(tree: &BTreeMap<String, String>, max: usize) -> Vec<(String, usize)> {
    tree.iter()
        .map(|(file, source)| (file, source.lines().count(), source))
        .filter(|(_, lines, source)| {
            *lines > max
                && !source.lines().take(30).any(|l| {
                    l.trim_start().starts_with("//")
                        && l.contains(&format!("Longer than {MAX_LINES} lines"))
                })
        })
        .map(|(file, lines, _)| (file.clone(), lines))
        .collect()
}

/// No file of runtime/src over [`MAX_LINES`] unless a reason is written at its top: one
/// module, one job, a file read top to bottom.
#[test]
fn files_stay_readable() {
    // runtime/src, and the macros' sources under `macros/` (same rule, issue 25).
    let mut long = too_long(&src_tree(), MAX_LINES);
    let macros = Path::new(env!("CARGO_MANIFEST_DIR")).join("../macros");
    for krate in ["src", "core/src"] {
        let tree = read_tree(&macros.join(krate));
        assert!(!tree.is_empty(), "no sources under macros/{krate}");
        long.extend(
            too_long(&tree, MAX_LINES)
                .into_iter()
                .map(|(file, lines)| (format!("macros/{krate}/{file}"), lines)),
        );
    }
    let unexpected: Vec<String> = long
        .iter()
        .filter(|(file, _)| !KNOWN_LONG.iter().any(|(known, _)| known == file))
        .map(|(file, lines)| {
            format!(
                "{file}: {lines} lines; split it by job (moving whole functions), or say at its \
                 top why not (\"Longer than {MAX_LINES} lines ...\")"
            )
        })
        .collect();
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    let gone: Vec<&str> = KNOWN_LONG
        .iter()
        .filter(|(known, _)| !long.iter().any(|(file, _)| file == known))
        .map(|(known, _)| *known)
        .collect();
    assert!(
        gone.is_empty(),
        "within {MAX_LINES} lines now; delete from KNOWN_LONG: {gone:?}"
    );
}

/// The length rule can fail: a long file without a reason is caught, one with a reason is
/// not.
#[test]
fn planted_long_file_is_caught() {
    let body = "fn f() {}\n".repeat(20);
    let reasoned =
        format!("//! Table.\n//! Longer than {MAX_LINES} lines on purpose: one table.\n{body}");
    let planted = tree(&[
        ("long.rs", &body),
        ("reasoned.rs", &reasoned),
        ("short.rs", "fn g() {}\n"),
    ]);
    assert_eq!(too_long(&planted, 10), [("long.rs".to_string(), 20)]);
}

/// Prints the import counts between layers (`cargo test -p gpu-pipeline --test layers --
/// --nocapture census`), the measure issue 25 asks for. `LAYERS_CENSUS_SRC=<dir>` counts
/// another checkout's `runtime/src` instead (say, main's, for a before-and-after).
#[test]
fn census() {
    let tree = match std::env::var_os("LAYERS_CENSUS_SRC") {
        Some(dir) => read_tree(Path::new(&dir)),
        None => src_tree(),
    };
    let (findings, refs) = check(&tree, LAYERS);
    let mut by_edge: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in &refs {
        let (from, to) = (top(&r.from).to_string(), top(&r.to).to_string());
        if from != to && !to.is_empty() {
            *by_edge.entry((from, to)).or_default() += 1;
        }
    }
    for ((from, to), n) in &by_edge {
        println!("{from:>14} -> {to:<14} {n}");
    }
    let against: BTreeSet<(&str, &str)> = findings
        .iter()
        .filter_map(|f| match f {
            Finding::Against { file, to, .. } => Some((file.as_str(), to.as_str())),
            _ => None,
        })
        .collect();
    let circles = findings
        .iter()
        .filter(|f| matches!(f, Finding::Circle(_)))
        .count();
    println!(
        "{} paths into the crate; {circles} circles; {} (file, module) imports against the layers",
        refs.len(),
        against.len()
    );
    for (file, to) in &against {
        println!("  {file} -> {to}");
    }
    for finding in findings.iter().filter(|f| matches!(f, Finding::Circle(_))) {
        println!("  {finding}");
    }
}

fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect()
}

const TOY: &[(&str, Layer)] = &[
    ("", Layer::Top),
    ("stream", Layer::Top),
    ("context", Layer::Top),
    ("cuda", Layer::Backend),
    ("cpu", Layer::Backend),
    ("driver", Layer::Driver),
    ("error", Layer::Vocabulary),
    ("launch", Layer::Top),
    ("launch::config", Layer::Vocabulary),
    ("sys", Layer::Sys),
];

/// A clean synthetic tree passes: the check does not flag what the rules allow.
#[test]
fn a_clean_tree_passes() {
    let clean = tree(&[
        ("lib.rs", "mod stream; pub use stream::Stream;"),
        (
            "stream.rs",
            "use crate::cuda::{self, Stream as Raw};\nuse crate::context::Context;",
        ),
        (
            "context.rs",
            "use crate::{cpu, cuda::Context};\nfn f() { crate::driver::load(); }",
        ),
        (
            "cuda/mod.rs",
            "use crate::error::Result;\nuse crate::launch::config::LaunchConfig;\nmod stream;",
        ),
        (
            "cuda/stream.rs",
            "use super::super::sys::CUstream; // crate::stream::Stream in a comment\nconst S: &str = \"crate::stream\";",
        ),
        (
            "cpu/mod.rs",
            "use crate::launch::config::Dim3;\nfn f<'a>(c: char) -> bool { c == '\"' }\nuse crate::error::Error;",
        ),
        ("launch/mod.rs", "mod config; use crate::stream::Stream;"),
        ("launch/config.rs", "use crate::error::Error;"),
        ("driver/mod.rs", "use crate::{error::Error, sys};"),
        ("error.rs", "use crate::sys::CUresult;"),
        ("sys/mod.rs", "pub struct CUresult;"),
    ]);
    let (findings, refs) = check(&clean, TOY);
    assert_eq!(findings, vec![], "a clean tree is flagged");
    assert!(
        refs.iter()
            .any(|r| r.file == "cuda/stream.rs" && r.to == ["sys", "CUstream"]),
        "super::super is resolved"
    );
    assert!(
        !refs
            .iter()
            .any(|r| r.to.first().map(String::as_str) == Some("stream")
                && r.file.starts_with("cuda")),
        "comments and strings are not read"
    );
}

/// Each rule, broken once in a small synthetic tree, is reported at the right place.
#[test]
fn planted_violations_are_caught() {
    let planted = tree(&[
        ("lib.rs", "mod stream;"),
        ("stream.rs", "use crate::cuda::Stream;"),
        // A backend reaching a public type, through a nested use tree.
        (
            "cuda/mod.rs",
            "use crate::{error::Result,\n  stream::{Stream, StreamBackend}};",
        ),
        // A backend reaching its peer, in code rather than a `use` line.
        (
            "cpu/mod.rs",
            "fn f() { let _ = crate::cuda::Device::count(); }",
        ),
        // The vocabulary reaching up, through `super`.
        ("launch/mod.rs", "mod config; pub struct TypedKernel;"),
        ("launch/config.rs", "use super::TypedKernel;"),
        // The bottom reaching up.
        ("sys/mod.rs", "use crate::driver::Table;"),
        ("driver/mod.rs", "use crate::error::Error;"),
        // A circle between two public-type modules.
        (
            "context.rs",
            "use crate::stream::Stream; use crate::error::Error;",
        ),
        ("error.rs", "pub struct Error;"),
        // A module with no layer.
        ("mystery.rs", "pub struct Mystery;"),
    ]);
    let mut planted = planted;
    planted.insert(
        "stream.rs".into(),
        "use crate::cuda::Stream; use crate::context::Context;".into(),
    );
    let (findings, _) = check(&planted, TOY);
    let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
    let expect = |needle: &str| {
        assert!(
            shown.iter().any(|s| s.contains(needle)),
            "expected a finding containing {needle:?}, got:\n{}",
            shown.join("\n")
        );
    };
    expect(
        "cuda/mod.rs:2: `crate::stream::Stream`: a backend (`cuda`) may not import a public-type module (`stream`)",
    );
    expect("cuda/mod.rs:2: `crate::stream::StreamBackend`");
    expect(
        "cpu/mod.rs:1: `crate::cuda::Device::count`: the backends are peers: `cpu` may not import `cuda`",
    );
    expect(
        "launch/config.rs:1: `crate::launch::TypedKernel`: the shared vocabulary (`launch::config`) may not import a public-type module (`launch`)",
    );
    expect(
        "sys/mod.rs:1: `crate::driver::Table`: the sys layer (`sys`) may not import the driver layer (`driver`)",
    );
    expect("import circle between modules: context -> stream -> context");
    expect("module `mystery` has no layer");
    assert_eq!(
        findings.len(),
        7,
        "one finding per planted violation:\n{}",
        shown.join("\n")
    );
}

/// The reader handles what real sources contain: raw strings, lifetimes, char literals,
/// block comments, `$crate` in macros, `as` renames and globs.
#[test]
fn reader_handles_rust_syntax() {
    let source = r####"
/* crate::stream::A in a /* nested */ block comment */
const RAW: &str = r#"crate::stream::B "quoted" "#;
fn f<'a>(x: &'a str) -> char { '{' }
macro_rules! m { () => { $crate::memory::C } }
use crate::launch::{config::Dim3 as D, index::*};
use self::inner::E;
mod tests { fn g() { crate::Error::new(); crate::Pod::f(); crate::Hidden::g(); } use super::F; }
"####;
    let aliases = root_aliases(
        "mod error; mod cpu; pub use bytemuck::Pod; pub use error::{Error, Result};\npub use cpu::CpuFault as Hidden;",
    );
    let refs = references("context.rs", source, &aliases);
    let to: Vec<String> = refs.iter().map(|r| r.to.join("::")).collect();
    assert_eq!(
        to,
        [
            "memory::C",
            "launch::config::Dim3",
            "launch::index",
            "context::inner::E",
            "error::Error::new",
            "cpu::CpuFault::g",
            "context::F"
        ]
    );
    assert_eq!(
        refs.iter().map(|r| r.line).collect::<Vec<_>>(),
        [5, 6, 6, 7, 8, 8, 8]
    );
    assert_eq!(
        refs.last().map(|r| r.from.join("::")),
        Some("context::tests".to_string()),
        "inline modules are followed"
    );
}
