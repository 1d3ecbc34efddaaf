//! What operators see: INFO's sections and figures (keyspace, vectors, commandstats) and the
//! Prometheus endpoint (`metrics-addr`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;

use quiver_node::node_config::{NodeConfig, ServeConfig};
use quiver_node::testing::TestServer;
use quiver_node::Server;
use quiver_service::{Config, ShutdownHandle};

use crate::bad_input::{client, expect_reply, info_field, info_u64, multibulk, raw, WAIT};

#[test]
fn info_has_every_default_section_and_counts_keys() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let info = c.info(None).unwrap();
    for title in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Keyspace",
        "# Vectors",
    ] {
        assert!(
            info.lines().any(|l| l.trim_end() == title),
            "INFO lacks {title}:\n{info}"
        );
    }
    assert!(
        !info.contains("db0:"),
        "an empty store lists no db0:\n{info}"
    );
    // Each section on its own, case-insensitively.
    for (section, field) in [
        ("server", "redis_version"),
        ("CLIENTS", "connected_clients"),
        ("memory", "used_memory_rss"),
        ("persistence", "durability"),
        ("stats", "total_commands_processed"),
        ("vectors", "max_vector_width"),
    ] {
        assert!(
            info_field(&mut c, section, field).is_some(),
            "INFO {section} lacks {field}"
        );
    }
    assert_eq!(
        info_u64(&mut c, "server", "tcp_port"),
        u64::from(server.port())
    );
    // Redis's memory fields the tools read: the allocator's bytes (within the resident set),
    // and no eviction.
    let used = info_u64(&mut c, "memory", "used_memory");
    assert!(used > 0 && used <= info_u64(&mut c, "memory", "used_memory_rss") * 2);
    assert!(info_field(&mut c, "memory", "used_memory_human")
        .is_some_and(|h| h.ends_with(['K', 'M', 'G'])));
    assert_eq!(info_u64(&mut c, "memory", "maxmemory"), 0);
    // The disk reserve (held if the file system has room) and whether it is released.
    info_u64(&mut c, "persistence", "disk_reserve_bytes");
    assert_eq!(info_u64(&mut c, "persistence", "short_of_space"), 0);
    // How long maintenance kept writers waiting: the longest hold within the total.
    assert!(
        info_u64(&mut c, "persistence", "maintenance_stall_max_us")
            <= info_u64(&mut c, "persistence", "maintenance_stall_total_us")
    );
    info_u64(&mut c, "persistence", "maintenance_stalls");

    let pairs: Vec<(String, String)> = (0..25)
        .map(|i| (format!("key:{i}"), format!("value {i}")))
        .collect();
    c.multi_set(&pairs).unwrap();
    c.set("key:0", "overwritten").unwrap();
    c.delete("key:24").unwrap();
    let keyspace = info_field(&mut c, "keyspace", "db0").expect("db0 after writes");
    assert!(keyspace.starts_with("keys=24,"), "db0:{keyspace}");
    assert!(info_u64(&mut c, "stats", "total_commands_processed") >= 3);
}

/// A run of 32 pipelined GETs in one write reaches the engine as one vector of width 32
/// (the default max-vector-width is 64).
#[test]
fn a_pipelined_run_of_32_gets_is_one_vector() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    assert_eq!(info_field(&mut c, "vectors", "vector_width_le_32"), None);
    let mut run = Vec::new();
    for i in 0..32 {
        run.extend(multibulk(&[b"GET", format!("missing:{i}").as_bytes()]));
    }
    let mut s = raw(server.addr);
    // One write, so the server reads the whole run at once; loopback delivers it whole.
    s.write_all(&run).unwrap();
    expect_reply(&mut s, &b"$-1\r\n".repeat(32));
    assert!(info_u64(&mut c, "vectors", "vector_width_le_32") >= 1);
    assert!(info_u64(&mut c, "vectors", "vector_keys") >= 32);
    let commandstats = c.info(Some("commandstats")).unwrap();
    let get = commandstats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:"))
        .unwrap_or_else(|| panic!("no cmdstat_get:\n{commandstats}"));
    assert!(get.starts_with("calls=32,"), "cmdstat_get:{get}");
    assert!(info_u64(&mut c, "stats", "keyspace_misses") >= 32);
}

const WRONGTYPE_REPLY: &str =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Feast's online read: a run of 32 pipelined HMGETs of 10 fields each reaches the engine as
/// one vector of 32 keys, as GETs do (one probe and one read per hash, whatever the fields).
#[test]
fn a_pipelined_run_of_32_hmgets_is_one_vector() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let fields: Vec<String> = (0..10).map(|f| format!("f{f}")).collect();
    let mut setup = Vec::new();
    let mut run = Vec::new();
    let mut want = Vec::new();
    for e in 0..32 {
        let key = format!("entity:{e}");
        let mut hset: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.clone().into_bytes()];
        let mut hmget: Vec<Vec<u8>> = vec![b"HMGET".to_vec(), key.into_bytes()];
        want.extend_from_slice(b"*10\r\n");
        for f in &fields {
            let v = format!("{e}.{f}");
            hset.extend([f.clone().into_bytes(), v.clone().into_bytes()]);
            hmget.push(f.clone().into_bytes());
            want.extend_from_slice(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
        }
        let refs: Vec<&[u8]> = hset.iter().map(|a| &a[..]).collect();
        setup.extend(multibulk(&refs));
        let refs: Vec<&[u8]> = hmget.iter().map(|a| &a[..]).collect();
        run.extend(multibulk(&refs));
    }
    let mut s = raw(server.addr);
    s.write_all(&setup).unwrap();
    expect_reply(&mut s, &b":10\r\n".repeat(32));
    // The HSETs were one transaction, which read their keys as one vector too.
    let before = info_u64(&mut c, "vectors", "vector_width_le_32");
    s.write_all(&run).unwrap();
    expect_reply(&mut s, &want);
    assert!(info_u64(&mut c, "vectors", "vector_width_le_32") > before);
}

/// A run of 32 pipelined hash writes (HSET, HINCRBY) runs as one transaction: its 32 keys are
/// read as one vector; a command among them that fails (WRONGTYPE, a field that is no
/// integer) answers its error, and the others apply.
#[test]
fn a_pipelined_run_of_32_hash_writes_is_one_transaction() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    c.set("s", "string").unwrap();
    let mut run = Vec::new();
    let mut want = Vec::new();
    for e in 0..32 {
        let key = format!("h{e}");
        let (cmd, reply): (Vec<&[u8]>, String) = match e {
            7 => (vec![b"HSET", b"s", b"f", b"v"], WRONGTYPE_REPLY.into()),
            9 => (
                vec![b"HINCRBY", b"h0", b"f", b"1"],
                "-ERR hash value is not an integer\r\n".into(),
            ),
            _ => (vec![b"HSET", key.as_bytes(), b"f", b"v"], ":1\r\n".into()),
        };
        run.extend(multibulk(&cmd));
        want.extend_from_slice(reply.as_bytes());
    }
    let mut s = raw(server.addr);
    assert_eq!(info_field(&mut c, "vectors", "vector_width_le_32"), None);
    s.write_all(&run).unwrap();
    expect_reply(&mut s, &want);
    assert!(info_u64(&mut c, "vectors", "vector_width_le_32") >= 1);
    let got = c.command(&[b"HGET", b"h31", b"f"]).unwrap();
    assert_eq!(got.as_bytes(), Some(&b"v"[..]));
    assert_eq!(c.get("s").unwrap().as_deref(), Some(&b"string"[..]));
}

/// A run alternating 16 SETs and 16 GETs of the keys just set is one vector of 32 keys, and
/// each GET sees the SET before it.
#[test]
fn a_pipelined_run_of_gets_and_sets_is_one_vector() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let mut run = Vec::new();
    let mut want = Vec::new();
    for i in 0..16 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        run.extend(multibulk(&[b"SET", k.as_bytes(), v.as_bytes()]));
        run.extend(multibulk(&[b"GET", k.as_bytes()]));
        want.extend_from_slice(format!("+OK\r\n${}\r\n{v}\r\n", v.len()).as_bytes());
    }
    let mut s = raw(server.addr);
    s.write_all(&run).unwrap();
    expect_reply(&mut s, &want);
    assert!(info_u64(&mut c, "vectors", "vector_width_le_32") >= 1);
    assert_eq!(info_field(&mut c, "vectors", "vector_width_le_2"), None);
}

/// Two pipelined MSETs of 16 pairs are one compound batch of 32 keys; a key both give keeps
/// the later value.
#[test]
fn a_pipelined_run_of_msets_is_one_batch() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let mut run = Vec::new();
    for round in 0..2 {
        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for i in 0..16 {
            // Key k0 is in both MSETs.
            let k = if i == 0 {
                "k0".to_string()
            } else {
                format!("k{round}-{i}")
            };
            args.push(k.into_bytes());
            args.push(format!("v{round}").into_bytes());
        }
        let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        run.extend(multibulk(&args));
    }
    run.extend(multibulk(&[b"GET", b"k0"]));
    let mut s = raw(server.addr);
    s.write_all(&run).unwrap();
    expect_reply(&mut s, b"+OK\r\n+OK\r\n$2\r\nv1\r\n");
    assert!(info_u64(&mut c, "vectors", "vector_width_le_32") >= 1);
    assert_eq!(info_field(&mut c, "vectors", "vector_width_le_16"), None);
    let keyspace = info_field(&mut c, "keyspace", "db0").expect("db0 after the MSETs");
    assert!(keyspace.starts_with("keys=31,"), "db0:{keyspace}");
}

#[test]
fn an_mget_of_32_keys_is_one_vector() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let keys: Vec<String> = (0..32).map(|i| format!("k{i}")).collect();
    let pairs: Vec<(&String, &str)> = keys.iter().map(|k| (k, "v")).collect();
    c.multi_set(&pairs).unwrap();
    let before = info_field(&mut c, "vectors", "vector_width_le_32")
        .map_or(0, |v| v.parse::<u64>().unwrap());
    let values = c.multi_get(&keys).unwrap();
    assert!(values.iter().all(|v| v.as_deref() == Some(&b"v"[..])));
    assert_eq!(
        info_u64(&mut c, "vectors", "vector_width_le_32"),
        before + 1
    );
    assert!(info_u64(&mut c, "stats", "keyspace_hits") >= 32);
}

#[test]
fn commandstats_lists_the_commands_run() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    c.set("a", "1").unwrap();
    for _ in 0..3 {
        c.get("a").unwrap();
    }
    c.incr("a").unwrap();
    let stats = c.info(Some("commandstats")).unwrap();
    assert!(stats.starts_with("# Commandstats"), "{stats}");
    let line = |name: &str| {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:")))
            .map(str::to_string)
    };
    assert!(line("get").unwrap().starts_with("calls=3,usec="), "{stats}");
    assert!(line("set").unwrap().starts_with("calls=1,"), "{stats}");
    assert!(line("incr").unwrap().starts_with("calls=1,"), "{stats}");
    assert!(
        line("mget").is_none(),
        "commands never run are not listed:\n{stats}"
    );
    // Not part of the default INFO, but of INFO all.
    assert!(!c.info(None).unwrap().contains("cmdstat_get"));
    assert!(c.info(Some("all")).unwrap().contains("cmdstat_get:"));
}

/// A server bound directly, to learn the metrics address it bound (`127.0.0.1:0`).
struct MetricsServer {
    addr: SocketAddr,
    metrics: SocketAddr,
    shutdown: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), quiver_node::NodeError>>>,
    _dir: tempfile::TempDir,
}

impl MetricsServer {
    fn start() -> MetricsServer {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::bind(ServeConfig {
            service: Config {
                port: 0,
                threads: 2,
                metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
                ..Config::default()
            },
            node: NodeConfig {
                dir: dir.path().to_path_buf(),
                ..NodeConfig::default()
            },
        })
        .expect("start the server");
        let metrics = server.bound().metrics_addr().expect("a metrics listener");
        assert!(metrics.ip().is_loopback() && metrics.port() != 0);
        let addr = server.bound().local_addr();
        let shutdown = server.bound().shutdown_handle();
        let thread = std::thread::spawn(move || server.run(false));
        MetricsServer {
            addr,
            metrics,
            shutdown,
            thread: Some(thread),
            _dir: dir,
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown.shutdown();
        if let Some(t) = self.thread.take() {
            let result = t.join().expect("the server thread panicked");
            if !std::thread::panicking() {
                result.expect("clean shutdown");
            }
        }
    }
}

/// One HTTP/1.1 exchange: (status line, headers, body). The server closes after answering.
fn http(addr: SocketAddr, request: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    s.read_to_end(&mut response)
        .expect("read the HTTP response");
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {response:?}"));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

#[test]
fn prometheus_endpoint_serves_metrics() {
    let server = MetricsServer::start();
    let mut c = client(server.addr);
    let keys: Vec<String> = (0..32).map(|i| format!("m{i}")).collect();
    for k in &keys {
        c.set(k, "v").unwrap();
    }
    for k in &keys[..5] {
        c.get(k).unwrap();
    }
    c.multi_get(&keys).unwrap();

    let (status, headers, body) = http(
        server.metrics,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("Content-Type: text/plain"), "{headers}");
    assert!(
        headers.contains(&format!("Content-Length: {}", body.len())),
        "{headers} for a body of {} bytes",
        body.len()
    );
    let value = |series: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{body}"))
            .parse()
            .unwrap_or_else(|_| panic!("{series} is not a number"))
    };
    assert_eq!(value("quiver_commands_total{command=\"get\"}"), 5.0);
    assert_eq!(value("quiver_commands_total{command=\"set\"}"), 32.0);
    assert_eq!(value("quiver_commands_total{command=\"mget\"}"), 1.0);
    assert_eq!(value("quiver_keys"), 32.0);
    assert_eq!(value("quiver_connected_clients"), 1.0);
    assert_eq!(value("quiver_short_of_space"), 0.0);
    assert!(value("quiver_disk_reserve_bytes") >= 0.0);
    assert!(value("quiver_vector_width_bucket{le=\"32\"}") >= 1.0);
    assert!(value("quiver_vector_width_bucket{le=\"+Inf\"}") >= 38.0);
    assert!(value("quiver_command_latency_seconds_bucket{le=\"+Inf\"}") >= 38.0);
    assert!(value("quiver_command_latency_seconds_count") >= 38.0);
    for family in [
        "quiver_commands_total counter",
        "quiver_keys gauge",
        "quiver_connected_clients gauge",
        "quiver_vector_width histogram",
        "quiver_command_latency_seconds histogram",
    ] {
        assert!(
            body.contains(&format!("# TYPE {family}\n")),
            "no # TYPE {family} in\n{body}"
        );
    }
    // Histogram buckets are cumulative.
    let buckets: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("quiver_vector_width_bucket{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");

    // Other paths (and methods) are 404s.
    for request in [
        "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /metricsx HTTP/1.1\r\n\r\n",
        "GET /other HTTP/1.0\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    ] {
        let (status, _, _) = http(server.metrics, request);
        assert_eq!(status, "HTTP/1.1 404 Not Found", "{request:?}");
    }
    // The RESP side is unaffected.
    let mut s = raw(server.addr);
    s.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut s, b"+PONG\r\n");
}

/// `name:value` of `text` (one INFO reply).
fn field<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim_end)
}

/// Redis 7's CPU section, its memory allocator line, in the sections where Redis has them.
#[test]
fn info_cpu_section_and_allocator_as_redis_prints_them() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    // Some work, so that the process has used CPU time.
    for i in 0..500 {
        c.set(format!("key:{i}"), format!("value {i}")).unwrap();
    }
    let keys: Vec<String> = (0..500).map(|i| format!("key:{i}")).collect();
    c.multi_get(&keys).unwrap();

    for asked in [
        None,
        Some("default"),
        Some("all"),
        Some("everything"),
        Some("cpu"),
        Some("CPU"),
    ] {
        let text = c.info(asked).unwrap();
        assert!(
            text.lines().any(|l| l.trim_end() == "# CPU"),
            "INFO {asked:?} lacks # CPU:\n{text}"
        );
    }
    assert!(!c.info(Some("server")).unwrap().contains("# CPU"));

    let cpu = c.info(Some("cpu")).unwrap();
    let seconds = |name: &str| -> f64 {
        let v = field(&cpu, name).unwrap_or_else(|| panic!("INFO cpu has no {name}:\n{cpu}"));
        // Redis's format: seconds, a dot, exactly 6 digits.
        let (whole, micros) = v.split_once('.').unwrap_or_else(|| panic!("{name}:{v}"));
        assert!(
            !whole.is_empty()
                && whole.bytes().all(|b| b.is_ascii_digit())
                && micros.len() == 6
                && micros.bytes().all(|b| b.is_ascii_digit()),
            "{name}:{v} is not in Redis's format"
        );
        v.parse().unwrap()
    };
    let used = seconds("used_cpu_sys") + seconds("used_cpu_user");
    assert!(used > 0.0, "no CPU time used after 1000 commands:\n{cpu}");
    for name in [
        "used_cpu_sys_children",
        "used_cpu_user_children",
        "used_cpu_sys_main_thread",
        "used_cpu_user_main_thread",
    ] {
        assert!(seconds(name) >= 0.0);
    }
    // Fields in Redis's order.
    let names: Vec<&str> = cpu
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n))
        .collect();
    assert_eq!(
        names,
        [
            "used_cpu_sys",
            "used_cpu_user",
            "used_cpu_sys_children",
            "used_cpu_user_children",
            "used_cpu_sys_main_thread",
            "used_cpu_user_main_thread"
        ]
    );
    assert_eq!(
        info_field(&mut c, "memory", "mem_allocator").as_deref(),
        Some("libc")
    );
}

/// Redis 7's `rejected_calls` (refused before running) and `failed_calls` (ran, answered an
/// error), `total_error_replies` and errorstats, for the same commands Redis was checked with.
#[test]
fn commandstats_count_rejected_and_failed_calls_like_redis() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    assert_eq!(info_u64(&mut c, "stats", "total_error_replies"), 0);
    let error = |c: &mut quiver_client::Connection, args: &[&[u8]]| {
        let e = c.command(args).unwrap_err();
        assert!(e.to_string().contains("ERR"), "{args:?}: {e}");
    };
    error(&mut c, &[b"GET"]); // wrong arity: rejected, not a call
    error(&mut c, &[b"GET", b"a", b"b"]); // the same
    c.set("text", "abc").unwrap();
    error(&mut c, &[b"INCR", b"text"]); // ran, failed
    c.incr("counter").unwrap(); // ran, succeeded
    error(&mut c, &[b"CONFIG", b"NOSUCH"]); // unknown subcommand: counted against nothing
    error(&mut c, &[b"CONFIG", b"GET"]); // a subcommand's arity: rejected
    error(&mut c, &[b"NOSUCHCOMMAND", b"x"]); // unknown command: an error reply only
                                              // An error inside EXEC: INCR failed; EXEC itself did not.
    c.command(&[b"MULTI"]).unwrap();
    c.command(&[b"INCR", b"text"]).unwrap();
    match c.command(&[b"EXEC"]).unwrap() {
        quiver_client::Value::Array(replies) => {
            assert!(
                matches!(&replies[..], [quiver_client::Value::Error(e)] if e.starts_with("ERR value")),
                "{replies:?}"
            );
        }
        other => panic!("EXEC answered {other:?}"),
    }
    // A refused command inside MULTI is rejected, and makes EXEC fail.
    c.command(&[b"MULTI"]).unwrap();
    error(&mut c, &[b"GET"]);
    let e = c.command(&[b"EXEC"]).unwrap_err();
    assert!(e.to_string().contains("EXECABORT"), "{e}");

    let stats = c.info(Some("commandstats")).unwrap();
    let line = |name: &str| {
        field(&stats, &format!("cmdstat_{name}"))
            .unwrap_or_else(|| panic!("no cmdstat_{name}:\n{stats}"))
            .to_string()
    };
    let counts = |name: &str| -> (u64, u64, u64) {
        let l = line(name);
        let get = |key: &str| -> u64 {
            l.split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("cmdstat_{name}:{l} lacks {key}"))
                .parse()
                .unwrap()
        };
        (get("calls"), get("rejected_calls"), get("failed_calls"))
    };
    // The exact line of a command never run, as Redis 7 prints it.
    assert_eq!(
        line("get"),
        "calls=0,usec=0,usec_per_call=0.00,rejected_calls=3,failed_calls=0"
    );
    assert_eq!(counts("incr"), (3, 0, 2));
    assert_eq!(counts("config"), (0, 1, 0));
    assert_eq!(counts("set"), (1, 0, 0));
    assert_eq!(counts("exec"), (2, 0, 1));
    assert_eq!(counts("multi"), (2, 0, 0));
    // Fields in Redis 7's order.
    let keys: Vec<String> = line("set")
        .split(',')
        .map(|kv| kv.split('=').next().unwrap().to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "calls",
            "usec",
            "usec_per_call",
            "rejected_calls",
            "failed_calls"
        ]
    );

    // 3 GET arity + 2 INCR + CONFIG NOSUCH + CONFIG GET + unknown command, + EXECABORT.
    assert_eq!(info_u64(&mut c, "stats", "total_error_replies"), 9);
    let errorstats = c.info(Some("errorstats")).unwrap();
    assert!(errorstats.starts_with("# Errorstats\r\n"), "{errorstats}");
    assert_eq!(field(&errorstats, "errorstat_ERR"), Some("count=8"));
    assert_eq!(field(&errorstats, "errorstat_EXECABORT"), Some("count=1"));
    // Errorstats is a default section (as in Redis 7), commandstats is not.
    let default = c.info(None).unwrap();
    assert!(default.contains("errorstat_ERR:count=8"), "{default}");
    assert!(!default.contains("cmdstat_"), "{default}");
}

/// The metrics endpoint has the RESP listener's bounds: a scraper that sends half a request
/// is closed without an answer (after `metrics::REQUEST_TIMEOUT`), and at most
/// `metrics::CONNECTIONS_MAX` connections are served at once — one more is closed at once.
/// Once the stalled ones are gone, scrapes work again.
#[test]
fn the_metrics_endpoint_closes_stalled_requests_and_caps_connections() {
    let server = MetricsServer::start();
    let stalled: Vec<TcpStream> = (0..quiver_service::metrics::CONNECTIONS_MAX)
        .map(|_| {
            let mut s = TcpStream::connect(server.metrics).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.write_all(b"GET /metr").unwrap();
            s
        })
        .collect();
    let mut extra = TcpStream::connect(server.metrics).unwrap();
    extra.set_read_timeout(Some(WAIT)).unwrap();
    let _ = extra.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
    let mut got = Vec::new();
    match extra.read_to_end(&mut got) {
        Ok(_) => assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got)),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    for mut s in stalled {
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .expect("the stalled request is closed within WAIT");
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    }
    let (status, _, body) = http(server.metrics, "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("quiver_keys"), "{body}");
}
