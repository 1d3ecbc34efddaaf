//! The soak plot: the samples of a sampled `bench net` run (`"bench": "net-sample"`, written by
//! `scripts/soak.sh`) against time, in four panels sharing the time axis — the server's
//! resident memory, its open descriptors, its data directory on disk with the bound the
//! compaction trigger sets, and the clients' latency per sample interval. A flat run draws
//! flat lines; linear axes start at zero, so growth shows at its true scale.
//!
//! One picture per run: the samples are grouped by `tags.run` (the script's label), named
//! `soak_<run>` (characters other than letters, digits, `-`, `_` and `.` replaced by `_`), or
//! `soak` for samples without the tag. No picture (and no note) without samples: a soak file is
//! its own kind of input, and the other result files have none.

use std::collections::BTreeMap;

use crate::plot::{Legend, LineChart, PanelChart, Series};
use crate::records::{Kind, Record};

/// Bytes per MiB: the memory and disk panels' unit.
const MIB: f64 = (1u64 << 20) as f64;
/// Seconds per minute: the time axis's unit.
const S_PER_MIN: f64 = 60.0;
/// Panels per row.
const COLUMNS: usize = 2;

/// A soak picture per run found in `records`, with its file name (no extension).
pub fn soak_charts(records: &[Record]) -> Vec<(String, PanelChart)> {
    let mut runs: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == Kind::Sample) {
        runs.entry(r.tag("run").unwrap_or("").to_string())
            .or_default()
            .push(r);
    }
    runs.into_iter()
        .map(|(run, mut samples)| {
            samples.sort_by(|a, b| {
                let t = |r: &Record| r.num("t_s").unwrap_or(f64::NAN);
                t(a).total_cmp(&t(b))
            });
            (chart_name(&run), soak_chart(&run, &samples))
        })
        .collect()
}

/// `soak_<run>`, the run label made safe for a file name; `soak` without one.
fn chart_name(run: &str) -> String {
    if run.is_empty() {
        return "soak".into();
    }
    let safe: String = run
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("soak_{safe}")
}

/// A series of `field` (scaled by `scale`) against minutes; samples without it are left out.
fn series(
    samples: &[&Record],
    label: &str,
    scale: f64,
    value: impl Fn(&Record) -> Option<f64>,
) -> Series {
    Series {
        label: label.to_string(),
        points: samples
            .iter()
            .filter_map(|r| Some((r.num("t_s")? / S_PER_MIN, value(r)? / scale)))
            .collect(),
        dashed: false,
    }
}

fn dashed(mut s: Series) -> Series {
    s.dashed = true;
    s
}

/// A panel of the series that have points; `None` if none has. `log_y` for latencies, whose
/// median and tail lie orders of magnitude apart.
fn panel(title: &str, y_label: &str, log_y: bool, series: Vec<Series>) -> Option<LineChart> {
    let series: Vec<Series> = series
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    Some(LineChart {
        title: title.into(),
        x_label: "minutes".into(),
        y_label: y_label.into(),
        series,
        log_x: false,
        log_y,
        legend: Legend::AboveLines,
    })
}

fn soak_chart(run: &str, samples: &[&Record]) -> PanelChart {
    let field = |name: &'static str| move |r: &Record| r.num(name);
    let memory = panel(
        "Server resident memory",
        "MiB",
        false,
        vec![
            series(samples, "RSS (VmRSS)", MIB, field("rss_bytes")),
            series(samples, "anonymous (RssAnon)", MIB, field("rss_anon_bytes")),
            series(
                samples,
                "mapped files (RssFile)",
                MIB,
                field("rss_file_bytes"),
            ),
        ],
    );
    let fds = panel(
        "Server open file descriptors",
        "descriptors",
        false,
        vec![
            series(samples, "open fds", 1.0, field("fds")),
            series(samples, "segment files (INFO)", 1.0, field("segments")),
        ],
    );
    let trigger = samples.iter().find_map(|r| r.num("garbage_ratio_trigger"));
    let bound_label = match trigger {
        Some(t) if t < 1.0 => format!(
            "bound: live × {} (garbage trigger {t})",
            crate::plot::tick_label(1.0 / (1.0 - t))
        ),
        _ => "bound".to_string(),
    };
    let disk = panel(
        "Data directory on disk (allocated)",
        "MiB",
        false,
        vec![
            series(samples, "all files but RESERVE", MIB, |r| {
                Some(r.num("disk_bytes")? - r.num("disk_reserve_bytes").unwrap_or(0.0))
            }),
            series(samples, "segment files", MIB, field("disk_segment_bytes")),
            dashed(series(
                samples,
                "live records (estimate)",
                MIB,
                field("live_bytes_est"),
            )),
            dashed(series(
                samples,
                &bound_label,
                MIB,
                field("disk_bound_bytes"),
            )),
        ],
    );
    let latency = panel(
        "Latency per sample interval",
        "µs (log scale)",
        true,
        vec![
            series(samples, "p99", 1.0, field("p99_us")),
            series(samples, "p50", 1.0, field("p50_us")),
        ],
    );
    let first = samples.first();
    let text = |k: &str| first.and_then(|r| r.text(k)).unwrap_or("?");
    let mut title = format!("Soak: {} {}", text("system"), text("workload"));
    if let Some(rate) = first.and_then(|r| r.num("rate_target")) {
        title.push_str(&format!(" at {} ops/s", crate::plot::tick_label(rate)));
    }
    if let Some(keys) = first.and_then(|r| r.num("keys_total")) {
        title.push_str(&format!(", {} keys", crate::plot::tick_label(keys)));
    }
    if !run.is_empty() {
        title.push_str(&format!(" ({run})"));
    }
    PanelChart {
        title,
        panels: [memory, fds, disk, latency].into_iter().flatten().collect(),
        columns: COLUMNS,
    }
}

#[cfg(test)]
mod tests {
    // A failure in a test's helpers is the test failing.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::ReportConfig;
    use serde_json::json;

    /// A small soak file: six samples of one run (the first without latency, as the load
    /// generator writes them) and the run's `bench net` record.
    fn sample_file() -> String {
        let mut lines = Vec::new();
        for k in 0..6u64 {
            let mut s = json!({
                "bench": "net-sample", "system": "quiver", "workload": "mixed-60-20-ex10-del10",
                "rate_target": 20000.0, "keys_total": 200000, "t_s": k as f64 * 10.0,
                "interval_s": if k == 0 { 0.0 } else { 10.0 },
                "ops": 200000 * k.min(1), "ops_per_sec": 20000.0 * k.min(1) as f64,
                "rss_bytes": 300u64 << 20, "rss_anon_bytes": 60u64 << 20,
                "rss_file_bytes": 240u64 << 20, "fds": 20 + k % 2,
                "disk_bytes": (1u64 << 30) + (150u64 << 20), "disk_reserve_bytes": 1u64 << 30,
                "disk_segment_bytes": 140u64 << 20, "live_bytes_est": 100u64 << 20,
                "garbage_ratio_trigger": 0.5, "disk_bound_bytes": 200u64 << 20,
                "keys": 150000, "tags": {"run": "trial 3/min"},
            });
            if k > 0 {
                s["p50_us"] = json!(40.0);
                s["p99_us"] = json!(250.0 + k as f64);
            }
            lines.push(s.to_string());
        }
        // Out of order on purpose: the chart sorts by time.
        lines.swap(1, 4);
        lines.push(
            json!({"bench": "net", "system": "quiver", "mode": "open", "keys_per_sec": 2e4,
                   "tags": {"run": "trial 3/min"}})
            .to_string(),
        );
        lines.join("\n") + "\n"
    }

    #[test]
    fn a_soak_file_is_plotted() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("soak.jsonl");
        std::fs::write(&input, sample_file()).unwrap();
        let out = dir.path().join("plots");
        let summary = crate::run(&ReportConfig {
            inputs: vec![input.clone()],
            out_dir: out.clone(),
            log_latency: false,
        })
        .unwrap();
        assert_eq!(summary.records, 7);
        assert_eq!(summary.written.len(), 2, "{:?}", summary.written);
        let png = std::fs::read(out.join("soak_trial_3_min.png")).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000);
        let svg = std::fs::read_to_string(out.join("soak_trial_3_min.svg")).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"), "svg");
        assert!(svg.contains("Soak: quiver mixed-60-20-ex10-del10 at 20k ops/s"));

        // The chart's data: four panels on minutes; MiB; the bound as given; latency from the
        // second sample on.
        let mut ignored = 0;
        let records = crate::records::read_records(&input, &mut ignored).unwrap();
        let charts = soak_charts(&records);
        assert_eq!(charts.len(), 1);
        let (name, c) = &charts[0];
        assert_eq!(name, "soak_trial_3_min");
        assert_eq!(c.panels.len(), 4);
        let [memory, fds, disk, latency] = &c.panels[..] else {
            panic!("{c:?}")
        };
        assert_eq!(memory.series[0].points[0], (0.0, 300.0));
        assert_eq!(fds.series[0].points.len(), 6);
        let minutes: Vec<f64> = fds.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(
            minutes,
            [0.0, 1.0 / 6.0, 2.0 / 6.0, 0.5, 4.0 / 6.0, 5.0 / 6.0]
        );
        assert_eq!(disk.series[0].points[0].1, 150.0);
        assert_eq!(disk.series[3].points[0].1, 200.0);
        assert!(disk.series[3].dashed && disk.series[3].label.contains("live × 2"));
        assert_eq!(latency.series[0].points.len(), 5);
        assert!(latency.log_y && !disk.log_y);
        assert_eq!(latency.series[0].points[0], (1.0 / 6.0, 251.0));
    }

    #[test]
    fn runs_are_apart_and_missing_figures_leave_panels_out() {
        let rec = |v: serde_json::Value| {
            let serde_json::Value::Object(m) = v else {
                panic!()
            };
            Record::from_object(m).unwrap()
        };
        let records = [
            rec(json!({"bench": "net-sample", "t_s": 0.0, "p99_us": 9.0})),
            rec(json!({"bench": "net-sample", "t_s": 0.0, "fds": 9, "tags": {"run": "b"}})),
        ];
        let charts = soak_charts(&records);
        let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["soak", "soak_b"]);
        // Without a server pid or directory: only the latency panel (and only fds in "b").
        assert_eq!(charts[0].1.panels.len(), 1);
        assert_eq!(charts[0].1.panels[0].title, "Latency per sample interval");
        assert_eq!(charts[1].1.panels[0].title, "Server open file descriptors");
        assert!(soak_charts(&[]).is_empty());
    }
}
