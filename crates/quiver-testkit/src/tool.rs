//! Programs the tests run (redis-server, redis-cli, redis-benchmark, etcd, python3, ...),
//! found on the PATH. `scripts/test_deps.sh` installs them; a test that needs one fails (never
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
