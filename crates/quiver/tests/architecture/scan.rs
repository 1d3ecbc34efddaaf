//! Reading source text: comments and literals blanked out, tokens, test code taken out, the
//! `crate::` / `self::` / `super::` paths, and what each file is.

use std::collections::BTreeSet;

/// A module's path from its crate root (`[]` is the root).
pub type ModPath = Vec<String>;

/// One source file of a crate.
pub struct SourceFile {
    /// Path under `src/`, with `/` separators.
    pub rel: String,
    pub text: String,
}

/// `src` with comments, string literals and char literals replaced by spaces; newlines are
/// kept, so line numbers still hold. Lifetimes (`'a`) are left alone.
fn blank_comments_and_literals(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < n {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        let prev = if i > 0 { Some(c[i - 1]) } else { None };
        if ch == '/' && next == Some('/') {
            while i < n && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if ch == '"' {
            out.push(' ');
            i += 1;
            while i < n {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                } else if c[i] == '"' {
                    out.push(' ');
                    i += 1;
                    break;
                }
                if i < n {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if ch == 'r'
            && matches!(next, Some('"' | '#'))
            && (prev.is_none_or(|p| !is_ident(p))
                || (prev == Some('b') && (i < 2 || !is_ident(c[i - 2]))))
        {
            // A raw string `r"..."`, `r#"..."#`, `br"..."`; or a raw identifier `r#x`.
            let mut j = i + 1;
            while j < n && c[j] == '#' {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(ch);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let mut k = j + 1;
            while k < n && !(c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#'))) {
                k += 1;
            }
            let end = (k + 1 + hashes).min(n);
            for &x in &c[i..end] {
                blank(&mut out, x);
            }
            i = end;
        } else if ch == '\'' && next == Some('\\') {
            // An escaped char literal: '\n', '\'', '\u{1F600}'.
            let mut j = i + 3;
            while j < n && c[j] != '\'' && c[j] != '\n' {
                j += 1;
            }
            let end = (j + 1).min(n);
            for &x in &c[i..end] {
                blank(&mut out, x);
            }
            i = end;
        } else if ch == '\'' && c.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

impl Tok {
    fn is(&self, s: &str) -> bool {
        self.text == s
    }

    fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    }
}

/// The tokens of blanked source: identifiers (and numbers), `::`, and single punctuation
/// characters, each with its line.
fn tokenize(blanked: &str) -> Vec<Tok> {
    let c: Vec<char> = blanked.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            toks.push(Tok {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            toks.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    toks
}

/// Index just past the bracket that closes the one at `open`.
fn skip_group(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < toks.len() {
        match toks[i].text.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    toks.len()
}

/// Does `toks[i..]` start with these token texts?
fn starts_with(toks: &[Tok], i: usize, texts: &[&str]) -> bool {
    texts
        .iter()
        .enumerate()
        .all(|(k, t)| toks.get(i + k).is_some_and(|tok| tok.is(t)))
}

/// A file's tokens once test code is taken out.
#[derive(Debug, Default, PartialEq)]
struct Scanned {
    toks: Vec<Tok>,
    /// Child modules declared `#[cfg(test)] mod x;`: their files are test-only.
    test_children: Vec<String>,
    /// The file is test code only (`#![cfg(test)]`, or only `#[cfg(test)]` items).
    test_only: bool,
}

/// Takes out every item under `#[cfg(test)]` (a `mod tests { .. }` block, a `use`, a `fn`,
/// ...): the attribute, any attributes after it, and the item up to its `;` or its closing
/// brace.
fn scan(src: &str) -> Scanned {
    let toks = tokenize(&blank_comments_and_literals(src));
    let mut out = Scanned::default();
    let mut removed = false;
    let mut i = 0;
    while i < toks.len() {
        if starts_with(&toks, i, &["#", "!", "[", "cfg", "(", "test", ")", "]"]) {
            out.test_only = true;
            out.toks.clear();
            return out;
        }
        if !starts_with(&toks, i, &["#", "[", "cfg", "(", "test", ")", "]"]) {
            out.toks.push(toks[i].clone());
            i += 1;
            continue;
        }
        removed = true;
        let mut j = i + 7;
        while starts_with(&toks, j, &["#", "["]) {
            j = skip_group(&toks, j + 1);
        }
        // `#[cfg(test)] pub(crate) mod x;`: the file of `x` is test-only.
        let mut k = j;
        if starts_with(&toks, k, &["pub"]) {
            k += 1;
            if starts_with(&toks, k, &["("]) {
                k = skip_group(&toks, k);
            }
        }
        if starts_with(&toks, k, &["mod"])
            && toks.get(k + 1).is_some_and(Tok::is_ident)
            && starts_with(&toks, k + 2, &[";"])
        {
            out.test_children.push(toks[k + 1].text.clone());
        }
        // The item: up to its `;` or through its braces (a closing bracket of the enclosing
        // block ends it too, for a field or an argument).
        while j < toks.len() {
            match toks[j].text.as_str() {
                ";" => {
                    j += 1;
                    break;
                }
                "{" => {
                    j = skip_group(&toks, j);
                    break;
                }
                "(" | "[" => j = skip_group(&toks, j),
                "}" | ")" | "]" => break,
                _ => j += 1,
            }
        }
        i = j;
    }
    // Only inner attributes (`#![allow(..)]`) left beside the test items: a test-only file.
    let mut k = 0;
    while starts_with(&out.toks, k, &["#", "!", "["]) {
        k = skip_group(&out.toks, k + 2);
    }
    out.test_only = removed && k >= out.toks.len();
    out
}

/// A path starting at `crate`, `self` or `super`: its segments as written
/// (`["super", "super", "x", "Y"]`), the line of its last segment, and the inline modules
/// (`mod x { .. }`) it is written in.
#[derive(Clone, Debug, PartialEq)]
pub struct RawPath {
    pub segs: Vec<String>,
    pub line: usize,
    pub inline: Vec<String>,
}

/// Every `crate::`, `self::` and `super::` path in the tokens, groups expanded.
fn paths(toks: &[Tok]) -> Vec<RawPath> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    // Inline modules open at this point, with the brace depth inside each.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.is("{") {
            depth += 1;
        } else if t.is("}") {
            depth = depth.saturating_sub(1);
            while inline.last().is_some_and(|(_, d)| *d > depth) {
                inline.pop();
            }
        } else if t.is("mod")
            && toks.get(i + 1).is_some_and(Tok::is_ident)
            && starts_with(toks, i + 2, &["{"])
        {
            depth += 1;
            inline.push((toks[i + 1].text.clone(), depth));
            i += 3;
            continue;
        } else if (t.is("crate") || t.is("self") || t.is("super"))
            && starts_with(toks, i + 1, &["::"])
            && !(i >= 1 && toks[i - 1].is("::"))
            // `pub(in crate::a)` is a visibility, not a use.
            && !(i >= 2 && toks[i - 1].is("in") && toks[i - 2].is("("))
        {
            let mut found = Vec::new();
            i = path_tree(toks, i, Vec::new(), &mut found);
            let names: Vec<String> = inline.iter().map(|(m, _)| m.clone()).collect();
            out.extend(found.into_iter().map(|(segs, line)| RawPath {
                segs,
                line,
                inline: names.clone(),
            }));
            continue;
        }
        i += 1;
    }
    out
}

/// Reads one path (tree) at `toks[i]` after `prefix`: segments joined by `::`, ending in a
/// segment, `*` or a `{ .. }` group of paths. Returns the index after it.
fn path_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut segs = prefix;
    let mut line = toks.get(i).map_or(0, |t| t.line);
    loop {
        match toks.get(i) {
            Some(t) if t.is("{") => {
                i += 1;
                while let Some(t) = toks.get(i) {
                    if t.is("}") {
                        return i + 1;
                    }
                    if t.is(",") {
                        i += 1;
                        continue;
                    }
                    let start = i;
                    i = path_tree(toks, i, segs.clone(), out);
                    if starts_with(toks, i, &["as"]) {
                        i += 2;
                    }
                    if i == start {
                        i += 1;
                    }
                }
                return i;
            }
            Some(t) if t.is("*") => {
                out.push((segs, t.line));
                return i + 1;
            }
            Some(t) if t.is_ident() && !t.is("as") => {
                // `self` inside a group is the group's prefix.
                if !t.is("self") || segs.is_empty() {
                    segs.push(t.text.clone());
                }
                line = t.line;
                i += 1;
                if starts_with(toks, i, &["::"]) {
                    i += 1;
                    continue;
                }
                out.push((segs, line));
                return i;
            }
            _ => {
                if !segs.is_empty() {
                    out.push((segs, line));
                }
                return i;
            }
        }
    }
}

/// The module of a file from its path under `src/`; `None` for `src/bin/` (other crates).
fn module_of(rel: &str) -> Option<ModPath> {
    if rel.starts_with("bin/") {
        return None;
    }
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    match parts.as_slice() {
        [root] if root == "lib" || root == "main" => return Some(Vec::new()),
        _ => {}
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

fn is_test_path(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    parts.last() == Some(&"tests.rs") || parts[..parts.len() - 1].contains(&"tests")
}

/// What the rules need to know of each file of a crate.
pub struct FileFacts {
    pub rel: String,
    pub lines: usize,
    pub module: Option<ModPath>,
    pub test_only: bool,
    pub paths: Vec<RawPath>,
}

pub fn analyse(files: &[SourceFile]) -> Vec<FileFacts> {
    let scanned: Vec<Scanned> = files.iter().map(|f| scan(&f.text)).collect();
    let mut facts: Vec<FileFacts> = files
        .iter()
        .zip(&scanned)
        .map(|(f, s)| FileFacts {
            rel: f.rel.clone(),
            lines: f.text.lines().count(),
            module: module_of(&f.rel),
            test_only: is_test_path(&f.rel) || s.test_only,
            paths: paths(&s.toks),
        })
        .collect();
    // Modules declared under `#[cfg(test)]`, and everything below a test-only module.
    let mut test_mods: BTreeSet<ModPath> = BTreeSet::new();
    for (f, s) in facts.iter().zip(&scanned) {
        if let Some(m) = &f.module {
            if f.test_only {
                test_mods.insert(m.clone());
            }
            for child in &s.test_children {
                let mut c = m.clone();
                c.push(child.clone());
                test_mods.insert(c);
            }
        }
    }
    for f in &mut facts {
        if let Some(m) = &f.module {
            if (1..=m.len()).any(|k| test_mods.contains(&m[..k])) {
                f.test_only = true;
            }
        }
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(src: &str) -> Vec<(String, usize)> {
        paths(&scan(src).toks)
            .into_iter()
            .map(|p| (p.segs.join("::"), p.line))
            .collect()
    }

    #[test]
    fn comments_and_literals_are_blanked_lines_kept() {
        let src = "a // crate::x\n/* crate::y /* nested */ */ b \"crate::z\\\"\" '{' '\\'' c<'a>\nr#\"crate::w\"# d";
        let b = blank_comments_and_literals(src);
        assert_eq!(b.lines().count(), 3);
        let words: Vec<String> = tokenize(&b).into_iter().map(|t| t.text).collect();
        assert_eq!(words, ["a", "b", "c", "<", "'", "a", ">", "d"]);
    }

    #[test]
    fn paths_in_uses_groups_and_code() {
        let src = "use crate::{a, b::{c, d as e}, f::*};\n\
                   use super::super::g::H;\n\
                   fn x() { crate::cmd::keyspace::flush_store(1); self::y::z(); }\n\
                   pub(crate) fn q() {} pub(in crate::a) fn r() {}\n\
                   use crate::cmd::{self, get};\n\
                   use std::crate_like::x; let v = $crate::m::n;";
        assert_eq!(
            segs(src),
            [
                ("crate::a".to_string(), 1),
                ("crate::b::c".into(), 1),
                ("crate::b::d".into(), 1),
                ("crate::f".into(), 1),
                ("super::super::g::H".into(), 2),
                ("crate::cmd::keyspace::flush_store".into(), 3),
                ("self::y::z".into(), 3),
                ("crate::cmd".into(), 5),
                ("crate::cmd::get".into(), 5),
                ("crate::m::n".into(), 6),
            ]
        );
        // A group over several lines: each path on its own line.
        assert_eq!(
            segs("use crate::{\n    a,\n    b::{\n        c,\n    },\n};"),
            [("crate::a".to_string(), 2), ("crate::b::c".into(), 4)]
        );
    }

    #[test]
    fn test_code_is_left_out() {
        let src = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n    fn f() { '}'; }\n}\n\
                   #[cfg(test)]\n#[allow(unused)]\nuse crate::c;\n#[cfg(test)] pub(crate) mod helpers;\nuse crate::d;";
        let s = scan(src);
        assert_eq!(
            segs(src),
            [("crate::a".to_string(), 1), ("crate::d".into(), 11)]
        );
        assert_eq!(s.test_children, ["helpers"]);
        assert!(!s.test_only);
        assert!(scan("//! Tests.\n#![cfg(test)]\nuse crate::a;").test_only);
        assert!(
            scan("//! Tests.\n#![allow(x)]\n#[cfg(test)]\nmod t { use crate::a; }\n").test_only
        );
        assert!(!scan("fn main() {}").test_only);
    }

    #[test]
    fn modules_of_files() {
        assert_eq!(module_of("lib.rs"), Some(vec![]));
        assert_eq!(module_of("main.rs"), Some(vec![]));
        assert_eq!(module_of("cmd/mod.rs"), Some(vec!["cmd".to_string()]));
        assert_eq!(
            module_of("cmd/get.rs"),
            Some(vec!["cmd".to_string(), "get".into()])
        );
        assert_eq!(module_of("bin/tool.rs"), None);
        assert!(is_test_path("resp/tests.rs"));
        assert!(is_test_path("tests/helpers.rs"));
        assert!(!is_test_path("tests_like.rs"));
    }
}
