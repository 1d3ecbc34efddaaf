//! Architecture rules, checked on the source text of every crate under `crates/` (plain std,
//! no parser: comments and literals are blanked out, then the tokens are scanned).
//!
//! 1. **No source file over [`MAX_LINES`] (800) lines.** Every `crates/*/src/**/*.rs` counts,
//!    except test-only files: a `tests.rs`, a file under a `tests/` directory, a module
//!    declared `#[cfg(test)] mod x;`, or a file that starts with `#![cfg(test)]` or holds
//!    nothing but `#[cfg(test)]` items. Split a file that grows past the limit by topic (its
//!    tests can move to a `tests.rs` beside it).
//! 2. **No import cycle between the modules of a crate.** Every `.rs` file under `src/` is a
//!    module: `lib.rs` or `main.rs` the crate root (reported as `crate`), `a/b.rs` or
//!    `a/b/mod.rs` the module `a::b`. A module depends on another when its file names a path
//!    that starts with `crate::`, `super::` or `self::`, anywhere: `use` lines, nested groups
//!    (`use crate::{a, b::{c, d}}`), paths inline in code (`crate::cmd::keyspace::flush_store(..)`).
//!    A path resolves to the deepest module that exists (`crate::cmd::Ctx` is `cmd` when there
//!    is no `cmd/Ctx.rs`; `crate::cmd::get::Get` is `cmd::get`); `super` and `self` are taken
//!    relative to the module the path is written in (inline `mod x { .. }` blocks included).
//!    Not dependencies: `mod child;` declarations, paths in comments and doc links, items under
//!    `#[cfg(test)]` (the `mod tests { .. }` blocks), test-only files, and relative paths
//!    without `self::` (`child::f()`), which this scan does not resolve. Every cycle is
//!    reported with the modules on it and a `file:line` for each of its edges; break one by
//!    moving what both sides need into a module of their own, or by passing it in (a
//!    parameter, a trait, a callback).
//!
//! 3. **Crates depend only on lower layers** (`architecture/layers.rs`, `CRATE_LAYERS`): the
//!    protocol and the planning maths; the parts (engine, RESP service, peer transport,
//!    cluster metadata, client, test kit); what is built of them (node, router, load
//!    generators, reports); the binary. Read from each crate's `[dependencies]`.
//! 4. **Sealed modules** (`SEALED`): no module of the crate outside them imports them (the
//!    node's in-process test server).
//!
//! Cycles between crates need no check: Cargo refuses them. `src/bin/` files (crate roots of
//! their own) count for the line limit but are not module nodes.
//!
//! Run: `cargo test -p quiver --test architecture`; `-- --ignored --nocapture` prints every
//! crate's module graph. The scanning (`architecture/scan.rs`) and the graph and its cycles
//! (`architecture/graph.rs`) work on strings and have tests of their own.

// A source tree that cannot be read is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The crate root of a test is `tests/architecture.rs`: its modules sit beside it by name.
#[path = "architecture/graph.rs"]
mod graph;
#[path = "architecture/layers.rs"]
mod layers;
#[path = "architecture/scan.rs"]
mod scan;

use std::path::Path;

use crate::graph::{cycles, describe, module_graph};
use crate::scan::{analyse, SourceFile};

/// The most lines a non-test source file may have.
const MAX_LINES: usize = 800;

/// A crate's `src/` directory: its name in messages (`crates/x/src`) and its `.rs` files; its
/// package name and the workspace crates its `[dependencies]` name.
struct CrateSources {
    dir: String,
    files: Vec<SourceFile>,
    name: String,
    deps: Vec<String>,
}

fn read_workspace() -> Vec<CrateSources> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut crates = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .map(|e| {
            e.expect("crates/ is readable")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    for name in names {
        let src = root.join("crates").join(&name).join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        collect_rs(&src, "", &mut files);
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        let manifest = std::fs::read_to_string(root.join("crates").join(&name).join("Cargo.toml"))
            .expect("a crate's Cargo.toml is readable");
        crates.push(CrateSources {
            dir: format!("crates/{name}/src"),
            files,
            deps: layers::manifest_deps(&manifest),
            name,
        });
    }
    assert!(
        crates.len() >= 2,
        "no crates found under {}",
        root.display()
    );
    crates
}

fn collect_rs(dir: &Path, prefix: &str, out: &mut Vec<SourceFile>) {
    for entry in std::fs::read_dir(dir).expect("a source directory is readable") {
        let entry = entry.expect("a source directory is readable");
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let rel = format!("{prefix}{name}");
        if path.is_dir() {
            collect_rs(&path, &format!("{rel}/"), out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).expect("a source file is UTF-8");
            out.push(SourceFile { rel, text });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The rules

#[test]
fn no_source_file_over_800_lines() {
    let mut offenders = Vec::new();
    for c in read_workspace() {
        for f in analyse(&c.files) {
            if !f.test_only && f.lines > MAX_LINES {
                offenders.push(format!("  {}/{}: {} lines", c.dir, f.rel, f.lines));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "{} source file(s) over {MAX_LINES} lines (split them by topic; tests can move to a \
         tests.rs):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn no_import_cycle_between_modules() {
    let mut report = String::new();
    let mut count = 0;
    for c in read_workspace() {
        let graph = module_graph(&c.dir, &analyse(&c.files));
        let found = cycles(&graph);
        if found.is_empty() {
            continue;
        }
        count += found.len();
        report += &format!("{}: {} cycle(s)\n", c.dir, found.len());
        for cycle in &found {
            report += &describe(&graph, cycle);
        }
    }
    assert!(
        count == 0,
        "{count} import cycle(s) between modules (move what both sides need into a module of \
         its own, or pass it in):\n{report}"
    );
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let crates: Vec<(String, Vec<String>)> = read_workspace()
        .into_iter()
        .map(|c| (c.name, c.deps))
        .collect();
    let found = layers::crate_violations(&crates);
    assert!(
        found.is_empty(),
        "crate dependencies against CRATE_LAYERS (tests/architecture/layers.rs):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn sealed_modules_are_imported_only_from_inside() {
    let mut found = Vec::new();
    for c in read_workspace() {
        let graph = module_graph(&c.dir, &analyse(&c.files));
        found.extend(layers::sealed_violations(&c.dir, &graph));
    }
    assert!(
        found.is_empty(),
        "imports of sealed modules (SEALED, tests/architecture/layers.rs):\n  {}",
        found.join("\n  ")
    );
}

/// Every crate's module dependencies, one edge a line with where it is first made.
#[test]
#[ignore = "prints the module graphs: run with --ignored --nocapture"]
fn print_module_graphs() {
    for c in read_workspace() {
        println!("{}", c.dir);
        for ((a, b), at) in module_graph(&c.dir, &analyse(&c.files)) {
            println!("  {a} -> {b}  ({})", at[0]);
        }
    }
}
