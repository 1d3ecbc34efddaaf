//! The `quiver` binary end to end, run as a user would: the server commands against an
//! in-process `TestServer`, the offline commands and benchmarks on temporary directories.

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::process::{Command, Output};

use quiver_bench::keys::{key_for, value_for};
use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;
use quiver_testkit::port::free_port;
use serde_json::Value as Json;

/// Runs `quiver` with `args` as given (no `--dir`, no connection flags).
fn quiver<S: AsRef<OsStr>>(args: &[S]) -> Output {
    // A password in the test runner's environment must not leak into the commands.
    run(Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .env_remove("QUIVER_PASSWORD"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the quiver binary runs")
}

/// `quiver --dir DIR args...`: the offline commands.
fn offline(dir: &Path, args: &[&str]) -> Output {
    let mut all: Vec<OsString> = vec!["--dir".into(), dir.into()];
    all.extend(args.iter().map(OsString::from));
    quiver(&all)
}

/// `quiver SUBCOMMAND --port PORT rest...`: a server command aimed at `port`.
fn remote_args<S: AsRef<OsStr>>(port: u16, args: &[S]) -> Vec<OsString> {
    let (cmd, rest) = args.split_first().expect("a subcommand");
    let mut all: Vec<OsString> = vec![
        cmd.as_ref().into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string().into(),
    ];
    all.extend(rest.iter().map(|a| a.as_ref().to_os_string()));
    all
}

fn remote<S: AsRef<OsStr>>(server: &TestServer, args: &[S]) -> Output {
    quiver(&remote_args(server.port(), args))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Expects success; returns stdout.
fn ok(o: Output) -> String {
    assert!(o.status.success(), "quiver failed: {}", stderr(&o));
    stdout(&o)
}

/// Expects exit code 1 with a `quiver:` message (not a panic) on stderr; returns it.
fn fails(o: Output) -> String {
    assert_eq!(o.status.code(), Some(1), "stdout: {}", stdout(&o));
    let err = stderr(&o);
    assert!(!err.trim().is_empty(), "failed without a message");
    assert!(!err.contains("panicked"), "panicked: {err}");
    err
}

fn client(server: &TestServer) -> Connection {
    Connection::connect(&server.addr.to_string()).unwrap()
}

#[test]
fn set_get_del() {
    let s = TestServer::start();
    assert_eq!(ok(remote(&s, &["set", "greeting", "hello world"])), "OK\n");
    assert_eq!(ok(remote(&s, &["get", "greeting"])), "hello world\n");
    assert_eq!(ok(remote(&s, &["set", "greeting", "bye"])), "OK\n");
    assert_eq!(ok(remote(&s, &["get", "greeting"])), "bye\n");
    ok(remote(&s, &["set", "other", ""]));
    assert_eq!(ok(remote(&s, &["get", "other"])), "\n");
    ok(remote(&s, &["set", "negative", "-5"]));
    assert_eq!(ok(remote(&s, &["get", "negative"])), "-5\n");
    assert_eq!(ok(remote(&s, &["set", "--", "-dash", "--value"])), "OK\n");
    assert_eq!(ok(remote(&s, &["get", "--", "-dash"])), "--value\n");

    assert_eq!(
        ok(remote(&s, &["del", "greeting", "absent", "other"])),
        "2\n"
    );
    let o = remote(&s, &["get", "greeting"]);
    assert!(o.stdout.is_empty());
    let err = fails(o);
    assert_eq!(err, "quiver: key \"greeting\" not found\n");
    assert_eq!(ok(remote(&s, &["del", "greeting"])), "0\n");
    assert_eq!(
        client(&s).get("negative").unwrap().as_deref(),
        Some(&b"-5"[..])
    );
}

#[test]
fn mset_and_mget() {
    let s = TestServer::start();
    assert_eq!(
        ok(remote(&s, &["mset", "a", "1", "b", "two words", "c", ""])),
        "OK\n"
    );
    // One line per key, in order; an absent key is an empty line.
    assert_eq!(
        ok(remote(&s, &["mget", "a", "absent", "b", "c", "a"])),
        "1\n\ntwo words\n\n1\n"
    );
    assert_eq!(ok(remote(&s, &["mget", "absent"])), "\n");
    let err = fails(remote(&s, &["mset", "a", "1", "b"]));
    assert!(err.contains("pairs"), "{err}");
    fails(remote(&s, &["mset", "a"]));
    fails(remote(&s, &["mget"]));
    assert_eq!(
        client(&s).get("b").unwrap().as_deref(),
        Some(&b"two words"[..])
    );
}

#[test]
fn binary_values_and_keys_round_trip() {
    let s = TestServer::start();
    let key: &[u8] = b"k\xff\xfe \t\"q\"";
    let value: &[u8] = b"tab\there\r\nline two \xff\xfe\x01 \"quoted\" \\ end";
    let out = remote(
        &s,
        &[
            OsStr::new("set"),
            OsStr::from_bytes(key),
            OsStr::from_bytes(value),
        ],
    );
    assert_eq!(ok(out), "OK\n");
    let mut c = client(&s);
    assert_eq!(c.get(key).unwrap().as_deref(), Some(value));
    let got = remote(&s, &[OsStr::new("get"), OsStr::from_bytes(key)]);
    assert!(got.status.success());
    assert_eq!(got.stdout, [value, b"\n"].concat());

    // Bytes no argv can carry (NUL), written by a client, printed raw.
    c.set("nul", b"a\0b\n").unwrap();
    let got = remote(&s, &["get", "nul"]);
    assert_eq!(got.stdout, b"a\0b\n\n");
    let got = remote(
        &s,
        &[
            OsStr::new("mget"),
            OsStr::new("nul"),
            OsStr::from_bytes(key),
        ],
    );
    assert_eq!(got.stdout, [&b"a\0b\n\n"[..], value, b"\n"].concat());

    // Keys are printed raw by scan too.
    let got = remote(&s, &["scan", "--match", "k*"]);
    assert_eq!(got.stdout, [key, b"\n"].concat());
}

#[test]
fn scan_prints_every_key_once() {
    let s = TestServer::start();
    let mut c = client(&s);
    let mut want: Vec<String> = (0..250).map(|i| format!("user:{i}")).collect();
    let pairs: Vec<(String, String)> = want.iter().map(|k| (k.clone(), "v".into())).collect();
    c.multi_set(&pairs).unwrap();
    c.multi_set(&[("other:1", "x"), ("other:2", "y")]).unwrap();

    // COUNT 7: many pages, so the cursor is followed to its end.
    let out = ok(remote(&s, &["scan", "--match", "user:*", "--count", "7"]));
    let mut got: Vec<String> = out.lines().map(String::from).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);

    let all = ok(remote(&s, &["scan"]));
    assert_eq!(all.lines().count(), 252);
    assert_eq!(ok(remote(&s, &["scan", "--match", "nothing*"])), "");
    fails(remote(&s, &["scan", "--count", "0"]));
}

#[test]
fn info_reports_sections_with_unix_line_ends() {
    let s = TestServer::start();
    ok(remote(&s, &["mset", "a", "1", "b", "2", "c", "3"]));
    let keyspace = ok(remote(&s, &["info", "keyspace"]));
    assert!(!keyspace.contains('\r'), "{keyspace:?}");
    assert!(keyspace.starts_with("# Keyspace\n"), "{keyspace:?}");
    assert!(keyspace.contains("db0:keys=3,"), "{keyspace:?}");
    let all = ok(remote(&s, &["info"]));
    assert!(all.contains("# Server\n"), "{all}");
    assert!(all.contains(&format!("tcp_port:{}\n", s.port())), "{all}");
    assert_eq!(ok(remote(&s, &["ping"])), "PONG\n");
}

#[test]
fn load_writes_the_deterministic_keys() {
    let s = TestServer::start();
    // 2000 keys in rounds of 3 x 300: the last round is partial, its last MSET too.
    let out = ok(remote(
        &s,
        &[
            "load",
            "--count",
            "2000",
            "--key-size",
            "16",
            "--value-size",
            "32",
            "--width",
            "300",
            "--depth",
            "3",
        ],
    ));
    assert!(out.starts_with("loaded 2000 keys in "), "{out}");
    assert!(out.trim_end().ends_with(" keys/s)"), "{out}");

    let mut c = client(&s);
    assert_eq!(c.command(&[b"DBSIZE"]).unwrap(), Value::Integer(2000));
    for i in [0, 42, 299, 300, 1999] {
        assert_eq!(
            c.get(key_for(i, 16)).unwrap().as_deref(),
            Some(&value_for(i, 32)[..]),
            "key {i}"
        );
    }
    assert_eq!(
        ok(remote(&s, &["get", "0000000000000042"])),
        "42.42.42.42.42.42.42.42.42.42.42\n"
    );
    fails(remote(&s, &["get", "0000000000002000"]));

    // The defaults (16-byte keys, 32-byte values, width 256, depth 4): keys 0..2000 are
    // written again with the same values, 2000..2500 are new.
    assert!(ok(remote(&s, &["load", "--count", "2500"])).starts_with("loaded 2500 keys"));
    assert_eq!(c.command(&[b"DBSIZE"]).unwrap(), Value::Integer(2500));
    assert_eq!(
        c.get(key_for(2499, 16)).unwrap().as_deref(),
        Some(&value_for(2499, 32)[..])
    );
}

#[test]
fn load_rejects_bad_parameters_before_connecting() {
    // Nothing listens: a parameter error must be reported, not the connection.
    let port = free_port();
    for args in [
        &["load", "--count", "10", "--key-size", "4"][..],
        &["load", "--count", "1000", "--key-size", "8", "--width", "0"],
        &["load", "--count", "10", "--depth", "0"],
        &[
            "load",
            "--count",
            "10",
            "--value-size",
            "1000000",
            "--width",
            "1000",
        ],
    ] {
        let err = fails(quiver(&remote_args(port, args)));
        assert!(!err.contains("connect"), "{args:?}: {err}");
    }
    fails(quiver(&remote_args(port, &["load"])));
    fails(quiver(&remote_args(port, &["load", "--count", "ten"])));
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let port = free_port();
    for args in [
        &["get", "k"][..],
        &["set", "k", "v"],
        &["ping"],
        &["scan"],
        &["info"],
        &["load", "--count", "10"],
    ] {
        let err = fails(quiver(&remote_args(port, args)));
        assert_eq!(
            err,
            format!(
                "quiver: cannot connect to 127.0.0.1:{port}: Connection refused \
                 (is 'quiver serve' running?)\n"
            ),
            "{args:?}"
        );
    }

    // A server that accepts but never answers: the timeout ends the wait.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let err = fails(quiver(&remote_args(port, &["ping", "--timeout-s", "0.3"])));
    assert!(err.contains("no reply from"), "{err}");
    fails(quiver(&remote_args(port, &["ping", "--timeout-s", "0"])));
}

#[test]
fn error_replies_and_passwords() {
    let s = TestServer::start();
    // A key over the 65535-byte limit: the server's error reply becomes exit code 1.
    let long = "k".repeat(65_536);
    let err = fails(remote(&s, &["set", &long, "v"]));
    assert!(
        err.starts_with("quiver: server error: ERR key is too long"),
        "{err}"
    );

    let s = TestServer::start_with(|c| c.service.requirepass = Some("sesame".into()));
    let err = fails(remote(&s, &["get", "k"]));
    assert!(err.starts_with("quiver: server error: NOAUTH"), "{err}");
    assert!(err.contains("--password"), "{err}");
    let err = fails(remote(&s, &["get", "k", "--password", "wrong"]));
    assert!(err.contains("refused the password"), "{err}");
    assert_eq!(
        ok(remote(&s, &["set", "k", "v", "--password", "sesame"])),
        "OK\n"
    );
    let o = run(Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(remote_args(s.port(), &["get", "k"]))
        .env("QUIVER_PASSWORD", "sesame"));
    assert_eq!(ok(o), "v\n");
    // The password never shows in help output.
    let o = run(Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["get", "--help"])
        .env("QUIVER_PASSWORD", "sesame"));
    assert!(!ok(o).contains("sesame"));
}

#[test]
fn dir_is_refused_for_server_commands() {
    let t = tempfile::tempdir().unwrap();
    let err = fails(offline(t.path(), &["get", "k"]));
    assert!(err.contains("--dir"), "{err}");
}

/// A store with 1000 loaded keys, written through a server that is then stopped; the caller
/// keeps the server (its drop removes the directory).
fn stopped_server_with_keys() -> TestServer {
    let mut s = TestServer::start();
    ok(remote(&s, &["load", "--count", "1000"]));
    s.stop().unwrap();
    s
}

#[test]
fn offline_stats_check_compact() {
    let s = stopped_server_with_keys();
    let dir = s.dir();
    let stats: Json = serde_json::from_str(&ok(offline(dir, &["stats"]))).expect("stats is JSON");
    assert_eq!(stats["keys"], 1000);
    for field in [
        "index_bytes",
        "index_bytes_per_key",
        "segments",
        "disk_bytes",
        "garbage_ratio",
    ] {
        assert!(stats[field].is_number(), "stats lacks {field}: {stats}");
    }

    let check: Json = serde_json::from_str(&ok(offline(dir, &["check"]))).expect("check is JSON");
    // Records also count the commit records of the MSET batches: index entries are the keys.
    assert_eq!(check["index_entries"], 1000);
    assert_eq!(check["problems"], Json::Array(vec![]));

    let compact: Json =
        serde_json::from_str(&ok(offline(dir, &["compact"]))).expect("compact is JSON");
    assert!(compact["records_copied"].is_number(), "{compact}");
    let store = quiver_store::Store::open(dir, quiver_store::Options::default()).unwrap();
    assert_eq!(
        store.get(b"0000000000000007").unwrap().as_deref(),
        Some(&b"7.7.7.7.7.7.7.7.7.7.7.7.7.7.7.7."[..])
    );
}

#[test]
fn a_store_held_by_a_server_or_process_is_refused() {
    let s = TestServer::start();
    ok(remote(&s, &["set", "k", "v"]));
    let err = fails(offline(s.dir(), &["stats"]));
    assert!(err.contains("locked"), "{err}");

    let mut s = stopped_server_with_keys();
    let store = quiver_store::Store::open(s.dir(), quiver_store::Options::default()).unwrap();
    let err = fails(offline(s.dir(), &["check"]));
    assert!(err.contains("locked"), "{err}");
    drop(store);
    ok(offline(s.dir(), &["check"]));
    s.restart();
    assert_eq!(ok(remote(&s, &["get", "0000000000000999"])).len(), 33);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("missing");
    for cmd in ["stats", "compact", "check"] {
        let err = fails(offline(&missing, &[cmd]));
        assert!(err.contains("does not exist"), "{cmd}: {err}");
    }
    assert!(
        !missing.exists(),
        "offline commands must not create a store"
    );
    let err = fails(offline(&missing, &["bench", "reopen"]));
    assert!(err.contains("does not hold a store"), "{err}");

    let dir = t.path().join("store");
    fails(offline(&dir, &["frobnicate"]));
    let err = fails(quiver(&["get", "k", "--bogus"]));
    assert!(err.contains("--bogus"), "{err}");
    fails(quiver(&["get"]));
    fails(quiver(&["set", "k"]));
    fails(quiver(&["get", "k", "--port", "70000"]));
    fails(offline(&dir, &["bench", "local", "--keys", "0"]));
    fails(offline(
        &dir,
        &["bench", "local", "--keys", "10", "--duration-s", "-1"],
    ));
    fails(offline(
        &dir,
        &[
            "bench",
            "local",
            "--keys",
            "10",
            "--distribution",
            "zipf",
            "--zipf-theta",
            "1.5",
        ],
    ));

    // A directory that holds something else is not loaded over by the benchmark.
    let other = t.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("precious.txt"), "x").unwrap();
    let err = fails(offline(
        &other,
        &["bench", "local", "--keys", "10", "--duration-s", "0.01"],
    ));
    assert!(err.contains("precious.txt"), "{err}");
    assert!(other.join("precious.txt").exists());

    // Help is not an error.
    let help = ok(quiver(&["--help"]));
    for cmd in ["bench", "get", "load", "scan", "check"] {
        assert!(help.contains(cmd), "{help}");
    }
    let help = ok(quiver(&["load", "--help"]));
    assert!(
        help.contains("--port") && help.contains("--width"),
        "{help}"
    );
}

#[test]
fn bench_local_smoke() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("bench");
    let args = [
        "bench",
        "local",
        "--keys",
        "1000",
        "--key-size",
        "16",
        "--value-size",
        "32",
        "--width",
        "1,8",
        "--backend",
        "mmap,pread",
        "--distribution",
        "uniform",
        "--threads",
        "1",
        "--duration-s",
        "0.2",
    ];
    let out = ok(offline(&dir, &args));
    let lines: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (i, r) in lines.iter().enumerate() {
        for field in [
            "backend",
            "keys",
            "key_size",
            "value_size",
            "distribution",
            "width",
            "threads",
            "duration_s",
            "keys_per_sec",
            "index_bytes_per_key",
            "rss_bytes_per_key",
            "misses",
        ] {
            assert!(!r[field].is_null(), "line {i} lacks {field}: {r}");
        }
        assert_eq!(r["keys"], 1000);
        assert_eq!(r["misses"], 0);
        assert_eq!(r["wrong_values"], 0);
        assert!(r["keys_per_sec"].as_f64().unwrap() > 0.0);
        assert_eq!(
            r["load_keys_per_sec"].is_number(),
            i == 0,
            "load rate only on the run that loaded"
        );
    }
    let grid: Vec<(String, u64)> = lines
        .iter()
        .map(|r| {
            (
                r["backend"].as_str().unwrap().to_string(),
                r["width"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [("mmap", 1), ("mmap", 8), ("pread", 1), ("pread", 8)];
    assert_eq!(grid, want.map(|(b, w)| (b.to_string(), w)));

    // --reuse skips the load of the same data set.
    let out = ok(offline(
        &dir,
        &[
            "bench",
            "local",
            "--keys",
            "1000",
            "--width",
            "4",
            "--distribution",
            "zipf",
            "--duration-s",
            "0.05",
            "--threads",
            "2",
            "--reuse",
        ],
    ));
    let r: Json = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["distribution"], "zipf");
    assert_eq!(r["threads"], 2);
    assert_eq!(r["misses"], 0);
    assert!(r["load_keys_per_sec"].is_null(), "reused, not loaded: {r}");

    // reopen: from checkpoints, then rebuilt; the checkpoints are put back.
    let out = ok(offline(&dir, &["bench", "reopen"]));
    let modes: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(modes.len(), 2);
    assert_eq!(modes[0]["mode"], "checkpoint");
    assert_eq!(modes[0]["partitions_rebuilt"], 0);
    assert_eq!(modes[1]["mode"], "rebuild");
    assert_eq!(modes[1]["partitions_from_checkpoint"], 0);
    assert_eq!(modes[1]["keys"], 1000);
    assert!(dir.join("p0000").join("index.ckpt").is_file());
    assert!(!dir.join("p0000").join("index.ckpt.bench-aside").exists());
}

#[test]
fn non_utf8_arguments_reach_the_server_unchanged() {
    // OsString::from_vec: what a shell passes for bytes that are not UTF-8.
    let s = TestServer::start();
    let key = OsString::from_vec(vec![0x80, b'k']);
    ok(remote(
        &s,
        &[OsString::from("set"), key.clone(), "v".into()],
    ));
    assert_eq!(
        client(&s).get([0x80, b'k']).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(ok(remote(&s, &[OsString::from("del"), key])), "1\n");
}
