//! The `quiver` binary end to end: run it as a user would, on temporary directories.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn quiver(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("the quiver binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects success.
fn ok(dir: &Path, args: &[&str]) -> String {
    let o = quiver(dir, args);
    assert!(o.status.success(), "quiver {args:?} failed: {}", stderr(&o));
    stdout(&o)
}

/// Runs and expects exit code 1 with a `quiver:` message on stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let o = quiver(dir, args);
    assert_eq!(o.status.code(), Some(1), "quiver {args:?}: {}", stdout(&o));
    let err = stderr(&o);
    assert!(
        !err.trim().is_empty(),
        "quiver {args:?} failed without a message"
    );
    assert!(!err.contains("panicked"), "quiver {args:?} panicked: {err}");
    err
}

#[test]
fn load_get_and_stats() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    let out = ok(
        &dir,
        &[
            "load",
            "--count",
            "1000",
            "--key-size",
            "16",
            "--value-size",
            "32",
        ],
    );
    assert!(out.starts_with("loaded 1000 keys in "), "{out}");
    assert!(out.contains("keys/s") && out.contains("MB/s"), "{out}");

    assert_eq!(
        ok(&dir, &["get", "0000000000000042"]),
        "42.42.42.42.42.42.42.42.42.42.42\n"
    );
    assert_eq!(ok(&dir, &["get", "0000000000000999"]).len(), 33);
    let err = fails(&dir, &["get", "0000000000001000"]);
    assert!(err.contains("not found"), "{err}");

    let stats: Value = serde_json::from_str(&ok(&dir, &["stats"])).expect("stats is JSON");
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

    let check: Value = serde_json::from_str(&ok(&dir, &["check"])).expect("check is JSON");
    assert_eq!(check["records"], 1000);
    assert_eq!(check["problems"], Value::Array(vec![]));

    let compact: Value = serde_json::from_str(&ok(&dir, &["compact"])).expect("compact is JSON");
    assert!(compact["records_copied"].is_number(), "{compact}");
    assert_eq!(
        ok(&dir, &["get", "0000000000000007"]),
        "7.7.7.7.7.7.7.7.7.7.7.7.7.7.7.7.\n"
    );
}

#[test]
fn set_get_del() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    assert_eq!(ok(&dir, &["set", "greeting", "hello world"]), "OK\n");
    assert_eq!(ok(&dir, &["get", "greeting"]), "hello world\n");
    assert_eq!(ok(&dir, &["set", "greeting", "bye"]), "OK\n");
    assert_eq!(ok(&dir, &["get", "greeting"]), "bye\n");
    ok(&dir, &["set", "other", ""]);
    assert_eq!(ok(&dir, &["get", "other"]), "\n");
    assert_eq!(ok(&dir, &["del", "greeting", "absent", "other"]), "2\n");
    fails(&dir, &["get", "greeting"]);
    assert_eq!(ok(&dir, &["del", "greeting"]), "0\n");
    let stats: Value = serde_json::from_str(&ok(&dir, &["stats"])).unwrap();
    assert_eq!(stats["keys"], 0);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("missing");
    for cmd in [
        &["get", "k"][..],
        &["del", "k"],
        &["stats"],
        &["compact"],
        &["check"],
    ] {
        let err = fails(&missing, cmd);
        assert!(err.contains("does not exist"), "{cmd:?}: {err}");
    }
    assert!(!missing.exists(), "read commands must not create a store");
    let err = fails(&missing, &["bench", "reopen"]);
    assert!(err.contains("does not hold a store"), "{err}");

    let dir = t.path().join("store");
    let err = fails(&dir, &["load", "--count", "10", "--bogus"]);
    assert!(err.contains("--bogus"), "{err}");
    fails(&dir, &["load"]);
    fails(&dir, &["load", "--count", "ten"]);
    fails(&dir, &["load", "--count", "10", "--key-size", "4"]);
    fails(
        &dir,
        &["load", "--count", "1000", "--key-size", "8", "--width", "0"],
    );
    fails(&dir, &["load", "--count", "10", "--durability", "maybe"]);
    fails(&dir, &["load", "--count", "10", "--partitions", "0"]);
    fails(&dir, &["frobnicate"]);
    fails(&dir, &["bench", "local", "--keys", "0"]);
    fails(
        &dir,
        &["bench", "local", "--keys", "10", "--duration-s", "-1"],
    );
    fails(
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
    );

    // A directory that holds something else is not loaded over by the benchmark.
    let other = t.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("precious.txt"), "x").unwrap();
    let err = fails(
        &other,
        &["bench", "local", "--keys", "10", "--duration-s", "0.01"],
    );
    assert!(err.contains("precious.txt"), "{err}");
    assert!(other.join("precious.txt").exists());

    // Help is not an error.
    let o = quiver(&dir, &["--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("bench"));
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
    let out = ok(&dir, &args);
    let lines: Vec<Value> = out
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
    let out = ok(
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
    );
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["distribution"], "zipf");
    assert_eq!(r["threads"], 2);
    assert_eq!(r["misses"], 0);
    assert!(r["load_keys_per_sec"].is_null(), "reused, not loaded: {r}");

    // reopen: from checkpoints, then rebuilt; the checkpoints are put back.
    let out = ok(&dir, &["bench", "reopen"]);
    let modes: Vec<Value> = out
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
fn a_store_open_in_another_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["set", "k", "v"]);
    let store = quiver_store::Store::open(dir.path(), quiver_store::Options::default()).unwrap();
    let err = fails(dir.path(), &["get", "k"]);
    assert!(err.contains("locked"), "{err}");
    drop(store);
    assert_eq!(ok(dir.path(), &["get", "k"]).trim(), "v");
}
