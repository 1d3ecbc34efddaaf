//! The offline store commands: stats, compact, check. They open the store in `--dir`
//! themselves, so no server may be running on it (the store's lock says so). `stats` and
//! `check` open it read-only: they write nothing, so they work on a full disk too.

use std::io::Write;
use std::path::Path;

use quiver_bench::benchdir::holds_store;
use quiver_store::{DamagePolicy, Options, Store};
use serde::Serialize;

use crate::error::CliError;
use crate::progress;

/// Opens the store in `dir`, which must already hold one (an offline command never creates
/// a store), and warns about what recovery found.
fn open_existing(dir: &Path, opts: Options) -> Result<Store, CliError> {
    require_store(dir)?;
    let store = progress::open_store(dir, opts)?;
    let rep = store.recovery_report();
    for t in &rep.torn_tails {
        eprintln!("quiver: warning: torn log tail (an interrupted write): {t}");
    }
    for d in &rep.damage {
        eprintln!("quiver: warning: damaged log: {d}");
    }
    Ok(store)
}

/// Options that open a store without writing anything.
fn reading_only() -> Options {
    Options {
        read_only: true,
        ..Options::default()
    }
}

fn require_store(dir: &Path) -> Result<(), CliError> {
    if !holds_store(dir) {
        let why = if dir.exists() {
            "does not hold a Quiver store"
        } else {
            "does not exist"
        };
        return Err(CliError::Usage(format!(
            "{} {why} (`quiver serve` creates a store; or pass --dir)",
            dir.display()
        )));
    }
    Ok(())
}

/// `quiver stats` output.
#[derive(Serialize)]
struct StatsOut {
    keys: u64,
    index_bytes: u64,
    index_bytes_per_key: f64,
    index_capacity: u64,
    partitions: u32,
    segments: u64,
    disk_bytes: u64,
    records: u64,
    dead_records: u64,
    garbage_ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_background_error: Option<String>,
}

fn print_json(v: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(v).map_err(std::io::Error::from)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

pub fn stats(dir: &Path) -> Result<(), CliError> {
    let store = open_existing(dir, reading_only())?;
    let s = store.stats();
    store.close()?;
    print_json(&StatsOut {
        keys: s.keys,
        index_bytes: s.index_bytes,
        index_bytes_per_key: if s.keys == 0 {
            0.0
        } else {
            s.index_bytes as f64 / s.keys as f64
        },
        index_capacity: s.index_capacity,
        partitions: s.partitions,
        segments: s.segments,
        disk_bytes: s.disk_bytes,
        records: s.records,
        dead_records: s.dead_records,
        garbage_ratio: s.garbage_ratio,
        last_background_error: s.last_background_error,
    })
}

#[derive(Serialize)]
struct CompactOut {
    segments_compacted: usize,
    segments_written: usize,
    records_copied: u64,
    records_dropped: u64,
    disk_bytes_before: u64,
    disk_bytes_after: u64,
}

pub fn compact(dir: &Path) -> Result<(), CliError> {
    let store = open_existing(dir, Options::default())?;
    let before = store.stats().disk_bytes;
    let r = store.compact()?;
    let after = store.stats().disk_bytes;
    store.close()?;
    print_json(&CompactOut {
        segments_compacted: r.segments_compacted,
        segments_written: r.segments_written,
        records_copied: r.records_copied,
        records_dropped: r.records_dropped,
        disk_bytes_before: before,
        disk_bytes_after: after,
    })
}

#[derive(Serialize)]
struct CheckOut<'a> {
    segments: u64,
    records: u64,
    index_entries: u64,
    /// What `Store::check` found.
    problems: &'a [String],
    /// What opening the store found (torn tails are ignored, not truncated: nothing is
    /// written).
    torn_tails: &'a [String],
    damage_found_on_open: &'a [String],
}

/// `quiver check`: read-only. The store is opened salvaging (damage is reported rather than
/// refused), so that every problem can be listed.
pub fn check(dir: &Path, repair: bool) -> Result<(), CliError> {
    if repair {
        return check_repair(dir);
    }
    let opts = Options {
        on_damage: DamagePolicy::Salvage,
        ..reading_only()
    };
    let store = open_existing(dir, opts)?;
    let r = store.check()?;
    let rep = store.recovery_report().clone();
    store.close()?;
    print_json(&CheckOut {
        segments: r.segments,
        records: r.records,
        index_entries: r.index_entries,
        problems: &r.problems,
        torn_tails: &rep.torn_tails,
        damage_found_on_open: &rep.damage,
    })?;
    let bad = r.problems.len() + rep.damage.len();
    if bad > 0 {
        return Err(CliError::Negative(format!(
            "check found {bad} problem(s) in {}; `quiver check --repair` keeps what is intact \
             and reports what is lost",
            dir.display()
        )));
    }
    Ok(())
}

#[derive(Serialize)]
struct RepairOut<'a> {
    /// Damaged places and the keys that may now show an older value (or none).
    lost: &'a [String],
    /// Segment files that could not be read, renamed `*.damaged`.
    set_aside: Vec<String>,
    records_copied: u64,
    records_dropped: u64,
    /// What a check of the repaired store found (empty: it is intact).
    problems_after: &'a [String],
}

#[derive(Serialize)]
struct UpgradeOut {
    from_version: u32,
    to_version: u32,
    keys: u64,
    old_store: String,
}

/// `quiver upgrade`: converts an older store (see `quiver_store::upgrade`).
pub fn upgrade(dir: &Path) -> Result<(), CliError> {
    require_store(dir)?;
    let rep = quiver_store::upgrade(dir, Options::default())?;
    print_json(&UpgradeOut {
        from_version: rep.from_version,
        to_version: rep.to_version,
        keys: rep.keys,
        old_store: rep.old_store.display().to_string(),
    })?;
    eprintln!(
        "quiver: upgraded {} to format {} ({} keys, verified); the old store is at {}",
        dir.display(),
        rep.to_version,
        rep.keys,
        rep.old_store.display()
    );
    Ok(())
}

fn check_repair(dir: &Path) -> Result<(), CliError> {
    require_store(dir)?;
    let rep = quiver_store::repair(dir, Options::default())?;
    let after = open_existing(dir, reading_only())?;
    let check = after.check()?;
    after.close()?;
    let lost = rep.losses();
    print_json(&RepairOut {
        lost: &lost,
        set_aside: rep
            .set_aside
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        records_copied: rep.compaction.records_copied,
        records_dropped: rep.compaction.records_dropped,
        problems_after: &check.problems,
    })?;
    if !check.is_ok() {
        return Err(CliError::Negative(format!(
            "{} still has {} problem(s) after the repair",
            dir.display(),
            check.problems.len()
        )));
    }
    if !lost.is_empty() {
        eprintln!(
            "quiver: repaired {}: {} damaged place(s); see \"lost\" for what they held",
            dir.display(),
            lost.len()
        );
    }
    Ok(())
}
