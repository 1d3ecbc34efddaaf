//! The benchmark's data directory: a store plus `bench-params.json`, the parameters it is
//! loaded with. The file is written before the load (marking the directory as the benchmark's)
//! and marked complete after it, so `--reuse` never reuses half a load.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const PARAMS_FILE: &str = "bench-params.json";
use quiver_store::layout::LOCK_FILE as STORE_LOCK_FILE;
/// The engine's metadata file: its presence marks a store.
pub use quiver_store::layout::META_FILE as STORE_META_FILE;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadParams {
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub partitions: u32,
    /// Keys loaded with an expiry time (`bench local --expire-s`).
    #[serde(default)]
    pub expiring: bool,
    /// The load finished and the store was closed cleanly.
    pub complete: bool,
}

impl LoadParams {
    /// Same data set (ignoring completeness).
    pub fn same_data(&self, other: &LoadParams) -> bool {
        (
            self.keys,
            self.key_size,
            self.value_size,
            self.partitions,
            self.expiring,
        ) == (
            other.keys,
            other.key_size,
            other.value_size,
            other.partitions,
            other.expiring,
        )
    }
}

/// Whether `dir` holds a store.
pub fn holds_store(dir: &Path) -> bool {
    dir.join(STORE_META_FILE).is_file()
}

/// The parameters a complete benchmark load recorded in `dir`, if any.
pub fn read_params(dir: &Path) -> Option<LoadParams> {
    let text = fs::read_to_string(dir.join(PARAMS_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn write_params(dir: &Path, p: &LoadParams) -> Result<()> {
    let path = dir.join(PARAMS_FILE);
    let text = serde_json::to_string_pretty(p).map_err(|e| Error::io("write", &path, e.into()))?;
    fs::write(&path, text + "\n").map_err(|e| Error::io("write", path, e))
}

/// Makes `dir` ready for a fresh load: absent or empty is fine; a store made by the benchmark
/// (it has `bench-params.json`) is removed; anything else is refused rather than deleted.
pub fn prepare_fresh(dir: &Path) -> Result<()> {
    let refuse = |reason: &str| Error::UnsafeDir {
        path: dir.to_path_buf(),
        reason: reason.to_string(),
    };
    let entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io("list", dir, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e));
        }
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    if entries.is_empty() {
        return Ok(());
    }
    let ours = |p: &PathBuf| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        [
            PARAMS_FILE,
            STORE_META_FILE,
            STORE_LOCK_FILE,
            quiver_store::layout::META_TMP_FILE,
            quiver_store::layout::RESERVE_FILE,
        ]
        .contains(&name)
            || quiver_store::layout::is_partition_dir_name(name)
    };
    if let Some(other) = entries.iter().find(|p| !ours(p)) {
        return Err(refuse(&format!(
            "not empty and holds {} which is not part of a benchmark store; use an empty or new directory",
            other.display()
        )));
    }
    if holds_store(dir) && !dir.join(PARAMS_FILE).exists() {
        return Err(refuse(
            "holds a store that quiver bench did not load (no bench-params.json); \
             use an empty or new directory",
        ));
    }
    for p in entries {
        let res = if p.is_dir() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
        res.map_err(|e| Error::io("remove", &p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_foreign_directories() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("new");
        prepare_fresh(&d).unwrap();
        assert!(d.is_dir());
        fs::write(d.join("notes.txt"), "keep me").unwrap();
        assert!(prepare_fresh(&d).is_err());
        assert!(d.join("notes.txt").exists());

        let s = t.path().join("store");
        fs::create_dir_all(s.join("p0000")).unwrap();
        fs::write(s.join(STORE_META_FILE), "x").unwrap();
        assert!(
            prepare_fresh(&s).is_err(),
            "a store without bench-params.json is not ours"
        );
        let p = params();
        write_params(&s, &p).unwrap();
        assert_eq!(read_params(&s), Some(p));
        prepare_fresh(&s).unwrap();
        assert_eq!(fs::read_dir(&s).unwrap().count(), 0);
    }

    fn params() -> LoadParams {
        LoadParams {
            keys: 1,
            key_size: 8,
            value_size: 1,
            partitions: 1,
            expiring: false,
            complete: true,
        }
    }

    /// Every file a real store leaves in its directory (the disk reserve, the lock, ...) is
    /// the benchmark's to remove: a second load into the same directory works.
    #[test]
    fn a_store_the_engine_made_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("store");
        prepare_fresh(&d).unwrap();
        let p = params();
        write_params(&d, &p).unwrap();
        let store = quiver_store::Store::open(&d, quiver_store::Options::default()).unwrap();
        store.put(b"k", b"v").unwrap();
        store.close().unwrap();
        prepare_fresh(&d).unwrap();
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
    }
}
