//! `quiver bench net` run as a user would: the built binary against an in-process server.

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use quiver_node::testing::TestServer;
use quiver_testkit::port::free_port;
use serde_json::Value;

fn quiver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .output()
        .expect("the quiver binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn json_lines_and_csv_rows() {
    let server = TestServer::start();
    let port = server.port().to_string();
    let pid = std::process::id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("net.csv");
    let csv_arg = csv.to_str().unwrap();
    let common = [
        "bench",
        "net",
        "--port",
        &port,
        "--keys",
        "2000",
        "--connections",
        "4",
        "--warmup-s",
        "0.1",
        "--duration-s",
        "0.3",
        "--server-pid",
        &pid,
        "--csv",
        csv_arg,
        "--json",
    ];
    let mut closed = common.to_vec();
    closed.extend(["--load", "--width", "8", "--depth", "2", "--tag", "run=t1"]);
    let out = quiver(&closed);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("loaded 2000 keys"),
        "{}",
        text(&out.stderr)
    );
    let mut open = common.to_vec();
    open.extend(["--rate-sweep", "200,400", "--get-ratio", "0.5"]);
    let out2 = quiver(&open);
    assert!(out2.status.success(), "stderr: {}", text(&out2.stderr));

    let stdout = text(&out.stdout) + &text(&out2.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    let recs: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    for r in &recs {
        for field in [
            "system",
            "workload",
            "mode",
            "connections",
            "depth",
            "width",
            "rate_target",
            "keys",
            "key_size",
            "value_size",
            "distribution",
            "zipf_theta",
            "get_ratio",
            "warmup_s",
            "duration_s",
            "ops",
            "keys_read_written",
            "errors",
            "ops_per_sec",
            "keys_per_sec",
            "p50_us",
            "p90_us",
            "p99_us",
            "p999_us",
            "max_us",
            "mean_us",
            "server_cpu_s",
            "keys_per_server_cpu_s",
            "rss_bytes",
            "rss_bytes_per_key",
            "client_cpu_s",
            "tags",
            "started_at",
        ] {
            assert!(r.get(field).is_some(), "{field} missing in {r}");
        }
        assert_eq!(r["system"], "quiver");
        assert_eq!(r["errors"], 0);
        assert!(r["ops"].as_u64().unwrap() > 0);
    }
    assert_eq!(recs[0]["mode"], "closed");
    assert_eq!(recs[0]["workload"], "mget8");
    assert_eq!(recs[0]["tags"]["run"], "t1");
    assert_eq!(recs[1]["mode"], "open");
    assert_eq!(recs[1]["rate_target"], 200.0);
    assert_eq!(recs[2]["rate_target"], 400.0);
    assert_eq!(recs[2]["workload"], "mixed-50-50");

    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = csv_text.lines().collect();
    assert_eq!(rows.len(), 4, "a header and three rows: {csv_text}");
    assert!(rows[0].starts_with("bench,system,workload,mode,"));
}

#[test]
fn a_refused_connection_exits_1_with_a_message() {
    let port = free_port().to_string();
    let out = quiver(&["bench", "net", "--port", &port, "--duration-s", "0.1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("cannot connect to 127.0.0.1:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_parameters_exit_1() {
    for args in [
        &["bench", "net", "--port", "1", "--width", "0"][..],
        &["bench", "net", "--port", "1", "--get-ratio", "2"],
        &[
            "bench", "net", "--port", "1", "--rate", "100", "--depth", "2",
        ],
        &["bench", "net", "--port", "1", "--dir", "/tmp/x"],
    ] {
        let out = quiver(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!text(&out.stderr).is_empty());
    }
}
