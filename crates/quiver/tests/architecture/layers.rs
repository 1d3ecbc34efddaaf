//! The layer rules: which workspace crate may depend on which, and which modules of a crate
//! no other module of it may import.

use super::graph::Graph;

/// The workspace's crates by layer, lowest first (ARCHITECTURE.md's crate map). A crate may
/// depend (`[dependencies]`; dev-dependencies are the tests' business) only on crates of
/// lower layers: so the RESP service knows nothing of the store, the cluster's metadata
/// nothing of the engine, the engine nothing of the network. A crate that is in no layer is
/// an error: place a new crate here first.
pub const CRATE_LAYERS: &[&[&str]] = &[
    // The protocol's codec and slots; the planning maths (PRNG, set cover, simulations).
    &["quiver-resp", "quiver-plan"],
    // The parts, each on its own: the engine, the RESP service, the peer transport, the
    // cluster's metadata, the client; and the tests' kit (a dev-dependency only).
    &[
        "quiver-store",
        "quiver-service",
        "quiver-peer",
        "quiver-cluster",
        "quiver-client",
        "quiver-testkit",
    ],
    // What is built of the parts: the data node, the router, the load generators, the
    // reports.
    &[
        "quiver-node",
        "quiver-router",
        "quiver-bench",
        "quiver-report",
    ],
    // The binary.
    &["quiver"],
];

/// Modules no other module of their crate may import (`mod` declarations aside): (the crate's
/// `src` directory, the top-level module). The node's in-process test server is for tests
/// (of this crate and others) alone: no module of the node runs on it.
pub const SEALED: &[(&str, &str)] = &[("crates/quiver-node/src", "testing")];

/// The workspace crates a `Cargo.toml` names under `[dependencies]`.
pub fn manifest_deps(toml: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if in_deps && name.starts_with("quiver") {
            deps.push(name.to_string());
        }
    }
    deps
}

fn layer_of(name: &str) -> Option<usize> {
    CRATE_LAYERS.iter().position(|l| l.contains(&name))
}

/// What breaks [`CRATE_LAYERS`] among `crates` (name, its workspace dependencies).
pub fn crate_violations(crates: &[(String, Vec<String>)]) -> Vec<String> {
    let mut found = Vec::new();
    for (name, deps) in crates {
        let Some(layer) = layer_of(name) else {
            found.push(format!("{name} is in no layer of CRATE_LAYERS"));
            continue;
        };
        for dep in deps {
            match layer_of(dep) {
                Some(l) if l < layer => {}
                Some(l) => found.push(format!(
                    "{name} (layer {layer}) depends on {dep} (layer {l}): only lower layers"
                )),
                None => found.push(format!("{name} depends on {dep}, which is in no layer")),
            }
        }
    }
    found
}

/// The imports of `dir`'s `graph` that break [`SEALED`]: an edge into a sealed module from a
/// module outside it, with where it is made.
pub fn sealed_violations(dir: &str, graph: &Graph) -> Vec<String> {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut found = Vec::new();
    for &(_, sealed) in SEALED.iter().filter(|(d, _)| *d == dir) {
        for ((from, to), at) in graph {
            if top(to) == sealed && top(from) != sealed && from != "crate" {
                found.push(format!("{from} imports {to} ({})", at[0]));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn manifest_dependencies_are_read_from_their_section_only() {
        let toml = "[package]\nname = \"quiver-x\"\n\n[dependencies]\nbytes.workspace = true\n\
                    quiver-resp.workspace = true\nquiver-store = { workspace = true }\n\n\
                    [dev-dependencies]\nquiver-node.workspace = true\n";
        assert_eq!(manifest_deps(toml), ["quiver-resp", "quiver-store"]);
    }

    #[test]
    fn an_upward_or_sideways_crate_dependency_is_refused() {
        let ok = deps(&[
            ("quiver-service", &["quiver-resp"]),
            ("quiver-node", &["quiver-service", "quiver-store"]),
        ]);
        assert_eq!(crate_violations(&ok), Vec::<String>::new());
        // Planted: the service on the engine (same layer), the engine on the node (above).
        let planted = deps(&[
            ("quiver-service", &["quiver-store"]),
            ("quiver-store", &["quiver-node"]),
            ("quiver-new", &[]),
        ]);
        let found = crate_violations(&planted);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("quiver-service (layer 1) depends on quiver-store"));
        assert!(found[1].contains("quiver-store (layer 1) depends on quiver-node"));
        assert!(found[2].contains("quiver-new is in no layer"));
    }

    #[test]
    fn an_import_of_a_sealed_module_from_outside_is_refused() {
        let dir = "crates/quiver-node/src";
        let mut graph = Graph::new();
        graph.insert(("testing::x".into(), "testing".into()), vec!["a:1".into()]);
        graph.insert(("crate".into(), "testing".into()), vec!["lib.rs:2".into()]);
        graph.insert(("testing".into(), "node".into()), vec!["b:3".into()]);
        assert_eq!(sealed_violations(dir, &graph), Vec::<String>::new());
        // Planted: the node's executor calling into the test server.
        graph.insert(
            ("exec::vector".into(), "testing::helper".into()),
            vec!["exec/vector.rs:9".into()],
        );
        assert_eq!(
            sealed_violations(dir, &graph),
            ["exec::vector imports testing::helper (exec/vector.rs:9)"]
        );
        assert_eq!(
            sealed_violations("crates/other/src", &graph),
            Vec::<String>::new()
        );
    }
}
