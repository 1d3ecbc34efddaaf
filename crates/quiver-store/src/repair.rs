//! Repairing a damaged store (`quiver check --repair`): salvage what is intact, say what was
//! lost, and leave a log that opens cleanly again.
//!
//! 1. Open with `DamagePolicy::Salvage`: damaged bytes are skipped, and the recovery report
//!    names them and the keys that may now show an older value.
//! 2. Segment files that could not be used at all are renamed `*.damaged` (kept for forensics,
//!    never read again).
//! 3. Every partition is compacted: only verified live records are copied, so the damaged
//!    bytes leave the log (a live record whose value is damaged is dropped and named).
//! 4. The store is closed (checkpointed). The next ordinary opening finds no damage.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::maintenance::MaintenanceReport;
use crate::options::{DamagePolicy, Options};
use crate::recovery::RecoveryReport;
use crate::store::Store;

/// File-name suffix given to segment files a repair set aside.
pub const DAMAGED_SUFFIX: &str = ".damaged";

/// What [`repair`] found and did.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    /// What opening found: `damage` lists every damaged place and the keys that may have
    /// lost their newest value.
    pub recovery: RecoveryReport,
    /// Segment files renamed `*.damaged`: their records are lost.
    pub set_aside: Vec<PathBuf>,
    /// The compaction that rewrote the log (its `damage` lists live records dropped for a
    /// damaged value).
    pub compaction: MaintenanceReport,
}

impl RepairReport {
    /// Everything lost or possibly rolled back, one line each.
    pub fn losses(&self) -> Vec<String> {
        self.recovery
            .damage
            .iter()
            .chain(&self.compaction.damage)
            .cloned()
            .collect()
    }
}

/// Repairs the store in `dir` (see the module documentation). `opts` as for opening it; the
/// damage policy, read-only flag and background thread are set by the repair.
pub fn repair(dir: impl AsRef<Path>, opts: Options) -> Result<RepairReport> {
    let opts = Options {
        on_damage: DamagePolicy::Salvage,
        read_only: false,
        background: false,
        ..opts
    };
    let store = Store::open(dir, opts)?;
    let mut report = RepairReport {
        recovery: store.recovery_report().clone(),
        ..Default::default()
    };
    for path in &report.recovery.unusable_files {
        let mut to = path.clone().into_os_string();
        to.push(DAMAGED_SUFFIX);
        let to = PathBuf::from(to);
        std::fs::rename(path, &to).map_err(|e| Error::io("set aside damaged segment", &to, e))?;
        report.set_aside.push(to);
    }
    report.compaction = store.compact()?;
    store.close()?;
    Ok(report)
}
