//! Names of a store's files and directories, for tools that handle a store directory from the
//! outside (benchmarks moving checkpoints aside, a CLI telling a store from other data). The
//! formats behind them are in `docs/log_format.md`.

use std::path::{Path, PathBuf};

pub use crate::lockfile::LOCK_FILE;
pub use crate::meta::{META_FILE, META_TMP_FILE};
pub use crate::reserve::RESERVE_FILE;

/// A partition's index checkpoint file (in its partition directory).
pub const CHECKPOINT_FILE: &str = "index.ckpt";

/// Directory of partition `id`: `<root>/pNNNN`.
pub fn partition_dir(root: &Path, id: u32) -> PathBuf {
    root.join(partition_dir_name(id))
}

pub fn partition_dir_name(id: u32) -> String {
    format!("p{id:04}")
}

/// Whether `name` is a partition directory's name (`pNNNN`: at least four digits).
pub fn is_partition_dir_name(name: &str) -> bool {
    name.len() >= 5
        && name.len() <= 11
        && name.starts_with('p')
        && name[1..].bytes().all(|b| b.is_ascii_digit())
}

/// Whether `dir` holds a store (its `QUIVER` layout file).
pub fn is_store(dir: &Path) -> bool {
    dir.join(META_FILE).is_file()
}
