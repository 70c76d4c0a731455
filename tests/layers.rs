//! The crate's structure (docs/architecture.md draws it): every `crate::<module>`
//! a file in rust/src names, in `use` lines or inline paths, is its own
//! top-level module or one below it; and no sibling files name each other in a
//! circle.

use std::fs;
use std::path::{Path, PathBuf};

/// Top-level modules of rust/src, lowest layer first; one layer per entry
/// (modules in one entry may name each other). `error` and `stats` are shared
/// by everything; `presets` are fabric, link and phy data; `experiments` and
/// the bindings sit on top.
const LAYERS: &[&[&str]] = &[
    &["error", "stats"],
    &["engine"],
    &["phy"],
    &["link"],
    &["switch"],
    &["fabric"],
    &["presets"],
    &["flow"],
    &["collective"],
    &["taskgraph"],
    &["experiments"],
    &["python", "lib"],
];

/// Upward paths known and being removed elsewhere, tolerated exactly as listed:
/// (file, target module). Empty since the network home moved (issue 20:
/// `FabricNetwork` in rust/src/taskgraph/fabric_network.rs, no re-export from
/// fabric/); a new entry needs the reason and who removes it.
const KNOWN: &[(&str, &str)] = &[];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("read rust/src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a line without its `//` comment (string literals holding `//`
/// are rare enough in rust/src not to matter here).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// Top-level modules named after `crate::` in `src`: `crate::a::b` gives `a`;
/// `crate::{a::x, b}` gives `a` and `b` (groups may span lines).
fn crate_targets(src: &str) -> Vec<(usize, String)> {
    let text: Vec<(usize, &str)> = src.lines().enumerate().map(|(i, l)| (i + 1, code(l))).collect();
    let joined: String = text.iter().map(|(_, l)| format!("{l}\n")).collect();
    let line_of = |pos: usize| joined[..pos].matches('\n').count() + 1;
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = joined[from..].find("crate::") {
        let at = from + k;
        let rest = &joined[at + "crate::".len()..];
        // `$crate::` in macros and identifiers ending in "crate" are not paths.
        let before = joined[..at].chars().last();
        if !matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == '$') {
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 || (depth == 1 && c == ',') {
                        let m = ident(item.trim());
                        if !m.is_empty() {
                            out.push((line_of(at), m));
                        }
                        item.clear();
                        if depth == 0 {
                            break;
                        }
                    } else {
                        item.push(c);
                    }
                }
            } else {
                out.push((line_of(at), ident(rest)));
            }
        }
        from = at + "crate::".len();
    }
    out
}

fn violations(root: &Path) -> Vec<(String, usize, String, String)> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        let me = layer(&top).unwrap_or_else(|| panic!("rust/src/{rel}: module `{top}` has no layer; add it to LAYERS"));
        let src = fs::read_to_string(&f).expect("read source");
        for (line, target) in crate_targets(&src) {
            // `crate::Result` and other root re-exports are the error layer's.
            let t = if layer(&target).is_some() { target.clone() } else { "lib".to_string() };
            let t = if t == "lib" && matches!(target.as_str(), "Result" | "FlitsimError") { "error".into() } else { t };
            if layer(&t).unwrap() > me {
                bad.push((rel.clone(), line, top.clone(), target));
            }
        }
    }
    bad
}

#[test]
fn no_path_points_up_a_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("rust/src");
    let found = violations(&root);
    let unknown: Vec<String> = found
        .iter()
        .filter(|(f, _, _, t)| !KNOWN.contains(&(f.as_str(), t.as_str())))
        .map(|(f, l, me, t)| format!("rust/src/{f}:{l}: {me} names crate::{t}, a higher layer"))
        .collect();
    assert!(unknown.is_empty(), "paths that point up a layer:\n{}", unknown.join("\n"));
    for (f, t) in KNOWN {
        if !found.iter().any(|(ff, _, _, tt)| ff == f && tt == t) {
            eprintln!("note: known upward path {f} -> {t} is gone; remove it from KNOWN in tests/layers.rs");
        }
    }
}

/// Module path of a file: rust/src/a/b.rs and rust/src/a/b/mod.rs are `a::b`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Longest module named by `path` (`a::b::Item` -> `a::b` if that module exists).
fn resolve(modules: &[Vec<String>], path: &[String]) -> Option<Vec<String>> {
    (1..=path.len()).rev().map(|k| path[..k].to_vec()).find(|p| modules.contains(p))
}

/// Modules one file names through `crate::a::b` and `super::b` paths, its
/// `#[cfg(test)]` module (where `super` means the file itself) left out.
fn module_refs(src: &str, me: &[String], modules: &[Vec<String>]) -> Vec<Vec<String>> {
    let body = src.split("#[cfg(test)]").next().unwrap_or("");
    let text: String = body.lines().map(|l| format!("{}\n", code(l))).collect();
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", me[..me.len().saturating_sub(1)].to_vec())] {
        let mut from = 0;
        while let Some(k) = text[from..].find(prefix) {
            let at = from + k;
            let rest = &text[at + prefix.len()..];
            let path: Vec<String> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            let full: Vec<String> = base.iter().cloned().chain(path).collect();
            if let Some(m) = resolve(modules, &full) {
                if m != me {
                    out.push(m);
                }
            }
            from = at + prefix.len();
        }
    }
    out
}

/// Circles among sibling files (a::x -> a::y -> a::x). A parent and its
/// children naming each other is how Rust modules re-export and is not counted.
fn sibling_circles(root: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let rels: Vec<String> =
        files.iter().map(|f| f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/")).collect();
    let modules: Vec<Vec<String>> = rels.iter().map(|r| module_of(r)).collect();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); modules.len()];
    for (i, f) in files.iter().enumerate() {
        let src = fs::read_to_string(f).expect("read source");
        for m in module_refs(&src, &modules[i], &modules) {
            let j = modules.iter().position(|x| *x == m).unwrap();
            let siblings = !modules[i].is_empty()
                && modules[i].len() == m.len()
                && modules[i][..m.len() - 1] == m[..m.len() - 1];
            if siblings && !edges[i].contains(&j) {
                edges[i].push(j);
            }
        }
    }
    let reach = |from: usize| {
        let mut seen = vec![false; modules.len()];
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            for &y in &edges[x] {
                if !seen[y] {
                    seen[y] = true;
                    stack.push(y);
                }
            }
        }
        seen
    };
    let all: Vec<Vec<bool>> = (0..modules.len()).map(reach).collect();
    let mut circles: Vec<Vec<String>> = Vec::new();
    for i in 0..modules.len() {
        let mut c: Vec<String> =
            (0..modules.len()).filter(|&j| all[i][j] && all[j][i]).map(|j| modules[j].join("::")).collect();
        c.sort();
        if c.len() > 1 && !circles.contains(&c) {
            circles.push(c);
        }
    }
    circles
}

/// Sibling circles known and being removed elsewhere, tolerated exactly as
/// listed. Empty since the bindings helpers (`col`, `scalar`,
/// `batch_result_dict`) moved to python/convert.rs (issue 20); a new entry
/// needs the reason and who removes it.
const KNOWN_CIRCLES: &[&[&str]] = &[];

#[test]
fn no_circle_among_sibling_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("rust/src");
    let bad: Vec<String> = sibling_circles(&root)
        .into_iter()
        .filter(|c| !KNOWN_CIRCLES.iter().any(|k| k.iter().map(|s| s.to_string()).collect::<Vec<_>>() == *c))
        .map(|c| c.join(" <-> "))
        .collect();
    assert!(bad.is_empty(), "files that name each other in a circle:\n{}", bad.join("\n"));
}

#[test]
fn the_scanner_finds_paths() {
    let src = "use crate::engine::X;\nuse crate::{\n    fabric::Y,\n    phy::{Z, W},\n};\n// crate::python::no\nlet a = crate::taskgraph::f();\nmacro_rules! m { () => { $crate::x } }\n";
    let got: Vec<String> = crate_targets(src).into_iter().map(|(l, m)| format!("{l}:{m}")).collect();
    assert_eq!(got, ["1:engine", "2:fabric", "2:phy", "7:taskgraph"]);
    assert!(layer("switch") < layer("fabric") && layer("collective") < layer("taskgraph"));
    let modules: Vec<Vec<String>> =
        ["a", "a::x", "a::y"].iter().map(|m| m.split("::").map(str::to_string).collect()).collect();
    let me = &modules[1];
    let refs = module_refs("use super::y::T;\nfn f() { crate::a::x::g(); crate::a::h(); }\n#[cfg(test)]\nuse super::z;", me, &modules);
    assert_eq!(refs, [modules[0].clone(), modules[2].clone()]);
}
