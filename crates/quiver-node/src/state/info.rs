//! What a node adds to INFO (`quiver_service::cmd::info`): its store's figures in `# Memory`,
//! `# Persistence`, `# Stats` (the partition locks) and `# Keyspace`, cluster mode, and its
//! widest vector.

use quiver_service::figures::info_lines;
use quiver_service::service::{line, InfoParts, Line};

use crate::state::figures::{self, Snapshot};
use crate::state::ServerState;

/// The node's parts of INFO.
pub fn parts(state: &ServerState) -> InfoParts {
    let snapshot = Snapshot::of(state);
    InfoParts {
        cluster_enabled: state.cluster.is_some(),
        memory: info_lines(&snapshot, figures::MEMORY),
        persistence: Some(info_lines(&snapshot, figures::PERSISTENCE)),
        stats: lock_lines(&snapshot.stats.locks),
        replication: replication(state),
        sections: Vec::new(),
        keyspace: keyspace(state),
        vectors: vec![line(
            "max_vector_width",
            state.live.max_vector_width().to_string(),
        )],
    }
}

/// `# Replication`: a cluster node's role from its chains (`cmd::topology::replication`), a
/// standalone node's, a master without replicas.
fn replication(state: &ServerState) -> Vec<Line> {
    use quiver_service::cmd::replication::{info_lines, Replication};
    match &state.cluster {
        Some(node) => info_lines(
            &crate::cmd::topology::replication(node, &node.view()),
            &node.id,
        ),
        None => info_lines(&Replication::alone(), "standalone"),
    }
}

/// Live keys only (those whose expiry time has come are not counted, swept or not);
/// avg_ttl is the exact mean time to live of the keys with an expiry, in ms. One line per
/// database with keys, as Redis.
fn keyspace(state: &ServerState) -> Vec<Line> {
    state
        .store
        .db_stats()
        .into_iter()
        .map(|d| {
            line(
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
/// wait and hold times (and, of the holds, intents' upgrades waiting for readers and the
/// exclusive part, what readers can wait for);
/// readers' waits and wait time.
fn lock_lines(locks: &quiver_store::LockStats) -> Vec<Line> {
    [
        ("partition_write_locks", locks.write_locks),
        ("partition_write_lock_waits", locks.write_waits),
        ("partition_write_lock_wait_us", locks.write_wait_us),
        ("partition_write_lock_hold_us", locks.write_hold_us),
        (
            "partition_write_lock_upgrade_wait_us",
            locks.upgrade_wait_us,
        ),
        ("partition_write_lock_exclusive_us", locks.exclusive_hold_us),
        ("partition_read_lock_waits", locks.read_waits),
        ("partition_read_lock_wait_us", locks.read_wait_us),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
