//! `quiver bench reopen`: how long opening an existing store takes, from its index checkpoints
//! (after a clean shutdown) and without them (the index rebuilt from the whole log).
//!
//! The checkpoints are moved aside for the rebuild and put back afterwards, whatever happens.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use quiver_store::{Options, RecoveryProgress, Store};
use serde::Serialize;

use crate::benchdir::holds_store;
use crate::error::{Error, Result};

/// The engine's checkpoint file in each partition directory.
pub use quiver_store::layout::CHECKPOINT_FILE;
/// Suffix of a checkpoint moved aside during the rebuild measurement.
const ASIDE_SUFFIX: &str = ".bench-aside";

#[derive(Clone, Debug)]
pub struct ReopenConfig {
    pub dir: PathBuf,
    /// Drop the page cache before each timed open (needs root): a cold start from the device.
    pub cold: bool,
}

/// One timed open: one JSON line of `quiver bench reopen`.
#[derive(Clone, Debug, Serialize)]
pub struct ReopenResult {
    pub bench: &'static str,
    /// `checkpoint` (clean shutdown) or `rebuild` (no checkpoint: the whole log is read).
    pub mode: &'static str,
    pub keys: u64,
    pub partitions: u32,
    pub disk_bytes: u64,
    pub cold: bool,
    pub open_s: f64,
    pub partitions_from_checkpoint: u32,
    pub partitions_rebuilt: u32,
    pub records_replayed: u64,
    pub index_bytes_per_key: f64,
}

pub fn run(
    cfg: &ReopenConfig,
    progress: &mut (dyn FnMut(RecoveryProgress) + Send),
    emit: &mut dyn FnMut(&ReopenResult),
) -> Result<Vec<ReopenResult>> {
    if !holds_store(&cfg.dir) {
        return Err(Error::Invalid(format!(
            "{} does not hold a store (load one first, e.g. with quiver bench local or quiver load)",
            cfg.dir.display()
        )));
    }
    // An untimed open and clean close, so the timed one starts from fresh checkpoints.
    Store::open(&cfg.dir, Options::default())?.close()?;

    let mut out = Vec::new();
    let r = timed_open(cfg, "checkpoint", progress)?;
    emit(&r);
    out.push(r);

    let aside = MovedAside::new(&cfg.dir)?;
    let r = timed_open(cfg, "rebuild", progress);
    aside.restore()?;
    let r = r?;
    emit(&r);
    out.push(r);
    Ok(out)
}

fn timed_open(
    cfg: &ReopenConfig,
    mode: &'static str,
    progress: &mut (dyn FnMut(RecoveryProgress) + Send),
) -> Result<ReopenResult> {
    if cfg.cold {
        drop_page_cache()?;
    }
    let start = Instant::now();
    let store = Store::open_with_progress(&cfg.dir, Options::default(), progress)?;
    let open_s = start.elapsed().as_secs_f64();
    let stats = store.stats();
    let rep = store.recovery_report().clone();
    store.close()?;
    Ok(ReopenResult {
        bench: "reopen",
        mode,
        keys: stats.keys,
        partitions: stats.partitions,
        disk_bytes: stats.disk_bytes,
        cold: cfg.cold,
        open_s,
        partitions_from_checkpoint: rep.partitions_from_checkpoint,
        partitions_rebuilt: rep.partitions_rebuilt,
        records_replayed: rep.records_replayed,
        index_bytes_per_key: stats.index_bytes as f64 / stats.keys.max(1) as f64,
    })
}

/// Writes dirty pages out and drops the page cache (root only).
fn drop_page_cache() -> Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let path = Path::new("/proc/sys/vm/drop_caches");
    fs::write(path, "3\n").map_err(|e| {
        Error::io(
            "drop the page cache (--cold needs root) by writing",
            path,
            e,
        )
    })
}

/// Checkpoint files renamed to `index.ckpt.bench-aside`; `restore` (or drop) renames them back.
struct MovedAside {
    moved: Vec<PathBuf>,
}

impl MovedAside {
    fn new(dir: &Path) -> Result<MovedAside> {
        let mut this = MovedAside { moved: Vec::new() };
        let entries = fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
        let mut parts: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(CHECKPOINT_FILE).is_file())
            .collect();
        parts.sort();
        for p in parts {
            let ckpt = p.join(CHECKPOINT_FILE);
            let aside = aside_path(&ckpt);
            fs::rename(&ckpt, &aside).map_err(|e| Error::io("move aside", &ckpt, e))?;
            this.moved.push(ckpt);
        }
        Ok(this)
    }

    fn restore(mut self) -> Result<()> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> Result<()> {
        let mut first_err = None;
        for ckpt in self.moved.drain(..) {
            let aside = aside_path(&ckpt);
            if let Err(e) = fs::rename(&aside, &ckpt) {
                first_err.get_or_insert(Error::io("restore", &aside, e));
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for MovedAside {
    fn drop(&mut self) {
        let _ = self.restore_all();
    }
}

fn aside_path(ckpt: &Path) -> PathBuf {
    let mut s = ckpt.as_os_str().to_owned();
    s.push(ASIDE_SUFFIX);
    PathBuf::from(s)
}
