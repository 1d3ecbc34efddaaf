//! Programs the tests run (redis-server, redis-cli, redis-benchmark, etcd, python3, ...),
//! found on the PATH, and those built into `target/tools` (redis_exporter). `scripts/test_deps.sh` installs them; a test that needs one fails (never
//! skips) when it is missing.

use std::path::PathBuf;

/// `name` on the PATH, if installed.
pub fn find(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// `name` on the PATH, or a panic naming the script that installs it.
pub fn require(name: &str) -> PathBuf {
    find(name).unwrap_or_else(|| panic!("{name} is not installed: run scripts/test_deps.sh"))
}

/// A program `scripts/test_deps.sh` builds into the workspace's `target/tools` (Go programs
/// installed with `go install`: redis_exporter), or a panic naming the script.
pub fn built(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools")
        .join(name);
    if !path.is_file() {
        panic!("{name} is not built: run scripts/test_deps.sh");
    }
    path
}
