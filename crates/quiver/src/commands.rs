//! The offline store commands: load, get, set, del, stats, compact, check.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use quiver_bench::benchdir::holds_store;
use quiver_bench::load::{self, LoadSpec};
use quiver_store::{Options, Store};
use serde::Serialize;

use crate::cli::LoadArgs;
use crate::progress::{self, LOAD_TEMPLATE};
use crate::CliError;

/// Opens the store in `dir`, which must already hold one.
fn open_existing(dir: &Path) -> Result<Store, CliError> {
    if !holds_store(dir) {
        let why = if dir.exists() {
            "does not hold a Quiver store"
        } else {
            "does not exist"
        };
        return Err(CliError::Usage(format!(
            "{} {why} (create a store with `quiver load` or `quiver set`, or pass --dir)",
            dir.display()
        )));
    }
    open(dir, Options::default())
}

/// Opens (or creates) the store in `dir` and warns about what recovery found.
fn open(dir: &Path, opts: Options) -> Result<Store, CliError> {
    let store = progress::open_store(dir, opts)?;
    let rep = store.recovery_report();
    for t in &rep.torn_tails {
        eprintln!("quiver: warning: torn log tail (an interrupted write) truncated: {t}");
    }
    for d in &rep.damage {
        eprintln!("quiver: warning: damaged log: {d}");
    }
    Ok(store)
}

fn printable(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

pub fn load(dir: &Path, a: &LoadArgs) -> Result<(), CliError> {
    let spec = LoadSpec {
        count: a.count,
        key_size: a.key_size,
        value_size: a.value_size,
        width: a.width,
    };
    spec.validate()?;
    let mut opts = Options {
        durability: a.durability,
        backend: a.backend,
        expected_keys: a.count,
        ..Options::default()
    };
    if let Some(p) = a.partitions {
        opts.partitions = p;
    }
    let store = open(dir, opts)?;
    if let Some(p) = a.partitions {
        let have = store.options().partitions;
        if have != p {
            eprintln!("quiver: warning: the store already exists with {have} partitions; --partitions {p} ignored");
        }
    }
    let pb = progress::bar(a.count, LOAD_TEMPLATE);
    pb.set_message("loading");
    let report = load::load(&store, &spec, &mut |done| pb.set_position(done));
    pb.finish_and_clear();
    let report = report?;
    store.close()?;
    println!(
        "loaded {} keys in {:.3} s: {:.0} keys/s, {:.1} MB/s (then {:.3} s to flush to disk)",
        report.keys,
        report.seconds,
        report.keys_per_sec(),
        report.mb_per_sec(),
        report.flush_seconds
    );
    Ok(())
}

pub fn get(dir: &Path, key: &OsString) -> Result<(), CliError> {
    let store = open_existing(dir)?;
    let key = key.as_bytes();
    let value = store.get(key)?;
    store.close()?;
    match value {
        Some(v) => {
            let mut out = std::io::stdout().lock();
            out.write_all(&v)?;
            out.write_all(b"\n")?;
            out.flush()?;
            Ok(())
        }
        None => Err(CliError::Negative(format!(
            "key {} not found",
            printable(key)
        ))),
    }
}

pub fn set(dir: &Path, key: &OsString, value: &OsString) -> Result<(), CliError> {
    let store = open(dir, Options::default())?;
    store.put(key.as_bytes(), value.as_bytes())?;
    store.close()?;
    println!("OK");
    Ok(())
}

pub fn del(dir: &Path, keys: &[OsString]) -> Result<(), CliError> {
    let store = open_existing(dir)?;
    let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let mut deleted = 0u64;
    for chunk in keys.chunks(store.options().vector_width_max) {
        deleted += store
            .multi_delete(chunk)?
            .into_iter()
            .filter(|&d| d)
            .count() as u64;
    }
    store.close()?;
    println!("{deleted}");
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
