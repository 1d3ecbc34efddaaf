//! oliver006/redis_exporter, the Prometheus exporter Redis operators run, scraping a node
//! (issue 37): its metrics for the keyspace, clients, memory, commands, persistence, the slow
//! log and the latency monitor are there, and say what the node did. `scripts/test_deps.sh`
//! builds the exporter into `target/tools`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quiver_node::testing::TestServer;
use quiver_testkit::port::free_port;
use quiver_testkit::process::Guard;
use quiver_testkit::tool;

use crate::bad_input::client;

/// How long the exporter may take to serve a scrape that reached the node.
const SCRAPE_WAIT: Duration = Duration::from_secs(20);

/// `GET /metrics` of the exporter at `port`: the body, once it has scraped the node.
fn scrape(port: u16) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(SCRAPE_WAIT))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    match text.split_once("\r\n\r\n") {
        Some((_, body)) if body.contains("redis_up 1") => Ok(body.to_string()),
        _ => Err(format!(
            "no scrape of the node yet: {}",
            &text[..text.len().min(300)]
        )),
    }
}

/// The value of the metric line starting with `name` (labels included).
fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{body}"))
}

#[test]
fn redis_exporter_reads_what_the_node_did() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    c.command(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"])
        .unwrap();
    c.command(&[b"CONFIG", b"SET", b"latency-monitor-threshold", b"1"])
        .unwrap();
    let pairs: Vec<(String, String)> = (0..20_000)
        .map(|i| (format!("key:{i}"), "x".repeat(64)))
        .collect();
    for chunk in pairs.chunks(1000) {
        c.multi_set(chunk).unwrap();
    }
    // One slow step, for the latency monitor.
    c.multi_set(&pairs).unwrap();
    c.command(&[b"SAVE"]).unwrap();

    let port = free_port();
    let child = Command::new(tool::built("redis_exporter"))
        .args([
            "--redis.addr",
            &format!("redis://{}", server.addr),
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis_exporter starts");
    let mut exporter = Guard::new(child);
    let deadline = Instant::now() + SCRAPE_WAIT;
    let body = loop {
        match scrape(port) {
            Ok(body) => break body,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("redis_exporter never scraped the node: {e}"),
        }
    };
    assert_eq!(metric(&body, "redis_db_keys{db=\"db0\"}"), 20_000.0);
    assert!(metric(&body, "redis_connected_clients") >= 2.0);
    assert_eq!(metric(&body, "redis_config_maxclients"), 10_000.0);
    assert!(metric(&body, "redis_memory_used_bytes") > 0.0);
    assert!(metric(&body, "redis_memory_used_rss_bytes") > 0.0);
    assert_eq!(metric(&body, "redis_commands_total{cmd=\"mset\"}"), 21.0);
    assert!(metric(&body, "redis_commands_duration_seconds_total{cmd=\"mset\"}") > 0.0);
    assert!(metric(&body, "redis_slowlog_length") > 0.0);
    assert!(
        metric(
            &body,
            "redis_latency_spike_duration_seconds{event_name=\"command\"}"
        ) > 0.0
    );
    assert!(metric(&body, "redis_rdb_last_save_timestamp_seconds") > 1.7e9);
    assert_eq!(metric(&body, "redis_rdb_changes_since_last_save"), 0.0);
    exporter.kill9();
}
