//! What a node adds to INFO (`quiver_service::cmd::info`): its store's figures in `# Memory`,
//! `# Persistence`, `# Stats` (the partition locks) and `# Keyspace`, cluster mode, and its
//! widest vector.

use quiver_service::service::{InfoParts, Line};

use crate::state::ServerState;

/// The node's parts of INFO.
pub fn parts(state: &ServerState) -> InfoParts {
    let stats = state.store.stats();
    let l = |k: &str, v: String| (k.to_string(), v);
    InfoParts {
        cluster_enabled: state.cluster.is_some(),
        memory: vec![
            l("index_bytes", stats.index_bytes.to_string()),
            l("index_capacity", stats.index_capacity.to_string()),
            l("index_spilled_keys", stats.index_spilled_keys.to_string()),
            l(
                "index_bytes_per_key",
                format!("{:.2}", stats.index_bytes as f64 / stats.keys.max(1) as f64),
            ),
        ],
        persistence: Some(vec![
            l("loading", "0".into()),
            l("durability", state.config.durability.to_string()),
            l("backend", state.config.backend.to_string()),
            l("partitions", stats.partitions.to_string()),
            l("segments", stats.segments.to_string()),
            l("disk_bytes", stats.disk_bytes.to_string()),
            l("records", stats.records.to_string()),
            l("dead_records", stats.dead_records.to_string()),
            l("garbage_ratio", format!("{:.4}", stats.garbage_ratio)),
            l(
                "compaction_copied_records",
                stats.compaction_copied_records.to_string(),
            ),
            l(
                "compaction_dropped_records",
                stats.compaction_dropped_records.to_string(),
            ),
            l("disk_reserve_bytes", stats.disk_reserve_bytes.to_string()),
            l("short_of_space", (stats.short_of_space as u8).to_string()),
            l(
                "partitions_refusing_writes",
                stats.partitions_refusing_writes.to_string(),
            ),
            l(
                "refusing_writes_because",
                stats.refusing_writes_because.clone().unwrap_or_default(),
            ),
            l(
                "last_background_error",
                stats.last_background_error.clone().unwrap_or_default(),
            ),
            l(
                "maintenance_stall_max_us",
                stats.maintenance_stall_max_us.to_string(),
            ),
            l(
                "maintenance_stall_max_by",
                stats.maintenance_stall_max_by.replace(' ', "_"),
            ),
            l(
                "maintenance_stall_total_us",
                stats.maintenance_stall_total_us.to_string(),
            ),
            l("maintenance_stalls", stats.maintenance_stalls.to_string()),
            l("rdb_changes_since_last_save", "0".into()),
            l("aof_enabled", "0".into()),
        ]),
        stats: lock_lines(&stats.locks),
        sections: Vec::new(),
        keyspace: keyspace(state),
        vectors: vec![l(
            "max_vector_width",
            state.config.max_vector_width.to_string(),
        )],
    }
}

/// Live keys only (those whose expiry time has come are not counted, swept or not);
/// avg_ttl is the exact mean time to live of the keys with an expiry, in ms. One line per
/// database with keys, as Redis.
fn keyspace(state: &ServerState) -> Vec<Line> {
    let l = |k: &str, v: String| (k.to_string(), v);
    state
        .store
        .db_stats()
        .into_iter()
        .map(|d| {
            l(
                &format!("db{}", d.db),
                format!(
                    "keys={},expires={},avg_ttl={}",
                    d.keys, d.expiring_keys, d.avg_ttl_ms
                ),
            )
        })
        .collect()
}

/// The serving paths' partition lock figures (a node's `# Stats`): writers' locks, waits,
/// wait and hold times; readers' waits and wait time.
fn lock_lines(locks: &quiver_store::LockStats) -> Vec<Line> {
    [
        ("partition_write_locks", locks.write_locks),
        ("partition_write_lock_waits", locks.write_waits),
        ("partition_write_lock_wait_us", locks.write_wait_us),
        ("partition_write_lock_hold_us", locks.write_hold_us),
        ("partition_read_lock_waits", locks.read_waits),
        ("partition_read_lock_wait_us", locks.read_wait_us),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
