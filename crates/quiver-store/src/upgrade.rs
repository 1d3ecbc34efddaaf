//! Converting a store of on-disk format 1 to the current format (`quiver upgrade --dir D`),
//! offline. Format 1 records are format 2 records without `ext`, but format 1 spread keys over
//! partitions by hash and format 2 by Redis Cluster slot, so every key moves: the store is
//! rewritten.
//!
//! 1. The old store is opened read-only in format 1 (`Options::legacy_v1`): its recovery
//!    (checkpoints of format 1 are ignored: the index is rebuilt from the log) decides what is
//!    live, exactly as the old version did.
//! 2. A new store is created beside it (`D.upgrading`, removed first if an earlier upgrade was
//!    interrupted), with the same partition count and segment size, and every live key is
//!    copied into it, a vector at a time, in SCAN order; it is closed (flushed, fsynced,
//!    checkpointed).
//! 3. Verification: the new store is opened again and every key of the old one is read from
//!    both and compared, and their key counts must be equal.
//! 4. The old store is renamed `D.v1` (kept until the operator deletes it) and the new one `D`.
//!    A crash before this step leaves `D` as it was; between the two renames, `D` is missing
//!    and `D.upgrading` is complete and verified (the error of a later run says so).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::log::format::FORMAT_VERSION;
use crate::log::segment::sync_dir;
use crate::options::Options;
use crate::store::Store;

/// Keys copied and verified per engine call.
const UPGRADE_PAGE_KEYS: usize = 1024;

/// What [`upgrade`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeReport {
    /// Live keys copied and verified.
    pub keys: u64,
    /// Where the old store now is.
    pub old_store: PathBuf,
    pub from_version: u32,
    pub to_version: u32,
}

/// Upgrades the store in `dir` to the current format (see the module documentation); `opts`
/// as for opening it (backend, limits); partitions and segment size come from the old store.
pub fn upgrade(dir: impl AsRef<Path>, opts: Options) -> Result<UpgradeReport> {
    let dir = dir.as_ref();
    let name = dir
        .file_name()
        .ok_or_else(|| Error::InvalidOptions(format!("{} names no directory", dir.display())))?;
    let sibling = |suffix: &str| {
        let mut n = name.to_os_string();
        n.push(suffix);
        dir.with_file_name(n)
    };
    let (work, backup) = (sibling(".upgrading"), sibling(".v1"));
    let old = Store::open(
        dir,
        Options {
            legacy_v1: true,
            read_only: true,
            background: false,
            ..opts.clone()
        },
    )?;
    if backup.exists() {
        return Err(Error::InvalidOptions(format!(
            "{} exists (an earlier upgrade's old store?): move it away first",
            backup.display()
        )));
    }
    let (partitions, segment_bytes) = (old.options().partitions, old.options().segment_bytes);
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| Error::io("remove an interrupted upgrade", &work, e))?;
    }
    let new_opts = Options {
        partitions,
        segment_bytes,
        legacy_v1: false,
        read_only: false,
        background: false,
        expected_keys: old.len(),
        ..opts
    };
    let new = Store::open(&work, new_opts.clone())?;
    let copied = for_each_page(&old, |keys, values| {
        let pairs: Vec<(&[u8], &[u8])> = keys
            .iter()
            .zip(values)
            .filter_map(|(k, v)| v.as_deref().map(|v| (&k[..], v)))
            .collect();
        new.multi_put(&pairs)
    })?;
    new.close()?;

    // Verify: every key of the old store, read back from the new one.
    let new = Store::open(
        &work,
        Options {
            read_only: true,
            ..new_opts
        },
    )?;
    let checked = for_each_page(&old, |keys, values| {
        let got = new.multi_get(keys)?;
        match keys.iter().zip(values).zip(got).find(|((_, v), g)| *v != g) {
            None => Ok(()),
            Some(((k, _), _)) => Err(Error::Incompatible {
                path: work.clone(),
                reason: format!(
                    "verification failed: key {} differs from the old store",
                    crate::error::show_key(k)
                ),
            }),
        }
    })?;
    if checked != copied || new.len() != copied {
        return Err(Error::Incompatible {
            path: work.clone(),
            reason: format!(
                "verification failed: {copied} keys copied, {checked} read back, {} in the new \
                 store",
                new.len()
            ),
        });
    }
    drop(new);
    drop(old);

    std::fs::rename(dir, &backup).map_err(|e| Error::io("move the old store aside", dir, e))?;
    std::fs::rename(&work, dir).map_err(|e| Error::io("move the new store in", &work, e))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(UpgradeReport {
        keys: copied,
        old_store: backup,
        from_version: crate::log::format::FORMAT_VERSION_V1,
        to_version: FORMAT_VERSION,
    })
}

/// Walks every live key of `store` in SCAN order, a page at a time, with its value; returns
/// how many keys there were.
fn for_each_page(
    store: &Store,
    mut f: impl FnMut(&[bytes::Bytes], &[Option<bytes::Bytes>]) -> Result<()>,
) -> Result<u64> {
    let mut cursor = 0;
    let mut n = 0;
    // Bounded by the key space: every page moves the cursor on until it comes back 0.
    loop {
        let page = store.scan(cursor, None, UPGRADE_PAGE_KEYS)?;
        if !page.keys.is_empty() {
            let values = store.multi_get(&page.keys)?;
            n += values.iter().filter(|v| v.is_some()).count() as u64;
            f(&page.keys, &values)?;
        }
        if page.cursor == 0 {
            return Ok(n);
        }
        cursor = page.cursor;
    }
}
