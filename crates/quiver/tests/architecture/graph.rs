//! The module dependency graph of a crate, and its cycles.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::scan::{FileFacts, ModPath, RawPath};

pub fn mod_name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Module dependencies: (from, to) -> where (`file:line`), in order.
pub type Graph = BTreeMap<(String, String), Vec<String>>;

/// The deepest existing module a path names, from the module it is written in.
fn resolve(here: &[String], p: &RawPath, known: &BTreeSet<ModPath>) -> ModPath {
    let mut at: ModPath = here.to_vec();
    at.extend(p.inline.iter().cloned());
    let mut segs = p.segs.iter().peekable();
    let mut abs = match segs.next().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => {
            at.pop();
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                at.pop();
            }
            at
        }
        _ => at, // self
    };
    abs.extend(segs.cloned());
    (0..=abs.len())
        .rev()
        .map(|k| abs[..k].to_vec())
        .find(|m| known.contains(m))
        .unwrap_or_default()
}

/// The dependency graph of one crate's non-test modules; `dir` prefixes the locations.
pub fn module_graph(dir: &str, facts: &[FileFacts]) -> Graph {
    let known: BTreeSet<ModPath> = facts.iter().filter_map(|f| f.module.clone()).collect();
    let test_mods: BTreeSet<ModPath> = facts
        .iter()
        .filter(|f| f.test_only)
        .filter_map(|f| f.module.clone())
        .collect();
    let mut graph = Graph::new();
    for f in facts.iter().filter(|f| !f.test_only) {
        let Some(here) = &f.module else { continue };
        for p in &f.paths {
            let to = resolve(here, p, &known);
            if &to == here || test_mods.contains(&to) {
                continue;
            }
            let at = graph.entry((mod_name(here), mod_name(&to))).or_default();
            let place = format!("{dir}/{}:{}", f.rel, p.line);
            // One place per line (`use crate::a::{self, B}` names `a` twice).
            if at.last() != Some(&place) {
                at.push(place);
            }
        }
    }
    graph
}

/// Strongly connected components of more than one module (Tarjan), each sorted.
fn tangles(graph: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        adj: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.adj.get(v).cloned().unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        adj: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for (a, b) in graph.keys() {
        t.adj.entry(a.as_str()).or_default().push(b.as_str());
        t.adj.entry(b.as_str()).or_default();
    }
    let nodes: Vec<&str> = t.adj.keys().copied().collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// The cycles to report: for every edge inside a tangle, the shortest cycle through it
/// (so every edge that is on a cycle appears), each cycle once, starting at its least module.
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found = BTreeSet::new();
    for scc in tangles(graph) {
        let inside = |m: &String| scc.binary_search(m).is_ok();
        for (a, b) in graph.keys().filter(|(a, b)| inside(a) && inside(b)) {
            // Shortest path b -> a inside the tangle (breadth first).
            let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
            let mut queue = VecDeque::from([b]);
            let mut seen = BTreeSet::from([b]);
            while let Some(v) = queue.pop_front() {
                if v == a {
                    break;
                }
                for (_, w) in graph
                    .range((v.clone(), String::new())..)
                    .take_while(|((x, _), _)| x == v)
                    .map(|(e, _)| e)
                {
                    if inside(w) && seen.insert(w) {
                        prev.insert(w, v);
                        queue.push_back(w);
                    }
                }
            }
            let mut cycle = vec![a.clone()];
            let mut v = a;
            while v != b {
                v = prev[v];
                cycle.push(v.clone());
            }
            cycle[1..].reverse();
            // `cycle` is a -> b -> ... -> (back to a): rotate to start at its least module.
            let least = (0..cycle.len()).min_by_key(|&k| &cycle[k]).unwrap_or(0);
            cycle.rotate_left(least);
            found.insert(cycle);
        }
    }
    found.into_iter().collect()
}

/// A cycle as text: the modules, then each edge with where it is made.
pub fn describe(graph: &Graph, cycle: &[String]) -> String {
    let mut s = format!("  {} -> {}\n", cycle.join(" -> "), cycle[0]);
    for k in 0..cycle.len() {
        let (a, b) = (&cycle[k], &cycle[(k + 1) % cycle.len()]);
        let at = &graph[&(a.clone(), b.clone())];
        let more = if at.len() > 1 {
            format!(" (and {} more: {})", at.len() - 1, at[1..].join(", "))
        } else {
            String::new()
        };
        s += &format!("      {a} -> {b}: {}{more}\n", at[0]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{analyse, SourceFile};

    fn files(list: &[(&str, &str)]) -> Vec<SourceFile> {
        list.iter()
            .map(|(rel, text)| SourceFile {
                rel: rel.to_string(),
                text: text.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_cycle_is_found_with_its_locations() {
        let f = files(&[
            (
                "lib.rs",
                "mod cmd;\nmod exec;\nmod util;\npub use crate::exec::run;",
            ),
            ("exec.rs", "use crate::cmd::get::Get;\nuse crate::util;\n"),
            ("cmd/mod.rs", "pub mod get;\npub struct Ctx;\n"),
            (
                "cmd/get.rs",
                "use super::Ctx;\n\nfn f() {\n    crate::exec::helper();\n}\n\
                 #[cfg(test)]\nmod tests { use crate::util::x; }",
            ),
            (
                "util.rs",
                "pub fn x() {}\n#[cfg(test)]\nmod tests { use crate::exec; }",
            ),
            ("util/tests.rs", "use crate::exec;"),
        ]);
        let graph = module_graph("src", &analyse(&f));
        assert_eq!(
            graph.keys().cloned().collect::<Vec<_>>(),
            [
                ("cmd::get".to_string(), "cmd".to_string()),
                ("cmd::get".into(), "exec".into()),
                ("crate".into(), "exec".into()),
                ("exec".into(), "cmd::get".into()),
                ("exec".into(), "util".into()),
            ]
        );
        let found = cycles(&graph);
        assert_eq!(found, [vec!["cmd::get".to_string(), "exec".into()]]);
        let text = describe(&graph, &found[0]);
        assert!(text.contains("cmd::get -> exec -> cmd::get"), "{text}");
        assert!(
            text.contains("cmd::get -> exec: src/cmd/get.rs:4"),
            "{text}"
        );
        assert!(text.contains("exec -> cmd::get: src/exec.rs:1"), "{text}");
    }

    #[test]
    fn every_cycle_of_a_tangle_and_none_without() {
        let edge = |a: &str, b: &str| ((a.to_string(), b.to_string()), vec![format!("{a}.rs:1")]);
        // a -> b -> c -> a and b -> a: two cycles sharing a -> b; d hangs off without a cycle.
        let graph: Graph = [
            edge("a", "b"),
            edge("b", "c"),
            edge("c", "a"),
            edge("b", "a"),
            edge("c", "d"),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            tangles(&graph),
            [vec!["a".to_string(), "b".into(), "c".into()]]
        );
        assert_eq!(
            cycles(&graph),
            [
                vec!["a".to_string(), "b".into()],
                vec!["a".into(), "b".into(), "c".into()]
            ]
        );
        let dag: Graph = [edge("a", "b"), edge("b", "c"), edge("a", "c")]
            .into_iter()
            .collect();
        assert!(cycles(&dag).is_empty());
        // super and self resolve from the module the path is written in.
        let f = files(&[
            ("lib.rs", "mod a;"),
            (
                "a/mod.rs",
                "mod b;\nmod inner { use super::b::X; }\nuse self::b::c::Y;",
            ),
            ("a/b.rs", "use super::super::a::Z;"),
        ]);
        let graph = module_graph("src", &analyse(&f));
        assert_eq!(
            graph.keys().cloned().collect::<Vec<_>>(),
            [
                ("a".to_string(), "a::b".to_string()),
                ("a::b".into(), "a".into())
            ]
        );
        assert_eq!(
            graph[&("a".to_string(), "a::b".to_string())],
            ["src/a/mod.rs:2", "src/a/mod.rs:3"]
        );
    }
}
