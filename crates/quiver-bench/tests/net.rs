//! `bench net` end to end through the library: an in-process Quiver server, a load, short
//! closed- and open-loop runs, and the records they produce. No timing thresholds: only
//! that work was done, without errors, and reported consistently.

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use quiver_bench::keys::{key_for, value_for};
use quiver_bench::net::record::CSV_COLUMNS;
use quiver_bench::net::{self, Mode, NetConfig, NetLoadReport, NetObserver, NetRecord};
use quiver_node::testing::TestServer;
use quiver_testkit::port::free_port;
use serde_json::Value;

const KEYS: u64 = 2000;

#[derive(Default)]
struct Collect {
    loads: Vec<NetLoadReport>,
    notes: Vec<String>,
    records: Vec<NetRecord>,
    progress_calls: usize,
}

impl NetObserver for Collect {
    fn load_progress(&mut self, _done: u64) {
        self.progress_calls += 1;
    }
    fn load_finished(&mut self, r: &NetLoadReport) {
        self.loads.push(r.clone());
    }
    fn note(&mut self, m: &str) {
        self.notes.push(m.to_string());
    }
    fn record(&mut self, r: &NetRecord) {
        self.records.push(r.clone());
    }
}

fn config(server: &TestServer) -> NetConfig {
    let mut c = NetConfig::new("127.0.0.1", server.port());
    c.keys = KEYS;
    c.warmup_s = 0.1;
    c.duration_s = 0.5;
    c.connections = 4;
    c.get_ratio = 0.9;
    c.server_pid = Some(std::process::id());
    c.tags.insert("test".into(), "e2e".into());
    c
}

/// Every CSV column is a key of the JSON line, and the figures agree with each other.
fn check_record(r: &NetRecord, width: usize) -> Value {
    let v: Value = serde_json::from_str(&r.to_json_line()).expect("the JSON line parses");
    let obj = v.as_object().unwrap();
    for c in CSV_COLUMNS {
        assert!(obj.contains_key(*c), "missing field {c}");
    }
    assert_eq!(v["system"], "quiver");
    assert_eq!(v["width"], width as u64);
    assert_eq!(v["keys"], KEYS);
    assert!(r.ops > 0, "{r:?}");
    assert_eq!(r.errors, 0, "{r:?}");
    assert_eq!(r.misses, 0, "every key was loaded: {r:?}");
    assert_eq!(r.keys_read_written, r.ops * width as u64);
    let want = r.ops_per_sec * width as f64;
    assert!(
        (r.keys_per_sec - want).abs() <= 1e-9 * want.max(1.0),
        "{r:?}"
    );
    assert!(r.measured_s > 0.0 && r.measured_s <= r.duration_s + 1e-9);
    let p = |x: Option<f64>| x.expect("latencies of a run with ops");
    assert!(p(r.p50_us) <= p(r.p90_us) && p(r.p90_us) <= p(r.p99_us));
    assert!(p(r.p99_us) <= p(r.p999_us) && p(r.p999_us) <= p(r.max_us) * 1.001 + 1.0);
    // The "server" is this process: its CPU and RSS are readable.
    assert!(r.server_cpu_s.is_some() && r.rss_bytes.unwrap() > 0);
    assert!(r.client_cpu_s.is_some());
    assert_eq!(v["tags"]["test"], "e2e");
    assert!(r.started_at.ends_with('Z') && r.started_at.len() == 24);
    v
}

#[test]
fn closed_loop_loads_then_measures_get_and_mget() {
    let server = TestServer::start();
    let mut cfg = config(&server);
    cfg.load = true;
    let mut obs = Collect::default();
    let recs = net::run(&cfg, &mut obs).expect("bench runs");
    assert_eq!(obs.loads.len(), 1);
    assert_eq!(obs.loads[0].keys, KEYS);
    assert!(obs.progress_calls > 0);
    assert_eq!(recs.len(), 1);
    let v = check_record(&recs[0], 1);
    assert_eq!(v["mode"], "closed");
    assert_eq!(v["depth"], 1);
    assert!(v["rate_target"].is_null());
    assert_eq!(v["workload"], "mixed-90-10");

    // The data is in place: a second run with --load does not load again.
    let mut cfg = config(&server);
    cfg.load = true;
    cfg.width = 8;
    cfg.mode = Mode::Closed { depth: 4 };
    let mut obs = Collect::default();
    let recs = net::run(&cfg, &mut obs).expect("bench runs");
    assert!(obs.loads.is_empty());
    assert!(
        obs.notes.iter().any(|n| n.contains("not loading")),
        "{:?}",
        obs.notes
    );
    let v = check_record(&recs[0], 8);
    assert_eq!(v["depth"], 4);
    assert_eq!(v["workload"], "mixed-90-10-w8");

    // The writes wrote each key's own value.
    let mut c = quiver_client::Connection::connect(&server.addr.to_string()).unwrap();
    for i in [0, 1, KEYS / 2, KEYS - 1] {
        let got = c.get(key_for(i, 16)).unwrap();
        assert_eq!(got.as_deref(), Some(&value_for(i, 32)[..]));
    }
}

#[test]
fn open_loop_sweeps_rates() {
    let server = TestServer::start();
    let mut cfg = config(&server);
    cfg.load = true;
    cfg.load_only = true;
    let mut obs = Collect::default();
    assert!(net::run(&cfg, &mut obs).unwrap().is_empty());
    assert_eq!(obs.loads.len(), 1);

    let mut cfg = config(&server);
    cfg.mode = Mode::Open {
        rates: vec![500.0, 2000.0],
        max_outstanding: 1000,
    };
    cfg.width = 4;
    let mut obs = Collect::default();
    let recs = net::run(&cfg, &mut obs).expect("bench runs");
    assert_eq!(recs.len(), 2);
    for (r, rate) in recs.iter().zip([500.0, 2000.0]) {
        let v = check_record(r, 4);
        assert_eq!(v["mode"], "open");
        assert_eq!(v["rate_target"], rate);
        assert!(v["depth"].is_null());
        assert_eq!(v["max_outstanding"], 1000);
        assert!(r.unanswered.is_some());
    }
    assert_eq!(obs.records.len(), 2);
}

#[test]
fn a_refused_connection_is_a_clear_error() {
    let port = free_port();
    let cfg = NetConfig::new("127.0.0.1", port);
    let err = net::run(&cfg, &mut Collect::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cannot connect to 127.0.0.1:"), "{msg}");
    assert!(msg.contains("refused"), "{msg}");
}

#[test]
fn a_wrong_password_is_a_clear_error() {
    let server = TestServer::start_with(|c| c.service.requirepass = Some("sesame".into()));
    let mut cfg = config(&server);
    cfg.password = Some("wrong".into());
    let msg = net::run(&cfg, &mut Collect::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("AUTH"), "{msg}");
    cfg.password = Some("sesame".into());
    cfg.load = true;
    cfg.duration_s = 0.2;
    let recs = net::run(&cfg, &mut Collect::default()).unwrap();
    assert!(recs[0].ops > 0 && recs[0].errors == 0, "{:?}", recs[0]);
}

#[test]
fn error_replies_are_counted_not_hidden() {
    // A password is required and none is given: every command is answered NOAUTH.
    let server = TestServer::start_with(|c| c.service.requirepass = Some("sesame".into()));
    let mut cfg = config(&server);
    cfg.system = Some("quiver".into());
    cfg.duration_s = 0.2;
    let mut obs = Collect::default();
    let recs = net::run(&cfg, &mut obs).expect("errors are counted, not fatal");
    let r = &recs[0];
    assert!(r.ops > 0);
    assert!(r.error_replies >= r.ops, "{r:?}");
    assert_eq!(r.errors, r.error_replies + r.disconnects);
    assert!(
        r.first_error.as_deref().unwrap().starts_with("NOAUTH"),
        "{r:?}"
    );
    assert!(
        obs.notes.iter().any(|n| n.contains("DBSIZE")),
        "{:?}",
        obs.notes
    );
    // Loading needs DBSIZE: that is an error.
    cfg.load = true;
    assert!(net::run(&cfg, &mut Collect::default()).is_err());
}

#[test]
fn broken_connections_are_counted_as_disconnects() {
    // Requests longer than the server's multibulk limit: it answers with an error and closes
    // the connection.
    let server = TestServer::start_with(|c| c.service.proto_max_multibulk_len = 4);
    let mut cfg = config(&server);
    cfg.width = 8;
    cfg.get_ratio = 1.0;
    cfg.duration_s = 0.2;
    let r = net::run(&cfg, &mut Collect::default()).expect("a run with errors still reports");
    let r = &r[0];
    assert_eq!(r.disconnects, cfg.connections as u64, "{r:?}");
    assert_eq!(r.ops, 0);
    assert!(r.p50_us.is_none());
    assert!(r.errors >= r.disconnects);
    assert!(
        r.measured_s < cfg.duration_s,
        "the run ends when every connection broke"
    );
}
