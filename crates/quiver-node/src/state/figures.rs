//! A node's figures, one row each (`quiver_service::figures`): its store's, which INFO shows in
//! `# Memory` and `# Persistence` (`state::info`) and the metrics endpoint shows too
//! (`state::metrics`), both rendering from these tables.

use quiver_service::figures::{counter, gauge, Figure, Value};
use quiver_store::{BackendKind, Durability, Stats as StoreStats};

use crate::state::saves::SaveFigures;
use crate::state::ServerState;

/// What the node's figures are read from: the store's statistics, taken once, and the
/// settings INFO shows beside them.
pub struct Snapshot {
    pub stats: StoreStats,
    pub durability: Durability,
    pub backend: BackendKind,
    pub saves: SaveFigures,
}

impl Snapshot {
    pub fn of(state: &ServerState) -> Snapshot {
        Snapshot {
            stats: state.store.stats(),
            durability: state.config.durability,
            backend: state.config.backend,
            saves: state.saves.figures(state),
        }
    }
}

type Row = Figure<Snapshot>;

fn count(n: impl Into<u64>) -> Value {
    Value::Count(n.into())
}

/// INFO's `# Memory` lines of the node (after the process's resident set).
pub const MEMORY: &[Row] = &[
    Figure {
        info: Some("index_bytes"),
        metric: gauge("quiver_index_bytes", "Bytes of in-RAM index."),
        read: |s| count(s.stats.index_bytes),
    },
    Figure {
        info: Some("index_capacity"),
        metric: None,
        read: |s| count(s.stats.index_capacity),
    },
    Figure {
        info: Some("index_spilled_keys"),
        metric: None,
        read: |s| count(s.stats.index_spilled_keys),
    },
    Figure {
        info: Some("index_bytes_per_key"),
        metric: None,
        read: |s| {
            let per_key = s.stats.index_bytes as f64 / s.stats.keys.max(1) as f64;
            Value::Text(format!("{per_key:.2}"))
        },
    },
];

/// INFO's `# Persistence`, in its order.
pub const PERSISTENCE: &[Row] = &[
    Figure {
        info: Some("loading"),
        metric: None,
        read: |_| count(0u64),
    },
    Figure {
        info: Some("durability"),
        metric: None,
        read: |s| Value::Text(s.durability.to_string()),
    },
    Figure {
        info: Some("backend"),
        metric: None,
        read: |s| Value::Text(s.backend.to_string()),
    },
    Figure {
        info: Some("partitions"),
        metric: None,
        read: |s| count(s.stats.partitions),
    },
    Figure {
        info: Some("segments"),
        metric: None,
        read: |s| count(s.stats.segments),
    },
    Figure {
        info: Some("disk_bytes"),
        metric: gauge("quiver_disk_bytes", "Bytes of segment files on disk."),
        read: |s| count(s.stats.disk_bytes),
    },
    Figure {
        info: Some("records"),
        metric: gauge("quiver_records", "Records in the logs (live and dead)."),
        read: |s| count(s.stats.records),
    },
    Figure {
        info: Some("dead_records"),
        metric: gauge(
            "quiver_dead_records",
            "Records superseded or deleted, awaiting compaction.",
        ),
        read: |s| count(s.stats.dead_records),
    },
    Figure {
        info: Some("garbage_ratio"),
        metric: gauge("quiver_garbage_ratio", "Dead records / records."),
        read: |s| Value::Ratio(s.stats.garbage_ratio),
    },
    Figure {
        info: Some("compaction_copied_records"),
        metric: None,
        read: |s| count(s.stats.compaction_copied_records),
    },
    Figure {
        info: Some("compaction_dropped_records"),
        metric: None,
        read: |s| count(s.stats.compaction_dropped_records),
    },
    Figure {
        info: Some("disk_reserve_bytes"),
        metric: gauge(
            "quiver_disk_reserve_bytes",
            "Disk space held in reserve for deletes and compaction on a full disk.",
        ),
        read: |s| count(s.stats.disk_reserve_bytes),
    },
    Figure {
        info: Some("short_of_space"),
        metric: gauge(
            "quiver_short_of_space",
            "1 while the reserve is released: writes that add data are refused until \
             compaction makes room.",
        ),
        read: |s| count(s.stats.short_of_space),
    },
    Figure {
        info: Some("partitions_refusing_writes"),
        metric: None,
        read: |s| count(s.stats.partitions_refusing_writes as u64),
    },
    Figure {
        info: Some("refusing_writes_because"),
        metric: None,
        read: |s| Value::Text(s.stats.refusing_writes_because.clone().unwrap_or_default()),
    },
    Figure {
        info: Some("last_background_error"),
        metric: None,
        read: |s| Value::Text(s.stats.last_background_error.clone().unwrap_or_default()),
    },
    Figure {
        info: Some("maintenance_stall_max_us"),
        metric: gauge(
            "quiver_maintenance_stall_max_us",
            "The longest time maintenance (compaction, checkpoint, index resize, expiry \
             sweep) kept a partition's writers waiting, in microseconds.",
        ),
        read: |s| count(s.stats.maintenance_stall_max_us),
    },
    Figure {
        info: Some("maintenance_stall_max_by"),
        metric: None,
        read: |s| Value::Text(s.stats.maintenance_stall_max_by.replace(' ', "_")),
    },
    Figure {
        info: Some("maintenance_stall_total_us"),
        metric: counter(
            "quiver_maintenance_stall_us_total",
            "Time maintenance kept partitions' writers waiting, in microseconds.",
        ),
        read: |s| count(s.stats.maintenance_stall_total_us),
    },
    Figure {
        info: Some("maintenance_stalls"),
        metric: None,
        read: |s| count(s.stats.maintenance_stalls),
    },
    // Redis's RDB fields, for the tools that read them: a save is a checkpoint (`state::saves`),
    // changes are write commands since the last one.
    Figure {
        info: Some("rdb_changes_since_last_save"),
        metric: gauge(
            "quiver_changes_since_last_save",
            "Write commands since the last save (checkpoint).",
        ),
        read: |s| count(s.saves.changes_since_last_save),
    },
    Figure {
        info: Some("rdb_bgsave_in_progress"),
        metric: None,
        read: |s| count(u64::from(s.saves.bgsave_in_progress)),
    },
    Figure {
        info: Some("rdb_last_save_time"),
        metric: gauge(
            "quiver_last_save_timestamp_seconds",
            "Unix time of the last successful save (checkpoint).",
        ),
        read: |s| count(s.saves.last_save_time),
    },
    Figure {
        info: Some("rdb_last_bgsave_status"),
        metric: None,
        read: |s| Value::Text(if s.saves.last_bgsave_ok { "ok" } else { "err" }.into()),
    },
    Figure {
        info: Some("rdb_last_bgsave_time_sec"),
        metric: None,
        read: |s| Value::Text(s.saves.last_bgsave_time_sec.to_string()),
    },
    Figure {
        info: Some("rdb_current_bgsave_time_sec"),
        metric: None,
        read: |s| Value::Text(s.saves.current_bgsave_time_sec.to_string()),
    },
    Figure {
        info: Some("aof_enabled"),
        metric: None,
        read: |_| count(0u64),
    },
];

/// Metrics INFO shows otherwise (`# Keyspace` counts keys per database) or not at all.
pub const METRICS_ONLY: &[Row] = &[
    Figure {
        info: None,
        metric: gauge("quiver_keys", "Live keys."),
        read: |s| count(s.stats.keys),
    },
    Figure {
        info: None,
        metric: gauge("quiver_live_ratio", "Live records / records."),
        read: |s| Value::Ratio(1.0 - s.stats.garbage_ratio),
    },
    Figure {
        info: None,
        metric: counter(
            "quiver_maintenance_runs_total",
            "Compactions and index resizes completed.",
        ),
        read: |s| count(s.stats.maintenance_runs),
    },
];

/// Every row, for the metrics endpoint.
pub fn all() -> impl Iterator<Item = &'static Row> {
    METRICS_ONLY.iter().chain(MEMORY).chain(PERSISTENCE)
}
