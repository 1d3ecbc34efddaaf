//! The offline store commands: stats, compact, check. They open the store in `--dir`
//! themselves, so no server may be running on it (the store's lock says so).

use std::io::Write;
use std::path::Path;

use quiver_bench::benchdir::holds_store;
use quiver_store::{Options, Store};
use serde::Serialize;

use crate::progress;
use crate::CliError;

/// Opens the store in `dir`, which must already hold one (an offline command never creates
/// a store), and warns about what recovery found.
fn open_existing(dir: &Path) -> Result<Store, CliError> {
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
    let store = progress::open_store(dir, Options::default())?;
    let rep = store.recovery_report();
    for t in &rep.torn_tails {
        eprintln!("quiver: warning: torn log tail (an interrupted write) truncated: {t}");
    }
    for d in &rep.damage {
        eprintln!("quiver: warning: damaged log: {d}");
    }
    Ok(store)
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
    let text = serde_json::to_string_pretty(v).expect("plain structs serialize");
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

pub fn stats(dir: &Path) -> Result<(), CliError> {
    let store = open_existing(dir)?;
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
    index_capacity_before: usize,
    index_capacity_after: usize,
    disk_bytes_before: u64,
    disk_bytes_after: u64,
}

pub fn compact(dir: &Path) -> Result<(), CliError> {
    let store = open_existing(dir)?;
    let before = store.stats().disk_bytes;
    let r = store.compact()?;
    let after = store.stats().disk_bytes;
    store.close()?;
    print_json(&CompactOut {
        segments_compacted: r.segments_compacted,
        segments_written: r.segments_written,
        records_copied: r.records_copied,
        records_dropped: r.records_dropped,
        index_capacity_before: r.index_capacity_before,
        index_capacity_after: r.index_capacity_after,
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
    /// What opening the store found and repaired or skipped.
    torn_tails_truncated: &'a [String],
    damage_found_on_open: &'a [String],
}

pub fn check(dir: &Path) -> Result<(), CliError> {
    let store = open_existing(dir)?;
    let r = store.check()?;
    let rep = store.recovery_report().clone();
    store.close()?;
    print_json(&CheckOut {
        segments: r.segments,
        records: r.records,
        index_entries: r.index_entries,
        problems: &r.problems,
        torn_tails_truncated: &rep.torn_tails,
        damage_found_on_open: &rep.damage,
    })?;
    let bad = r.problems.len() + rep.damage.len();
    if bad > 0 {
        return Err(CliError::Negative(format!(
            "check found {bad} problem(s) in {}",
            dir.display()
        )));
    }
    Ok(())
}
