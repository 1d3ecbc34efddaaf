//! One measured run's result: its JSON line, its CSV row, and the timestamp format.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{Error, Result};

/// One measured run (one line of output). Fields that do not apply are `null`: `rate_target`
/// and `max_outstanding` in the closed loop, `depth` in the open loop, the server figures
/// without `--server-pid`, the latencies when nothing completed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetRecord {
    pub bench: &'static str,
    pub system: String,
    pub workload: String,
    /// `closed` or `open`.
    pub mode: &'static str,
    pub host: String,
    pub port: u16,
    pub connections: usize,
    pub depth: Option<usize>,
    pub width: usize,
    /// Operations per second asked for (open loop).
    pub rate_target: Option<f64>,
    pub max_outstanding: Option<usize>,
    /// Keys in the data set (`--keys`).
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Largest value written (sizes uniform from `value_size`); null: one size.
    pub value_size_max: Option<usize>,
    pub distribution: &'static str,
    pub zipf_theta: Option<f64>,
    pub get_ratio: f64,
    /// Shares of DELs and of SETs with an expiry.
    pub del_ratio: f64,
    pub expire_ratio: f64,
    /// The expiring SETs' time to live, shortest and longest (ms); null without them.
    pub ttl_ms_min: Option<u64>,
    pub ttl_ms_max: Option<u64>,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// Seconds actually measured (shorter than `duration_s` only if every connection broke).
    pub measured_s: f64,
    /// Replies received in the measured interval.
    pub ops: u64,
    /// `ops * width`.
    pub keys_read_written: u64,
    /// `error_replies + disconnects`.
    pub errors: u64,
    pub error_replies: u64,
    /// Connections that broke (closed by the server, reset, or sent a malformed reply).
    pub disconnects: u64,
    /// The first error reply's text, or the first disconnect's cause.
    pub first_error: Option<String>,
    /// Null values read (keys absent from the server: the data set was not loaded).
    pub misses: u64,
    /// Open loop: requests due before the end and not answered by it. Each is counted in the
    /// latency histogram at its age at the end (a lower bound), so a stalled server cannot
    /// hide its queue.
    pub unanswered: Option<u64>,
    pub ops_per_sec: f64,
    /// `ops_per_sec * width`.
    pub keys_per_sec: f64,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    pub mean_us: Option<f64>,
    /// Open loop: how late the client wrote requests due in the window, after their due
    /// times (its own lag; it is part of the latencies above). Small next to them, the client
    /// kept to the schedule; large, the client was the bottleneck.
    pub send_lag_p50_us: Option<f64>,
    pub send_lag_p99_us: Option<f64>,
    pub send_lag_max_us: Option<f64>,
    /// The server process's CPU seconds (user + system) over the measured interval.
    pub server_cpu_s: Option<f64>,
    /// `server_cpu_s / measured_s`: 1.0 is one core busy.
    pub server_cpu_util: Option<f64>,
    /// `keys_read_written / server_cpu_s`.
    pub keys_per_server_cpu_s: Option<f64>,
    /// The server's resident memory at the end.
    pub rss_bytes: Option<u64>,
    /// `rss_bytes / keys`.
    pub rss_bytes_per_key: Option<f64>,
    /// CPU seconds of the client's thread over the measured interval.
    pub client_cpu_s: Option<f64>,
    /// `client_cpu_s / measured_s`. In the closed loop, near 1.0 means the client (not the
    /// server) is the bottleneck. In the open loop the client spins between requests at
    /// high rates (see `net::open`), so this is near 1.0 regardless: see `send_lag_*`.
    pub client_cpu_util: Option<f64>,
    pub tags: BTreeMap<String, String>,
    /// When the measured interval began, RFC 3339 UTC.
    pub started_at: String,
}

/// CSV columns, in order: every field of [`NetRecord`] (a test keeps the two in step).
pub const CSV_COLUMNS: &[&str] = &[
    "bench",
    "system",
    "workload",
    "mode",
    "host",
    "port",
    "connections",
    "depth",
    "width",
    "rate_target",
    "max_outstanding",
    "keys",
    "key_size",
    "value_size",
    "value_size_max",
    "distribution",
    "zipf_theta",
    "get_ratio",
    "del_ratio",
    "expire_ratio",
    "ttl_ms_min",
    "ttl_ms_max",
    "warmup_s",
    "duration_s",
    "measured_s",
    "ops",
    "keys_read_written",
    "errors",
    "error_replies",
    "disconnects",
    "first_error",
    "misses",
    "unanswered",
    "ops_per_sec",
    "keys_per_sec",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "max_us",
    "mean_us",
    "send_lag_p50_us",
    "send_lag_p99_us",
    "send_lag_max_us",
    "server_cpu_s",
    "server_cpu_util",
    "keys_per_server_cpu_s",
    "rss_bytes",
    "rss_bytes_per_key",
    "client_cpu_s",
    "client_cpu_util",
    "tags",
    "started_at",
];

impl NetRecord {
    // Numbers, strings, options and a map with string keys: serializing to JSON cannot fail.
    #[allow(clippy::expect_used)]
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }

    /// The CSV header line (no newline).
    pub fn csv_header() -> String {
        CSV_COLUMNS.join(",")
    }

    /// This record as a CSV row (no newline): nulls empty, `tags` as a JSON object, fields
    /// quoted when they hold a comma, a quote or a line break (RFC 4180).
    // Numbers, strings, options and a map with string keys: serializing to JSON cannot fail.
    #[allow(clippy::expect_used)]
    pub fn csv_row(&self) -> String {
        let v = serde_json::to_value(self).expect("a record serializes");
        let cells: Vec<String> = CSV_COLUMNS
            .iter()
            .map(|c| match &v[*c] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => csv_quote(s),
                other => csv_quote(&other.to_string()),
            })
            .collect();
        cells.join(",")
    }
}

fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Appends `records` to the CSV file at `path`, writing the header first when the file is new
/// or empty. A file whose header is not this one is refused (its columns would not line up).
pub fn append_csv(path: &Path, records: &[NetRecord]) -> Result<()> {
    let header = NetRecord::csv_header();
    let existing_header = match std::fs::File::open(path) {
        Ok(f) => {
            let mut first = String::new();
            BufReader::new(f)
                .read_line(&mut first)
                .map_err(|e| Error::io("read", path, e))?;
            Some(first.trim_end_matches(['\r', '\n']).to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let write_header = match existing_header.as_deref() {
        None | Some("") => true,
        Some(h) if h == header => false,
        Some(_) => {
            return Err(Error::Invalid(format!(
                "{}: its header is not bench net's columns; give another --csv file",
                path.display()
            )))
        }
    };
    let mut text = String::new();
    if write_header {
        text.push_str(&header);
        text.push('\n');
    }
    for r in records {
        text.push_str(&r.csv_row());
        text.push('\n');
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io("open", path, e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io("write", path, e))
}

/// `t` as RFC 3339 UTC with milliseconds: `2026-11-22T02:20:51.123Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Year, month, day of the `days`-th day after 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// exact for the proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    pub(crate) fn sample() -> NetRecord {
        NetRecord {
            bench: "net",
            system: "quiver".into(),
            workload: "mget32".into(),
            mode: "closed",
            host: "127.0.0.1".into(),
            port: 7379,
            connections: 8,
            depth: Some(4),
            width: 32,
            rate_target: None,
            max_outstanding: None,
            keys: 1000,
            key_size: 16,
            value_size: 32,
            value_size_max: None,
            distribution: "uniform",
            zipf_theta: None,
            get_ratio: 1.0,
            del_ratio: 0.0,
            expire_ratio: 0.0,
            ttl_ms_min: None,
            ttl_ms_max: None,
            warmup_s: 1.0,
            duration_s: 5.0,
            measured_s: 5.0,
            ops: 100,
            keys_read_written: 3200,
            errors: 1,
            error_replies: 1,
            disconnects: 0,
            first_error: Some("ERR \"quoted\", with comma".into()),
            misses: 0,
            unanswered: None,
            ops_per_sec: 20.0,
            keys_per_sec: 640.0,
            p50_us: Some(100.0),
            p90_us: Some(200.0),
            p99_us: Some(300.0),
            p999_us: Some(400.0),
            max_us: Some(500.5),
            mean_us: Some(120.25),
            send_lag_p50_us: None,
            send_lag_p99_us: None,
            send_lag_max_us: None,
            server_cpu_s: None,
            server_cpu_util: None,
            keys_per_server_cpu_s: None,
            rss_bytes: None,
            rss_bytes_per_key: None,
            client_cpu_s: Some(1.5),
            client_cpu_util: Some(0.3),
            tags: [("run".to_string(), "a,b".to_string())].into(),
            started_at: "2026-01-02T03:04:05.006Z".into(),
        }
    }

    #[test]
    fn csv_columns_are_the_record_fields_in_order() {
        let v = serde_json::to_value(sample()).unwrap();
        let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut cols = CSV_COLUMNS.to_vec();
        fields.sort_unstable();
        cols.sort_unstable();
        assert_eq!(cols, fields);
        // In declaration order too: serde emits fields in order, so the JSON text lists them
        // in that order.
        let line = sample().to_json_line();
        let mut at = 0;
        for c in CSV_COLUMNS {
            let p = line[at..]
                .find(&format!("\"{c}\":"))
                .unwrap_or_else(|| panic!("{c} out of order"));
            at += p;
        }
    }

    #[test]
    fn csv_rows_quote_and_leave_nulls_empty() {
        let row = sample().csv_row();
        assert!(row.starts_with("net,quiver,mget32,closed,127.0.0.1,7379,8,4,32,,,1000,"));
        assert!(row.contains(",\"ERR \"\"quoted\"\", with comma\","));
        assert!(row.contains(",\"{\"\"run\"\":\"\"a,b\"\"}\","));
        assert!(row.ends_with(",2026-01-02T03:04:05.006Z"));
    }

    #[test]
    fn csv_file_gets_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        append_csv(&path, &[sample()]).unwrap();
        append_csv(&path, &[sample(), sample()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], NetRecord::csv_header());
        assert_eq!(lines[1], lines[3]);
        let other = dir.path().join("other.csv");
        std::fs::write(&other, "a,b,c\n1,2,3\n").unwrap();
        assert!(append_csv(&other, &[sample()]).is_err());
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let at = |s: u64, ms: u64| {
            rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z");
        assert_eq!(at(1_798_761_600, 0), "2027-01-01T00:00:00.000Z");
        assert_eq!(at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
    }
}
