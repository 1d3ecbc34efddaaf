//! `bench report` end to end: synthetic records of every kind in, every plot out as a PNG and
//! an SVG that look like what they claim to be.

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;

use quiver_plan::sim::{self, VectorWidthConfig};
use quiver_report::ReportConfig;
use serde_json::json;

const PLOTS: [&str; 8] = [
    "latency_vs_throughput_direct",
    "latency_vs_throughput_queue",
    "peak_throughput_vs_width",
    "fig3_throughput_bars",
    "vector_width_vs_servers",
    // Two value sizes: a comparison chart for each.
    "compare_throughput_32B",
    "compare_throughput_512B",
    "local_throughput_vs_width",
];

/// One `bench net`-shaped record.
fn net(
    pattern: &str,
    g: u32,
    r: u32,
    rate: f64,
    kps: f64,
    p50: f64,
    figure: Option<&str>,
) -> String {
    let mut tags = json!({"pattern": pattern, "G": g.to_string(), "R": r.to_string()});
    if let Some(f) = figure {
        tags["figure"] = json!(f);
    }
    json!({
        "system": "quiver", "workload": "get",
        "mode": if figure.is_some() { "closed" } else { "open" },
        "connections": 4, "depth": 1, "width": g, "rate_target": rate,
        "ops_per_sec": kps / g as f64, "keys_per_sec": kps,
        "p50_us": p50, "p90_us": p50 * 1.5, "p99_us": p50 * 3.0, "p999_us": p50 * 5.0,
        "max_us": p50 * 9.0,
        "server_cpu_s": 1.0, "keys_per_server_cpu_s": kps, "rss_bytes_per_key": 40.0,
        "value_size": 32, "distribution": "uniform", "get_ratio": 1.0, "tags": tags,
    })
    .to_string()
}

fn synthetic_records() -> String {
    let mut lines = Vec::new();
    for &w in &[1u32, 2, 4, 8, 16, 32] {
        let peak = 1e5 * (w as f64).sqrt() * 3.0;
        for step in 1..=5 {
            let rate = peak * step as f64 / 5.0;
            // Latency rising towards saturation, as a rate sweep shows.
            let p50 = 20.0 + w as f64 * 2.0 + 200.0 / (6.0 - step as f64);
            lines.push(net("direct", w, w, rate, rate * 0.98, p50, None));
            lines.push(net("queue", 1, w, rate * 0.8, rate * 0.78, p50 * 1.3, None));
        }
        lines.push(net("direct", w, w, 0.0, peak, 900.0, Some("fig12")));
        lines.push(net("queue", 1, w, 0.0, peak * 0.8, 900.0, Some("fig12")));
    }
    for (bar, kps) in [
        ("raw backend reads", 2.1e6),
        ("engine in-process multi_get", 1.9e6),
        ("networked G1", 1.5e5),
        ("networked G32", 1.6e6),
    ] {
        lines
            .push(json!({"keys_per_sec": kps, "tags": {"figure": "fig3", "bar": bar}}).to_string());
    }
    for system in ["quiver", "redis", "redis-aof"] {
        for (i, workload) in [
            "get",
            "set",
            "mget32",
            "mset32",
            "ycsb-b-zipf",
            "mixed-50-50",
        ]
        .iter()
        .enumerate()
        {
            for value_size in [32, 512] {
                lines.push(
                    json!({"system": system, "workload": workload, "value_size": value_size,
                           "keys_per_sec": 1e5 * (i + 1) as f64, "p50_us": 50.0, "p99_us": 90.0,
                           "server_cpu_s": 1.0, "rss_bytes_per_key": 70.0,
                           "tags": {"figure": "compare"}})
                    .to_string(),
                );
            }
        }
    }
    for backend in ["mmap", "io_uring"] {
        for w in [1, 8, 32, 256] {
            lines.push(
                json!({"bench": "local", "backend": backend, "distribution": "uniform",
                       "width": w, "threads": 1, "keys_per_sec": 1e6 + 1e4 * w as f64})
                .to_string(),
            );
        }
    }
    let cfg = VectorWidthConfig {
        keys: 32,
        servers: vec![1, 2, 4, 8, 16, 32, 64, 128],
        replication: vec![1, 2, 3, 10],
        trials: 20,
        seed: 1,
    };
    for r in sim::run(&cfg, &mut |_| {}).unwrap() {
        lines.push(serde_json::to_string(&r).unwrap());
    }
    lines.join("\n") + "\n"
}

fn check_files(dir: &Path, name: &str) {
    let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
    assert!(png.len() > 1000, "{name}.png is {} bytes", png.len());
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}.png");
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
    let head = svg.trim_start();
    assert!(
        head.starts_with("<svg") || head.starts_with("<?xml"),
        "{name}.svg"
    );
    assert!(svg.trim_end().ends_with("</svg>"), "{name}.svg");
    assert!(svg.contains("<text"), "{name}.svg has no text");
}

#[test]
fn every_plot_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("results.jsonl");
    std::fs::write(&input, synthetic_records()).unwrap();
    let out = dir.path().join("plots");
    let summary = quiver_report::run(&ReportConfig {
        inputs: vec![input],
        out_dir: out.clone(),
        log_latency: false,
    })
    .unwrap();
    assert!(summary.notes.is_empty(), "{:?}", summary.notes);
    assert_eq!(summary.written.len(), 2 * PLOTS.len());
    for name in PLOTS {
        check_files(&out, name);
    }
    // The logarithmic latency axis draws too.
    let summary = quiver_report::run(&ReportConfig {
        inputs: vec![dir.path().join("results.jsonl")],
        out_dir: dir.path().join("log"),
        log_latency: true,
    })
    .unwrap();
    assert_eq!(summary.written.len(), 2 * PLOTS.len());
    check_files(&dir.path().join("log"), "latency_vs_throughput_direct");
}

#[test]
fn missing_records_skip_plots_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("sim.jsonl");
    let r = sim::simulate_cell(32, 8, 2, 10, 0);
    let mut f = std::fs::File::create(&input).unwrap();
    writeln!(f, "{}", serde_json::to_string(&r).unwrap()).unwrap();
    writeln!(f).unwrap();
    writeln!(f, r#"{{"unrelated": true}}"#).unwrap();
    drop(f);
    let out = dir.path().join("plots");
    let summary = quiver_report::run(&ReportConfig {
        inputs: vec![input],
        out_dir: out.clone(),
        log_latency: false,
    })
    .unwrap();
    assert_eq!(summary.records, 1);
    assert_eq!(summary.written.len(), 2);
    check_files(&out, "vector_width_vs_servers");
    // Six plots skipped and one record ignored, each with a note.
    assert_eq!(summary.notes.len(), 7, "{:?}", summary.notes);
}

#[test]
fn bad_input_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.jsonl");
    std::fs::write(&input, "{\"keys_per_sec\": 1}\nnot json\n").unwrap();
    let err = quiver_report::run(&ReportConfig {
        inputs: vec![input],
        out_dir: dir.path().join("plots"),
        log_latency: false,
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("bad.jsonl:2"), "{msg}");
    let err = quiver_report::run(&ReportConfig {
        inputs: vec![dir.path().join("absent.jsonl")],
        out_dir: dir.path().join("plots"),
        log_latency: false,
    })
    .unwrap_err();
    assert!(err.to_string().contains("absent.jsonl"), "{err}");
}
