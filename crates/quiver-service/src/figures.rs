//! The figures every RESP service reports, one row each: its INFO line, its Prometheus metric
//! when it has one, and how it is read. INFO (`cmd::info`) and the metrics endpoint
//! (`metrics::render_core`) both render from these tables, so a figure cannot be added to one
//! and forgotten in the other, or named twice.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use crate::allocator::allocated_bytes;
use crate::service::{Core, Line};

/// A Prometheus metric's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// A Prometheus metric: its name, help text and type.
pub struct Metric {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
}

/// A figure's value now.
pub enum Value {
    Count(u64),
    /// A share, 0 to 1: INFO shows it with 4 decimals, Prometheus in full.
    Ratio(f64),
    /// Text: INFO only (a setting's name, the last error).
    Text(String),
}

impl Value {
    fn info(&self) -> String {
        match self {
            Value::Count(n) => n.to_string(),
            Value::Ratio(r) => format!("{r:.4}"),
            Value::Text(t) => t.clone(),
        }
    }

    fn metric(&self) -> String {
        match self {
            Value::Count(n) => n.to_string(),
            Value::Ratio(r) => r.to_string(),
            Value::Text(t) => t.clone(),
        }
    }
}

/// One figure of a `T` (the service's `Core`, the router's statistics, a node's store
/// statistics): its INFO name (in the section of the table it is in; none for a metric INFO
/// does not show), its metric when it has one, and its value now.
pub struct Figure<T = Core> {
    pub info: Option<&'static str>,
    pub metric: Option<Metric>,
    pub read: fn(&T) -> Value,
}

/// A counter metric (`counter("quiver_x_total", "What it counts.")`).
pub const fn counter(name: &'static str, help: &'static str) -> Option<Metric> {
    Some(Metric {
        name,
        help,
        kind: Kind::Counter,
    })
}

/// A gauge metric.
pub const fn gauge(name: &'static str, help: &'static str) -> Option<Metric> {
    Some(Metric {
        name,
        help,
        kind: Kind::Gauge,
    })
}

/// INFO's `# Clients`, in its order.
pub const CLIENTS: &[Figure] = &[
    Figure {
        info: Some("connected_clients"),
        metric: gauge("quiver_connected_clients", "Open client connections."),
        read: |c| Value::Count(c.stats.connected_clients.load(Relaxed) as u64),
    },
    Figure {
        info: Some("maxclients"),
        metric: None,
        read: |c| Value::Count(c.live.maxclients() as u64),
    },
    Figure {
        info: Some("blocked_clients"),
        metric: None,
        read: |_| Value::Count(0),
    },
    Figure {
        info: Some("tracking_clients"),
        metric: None,
        read: |c| Value::Count(c.tracking.figures().clients as u64),
    },
    Figure {
        info: Some("client_output_buffer_total_bytes"),
        metric: gauge(
            "quiver_client_output_buffer_bytes",
            "Reply bytes buffered by all connections (bounded by client-output-buffer-total-limit).",
        ),
        read: |c| Value::Count(c.stats.output_buffered_bytes()),
    },
    Figure {
        info: Some("client_output_buffer_total_limit"),
        metric: None,
        read: |c| Value::Count(c.output_budget.limit_bytes() as u64),
    },
];

/// INFO's `# Memory`, before what serves adds: Redis's fields tools read (`used_memory`: the
/// bytes the allocator holds for the process, as Redis counts its own).
pub const MEMORY: &[Figure] = &[
    Figure {
        info: Some("used_memory"),
        metric: gauge(
            "quiver_allocated_bytes",
            "Bytes the allocator holds in use.",
        ),
        read: |_| Value::Count(allocated_bytes()),
    },
    Figure {
        info: Some("used_memory_human"),
        metric: None,
        read: |_| Value::Text(bytes_human(allocated_bytes())),
    },
    Figure {
        info: Some("used_memory_rss"),
        metric: gauge("quiver_process_resident_bytes", "Resident set size."),
        read: |_| Value::Count(process_rss_bytes()),
    },
    Figure {
        info: Some("used_memory_rss_human"),
        metric: None,
        read: |_| Value::Text(bytes_human(process_rss_bytes())),
    },
    // No eviction: the store is on disk, RAM holds its index and the page cache.
    Figure {
        info: Some("maxmemory"),
        metric: None,
        read: |_| Value::Count(0),
    },
    Figure {
        info: Some("maxmemory_policy"),
        metric: None,
        read: |_| Value::Text("noeviction".into()),
    },
];

/// A byte count as Redis's `bytesToHuman` writes it: `512B`, `1.50K`, `2.00M`, ...
pub fn bytes_human(n: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2}{}", UNITS[unit])
}

/// INFO's `# Stats`, in its order (the serving threads' delays and what serves adds follow).
pub const STATS: &[Figure] = &[
    Figure {
        info: Some("total_connections_received"),
        metric: counter("quiver_connections_received_total", "Connections accepted."),
        read: |c| Value::Count(c.stats.connections_received.load(Relaxed)),
    },
    Figure {
        info: Some("total_commands_processed"),
        metric: None,
        read: |c| Value::Count(c.stats.total_commands()),
    },
    Figure {
        info: Some("total_net_input_bytes"),
        metric: counter("quiver_net_input_bytes_total", "Bytes read from clients."),
        read: |c| Value::Count(c.stats.net_input_bytes()),
    },
    Figure {
        info: Some("total_net_output_bytes"),
        metric: counter("quiver_net_output_bytes_total", "Bytes written to clients."),
        read: |c| Value::Count(c.stats.net_output_bytes()),
    },
    Figure {
        info: Some("rejected_connections"),
        metric: counter(
            "quiver_rejected_connections_total",
            "Connections refused (maxclients).",
        ),
        read: |c| Value::Count(c.stats.rejected_connections.load(Relaxed)),
    },
    Figure {
        info: Some("keyspace_hits"),
        metric: counter("quiver_keyspace_hits_total", "Reads that found their key."),
        read: |c| Value::Count(c.stats.keyspace_hits()),
    },
    Figure {
        info: Some("keyspace_misses"),
        metric: counter(
            "quiver_keyspace_misses_total",
            "Reads that did not find their key.",
        ),
        read: |c| Value::Count(c.stats.keyspace_misses()),
    },
    Figure {
        info: Some("pubsub_channels"),
        metric: None,
        read: |c| Value::Count(c.pubsub.channel_count() as u64),
    },
    Figure {
        info: Some("pubsub_patterns"),
        metric: None,
        read: |c| Value::Count(c.pubsub.numpat() as u64),
    },
    Figure {
        info: Some("tracking_total_keys"),
        metric: None,
        read: |c| Value::Count(c.tracking.figures().keys as u64),
    },
    Figure {
        info: Some("tracking_total_items"),
        metric: None,
        read: |c| Value::Count(c.tracking.figures().items as u64),
    },
    Figure {
        info: Some("tracking_total_prefixes"),
        metric: None,
        read: |c| Value::Count(c.tracking.figures().prefixes as u64),
    },
    Figure {
        info: Some("total_error_replies"),
        metric: counter(
            "quiver_error_replies_total",
            "Error replies sent (Redis's total_error_replies).",
        ),
        read: |c| Value::Count(c.stats.error_replies.load(Relaxed)),
    },
    Figure {
        info: Some("total_error_replies_protocol"),
        metric: None,
        read: |c| Value::Count(c.stats.protocol_errors.load(Relaxed)),
    },
    Figure {
        info: Some("unknown_commands"),
        metric: None,
        read: |c| Value::Count(c.stats.unknown_commands.load(Relaxed)),
    },
    Figure {
        info: Some("transaction_retries"),
        metric: None,
        read: |c| Value::Count(c.stats.transaction_retries.load(Relaxed)),
    },
    Figure {
        info: Some("transactions_abandoned"),
        metric: counter(
            "quiver_transactions_abandoned_total",
            "Commands and EXECs given up after too many conflicts with concurrent writes.",
        ),
        read: |c| Value::Count(c.stats.transactions_abandoned.load(Relaxed)),
    },
    Figure {
        info: Some("clients_closed_by_limit"),
        metric: None,
        read: |c| Value::Count(c.stats.clients_closed_by_limit.load(Relaxed)),
    },
    Figure {
        info: Some("replies_refused_by_total_limit"),
        metric: counter(
            "quiver_replies_refused_by_total_limit_total",
            "Replies replaced by an error at client-output-buffer-total-limit.",
        ),
        read: |c| Value::Count(c.stats.replies_refused_by_total_limit.load(Relaxed)),
    },
];

/// Every figure of the tables, for the metrics endpoint.
pub fn all() -> impl Iterator<Item = &'static Figure> {
    CLIENTS.iter().chain(MEMORY).chain(STATS)
}

/// The INFO lines of `table`, read from `source` now.
pub fn info_lines<T>(source: &T, table: &[Figure<T>]) -> Vec<Line> {
    table
        .iter()
        .filter_map(|f| Some((f.info?.to_string(), (f.read)(source).info())))
        .collect()
}

/// The metrics of `figures`, read from `source` now, in Prometheus's text format.
pub fn render<'a, T: 'a>(o: &mut String, source: &T, figures: impl Iterator<Item = &'a Figure<T>>) {
    for f in figures {
        if let Some(m) = &f.metric {
            write_metric(o, m.name, m.help, m.kind.name(), (f.read)(source).metric());
        }
    }
}

/// Resident set size of this process, from /proc (0 where unavailable).
pub fn process_rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// Appends one metric with its help and type lines.
pub fn write_metric(o: &mut String, name: &str, help: &str, kind: &str, value: String) {
    let _ = write!(
        o,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name is one figure's: INFO and Prometheus never show two figures under one name.
    #[test]
    fn names_are_unique() {
        let mut info: Vec<&str> = all().filter_map(|f| f.info).collect();
        let mut metrics: Vec<&str> = all()
            .filter_map(|f| f.metric.as_ref())
            .map(|m| m.name)
            .collect();
        let (n, m) = (info.len(), metrics.len());
        info.sort_unstable();
        info.dedup();
        metrics.sort_unstable();
        metrics.dedup();
        assert_eq!((info.len(), metrics.len()), (n, m));
        assert!(metrics.iter().all(|m| m.starts_with("quiver_")));
    }
}
