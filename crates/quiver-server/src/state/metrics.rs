//! A node's Prometheus figures (`GET /metrics` on `metrics-addr`): its store's, then those
//! every RESP server has (`quiver_service::metrics::render_core`).

use crate::state::ServerState;
use quiver_service::figures::write_metric;
use quiver_service::metrics::render_core;

/// A node's metrics in Prometheus's text exposition format: its store's, then [`render_core`]'s.
pub fn render(state: &ServerState) -> String {
    let mut o = String::new();
    let store = state.store.stats();
    let mut gauge = |name: &str, help: &str, kind: &str, value: String| {
        write_metric(&mut o, name, help, kind, value);
    };
    gauge("quiver_keys", "Live keys.", "gauge", store.keys.to_string());
    gauge(
        "quiver_disk_bytes",
        "Bytes of segment files on disk.",
        "gauge",
        store.disk_bytes.to_string(),
    );
    gauge(
        "quiver_index_bytes",
        "Bytes of in-RAM index.",
        "gauge",
        store.index_bytes.to_string(),
    );
    gauge(
        "quiver_records",
        "Records in the logs (live and dead).",
        "gauge",
        store.records.to_string(),
    );
    gauge(
        "quiver_dead_records",
        "Records superseded or deleted, awaiting compaction.",
        "gauge",
        store.dead_records.to_string(),
    );
    gauge(
        "quiver_garbage_ratio",
        "Dead records / records.",
        "gauge",
        format!("{}", store.garbage_ratio),
    );
    gauge(
        "quiver_live_ratio",
        "Live records / records.",
        "gauge",
        format!("{}", 1.0 - store.garbage_ratio),
    );
    gauge(
        "quiver_disk_reserve_bytes",
        "Disk space held in reserve for deletes and compaction on a full disk.",
        "gauge",
        store.disk_reserve_bytes.to_string(),
    );
    gauge(
        "quiver_short_of_space",
        "1 while the reserve is released: writes that add data are refused until compaction \
         makes room.",
        "gauge",
        (store.short_of_space as u8).to_string(),
    );
    gauge(
        "quiver_maintenance_runs_total",
        "Compactions and index resizes completed.",
        "counter",
        store.maintenance_runs.to_string(),
    );
    gauge(
        "quiver_maintenance_stall_max_us",
        "The longest time maintenance (compaction, checkpoint, index resize, expiry sweep) \
         kept a partition's writers waiting, in microseconds.",
        "gauge",
        store.maintenance_stall_max_us.to_string(),
    );
    gauge(
        "quiver_maintenance_stall_us_total",
        "Time maintenance kept partitions' writers waiting, in microseconds.",
        "counter",
        store.maintenance_stall_total_us.to_string(),
    );
    render_core(&state.core, &mut o);
    o
}
