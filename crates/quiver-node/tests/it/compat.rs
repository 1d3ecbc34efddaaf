//! Redis compatibility, checked with the material in `tests/compat/` (see its README) against
//! an in-process Quiver server: Redis 7's recorded replies byte for byte, a redis-py script and
//! a scripted redis-cli session. The tools come from `scripts/test_deps.sh`.

use std::path::PathBuf;
use std::process::Command;

use quiver_node::testing::TestServer;
use quiver_service::config::DebugCommand;
use quiver_testkit::tool;

fn compat_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat")
}

/// Runs `program args...` in the compat folder; fails the test with its output unless it
/// exits 0.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(tool::require(program))
        .args(args)
        .current_dir(compat_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (run scripts/test_deps.sh): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}); if a tool is missing, run scripts/test_deps.sh\n\
         --- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Replays `golden` against the server on `port`, skipping the sessions `deviations` lists;
/// fails unless every other one matches.
fn check_golden(port: u16, golden: &str, deviations: &str) {
    let port = port.to_string();
    let out = run(
        "python3",
        &[
            "check_golden.py",
            "--port",
            &port,
            "--golden",
            golden,
            "--deviations",
            deviations,
        ],
    );
    assert!(out.contains(" 0 mismatches"), "{golden}: {out}");
}

/// DEBUG's subcommands test harnesses call, against a server that allows DEBUG as the
/// recording's did (`enable-debug-command yes`).
#[test]
fn debug_replies_match_redis_7_byte_for_byte() {
    let server = TestServer::start_with(|c| c.service.enable_debug_command = DebugCommand::Yes);
    check_golden(
        server.port(),
        "golden_debug.json",
        "quiver_deviations_debug.json",
    );
}

#[test]
fn replies_match_redis_7_byte_for_byte() {
    let server = TestServer::start();
    // The strings, keys and server recording, then the hashes' (issue 36), then the
    // operator's commands' (issue 37), then ACL subcommand rules, read / write key patterns
    // and rules naming Redis commands Quiver lacks.
    for (golden, deviations) in [
        ("golden.json", "quiver_deviations.json"),
        ("golden_hash.json", "quiver_deviations_hash.json"),
        ("golden_ops.json", "quiver_deviations_ops.json"),
        ("golden_acl.json", "quiver_deviations_acl.json"),
    ] {
        check_golden(server.port(), golden, deviations);
    }
}

#[test]
fn redis_py_works() {
    let server = TestServer::start();
    let out = run(
        "python3",
        &["redis_py_check.py", "--port", &server.port().to_string()],
    );
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn redis_cli_session_matches() {
    let server = TestServer::start();
    run(
        "bash",
        &["redis_cli_check.sh", "--port", &server.port().to_string()],
    );
}

/// `redis-cli --bigkeys` (SCAN, TYPE, STRLEN / HLEN) and `--memkeys` (MEMORY USAGE) find the
/// biggest string and hash; MEMORY USAGE counts a large hash's buckets (all with SAMPLES 0,
/// five of them extrapolated by default).
#[test]
fn redis_cli_bigkeys_and_memkeys_find_the_biggest_keys() {
    let server = TestServer::start();
    let mut c = quiver_client::Connection::connect(&server.addr.to_string()).unwrap();
    for i in 1..=50 {
        c.set(format!("key:{i}"), "x".repeat(i * 10)).unwrap();
    }
    let mut hset: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"big".to_vec()];
    for i in 0..2000 {
        hset.extend([
            format!("field:{i}").into_bytes(),
            format!("value:{i}").into_bytes(),
        ]);
    }
    let args: Vec<&[u8]> = hset.iter().map(Vec::as_slice).collect();
    c.command(&args).unwrap();
    let port = server.port().to_string();
    let big = run("redis-cli", &["-p", &port, "--bigkeys"]);
    assert!(
        big.contains("Biggest string found '\"key:50\"' has 500 bytes"),
        "{big}"
    );
    assert!(
        big.contains("Biggest   hash found '\"big\"' has 2000 fields"),
        "{big}"
    );
    let mem = run("redis-cli", &["-p", &port, "--memkeys"]);
    assert!(mem.contains("Biggest   hash found '\"big\"'"), "{mem}");
    let mut usage = |extra: &[&[u8]]| {
        let mut a: Vec<&[u8]> = vec![b"MEMORY", b"USAGE", b"big"];
        a.extend(extra);
        match c.command(&a).unwrap() {
            quiver_client::Value::Integer(n) => n,
            other => panic!("MEMORY USAGE: {other:?}"),
        }
    };
    let all = usage(&[b"SAMPLES", b"0"]);
    // At least the fields' bytes, in buckets.
    assert!(all > 2000 * 20, "{all}");
    let sampled = usage(&[]);
    assert!(sampled > all / 2 && sampled < all * 2, "{sampled} vs {all}");
}

/// `redis-cli --latency` (PINGs) and `--stat` (INFO's keys, used_memory, clients, totals).
#[test]
fn redis_cli_latency_and_stat_work() {
    use std::io::BufRead;
    let server = TestServer::start();
    let port = server.port().to_string();
    let mut c = quiver_client::Connection::connect(&server.addr.to_string()).unwrap();
    c.multi_set(&[("a", "1"), ("b", "2"), ("c", "3")]).unwrap();
    // Raw output: one line of min, max, avg and samples, then it exits.
    let latency = run(
        "redis-cli",
        &["-p", &port, "--latency", "--raw", "-i", "0.2"],
    );
    let numbers: Vec<f64> = latency
        .split_whitespace()
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{latency}")))
        .collect();
    assert_eq!(numbers.len(), 4, "{latency}");
    assert!(numbers[3] >= 1.0, "no PING answered: {latency}");
    // --stat runs until stopped; stdbuf makes it print each line as it comes.
    let child = Command::new(tool::require("stdbuf"))
        .args(["-oL", tool::require("redis-cli").to_str().unwrap()])
        .args(["-p", &port, "--stat", "-i", "0.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stat = quiver_testkit::process::Guard::new(child);
    let stdout = stat.child().stdout.take().unwrap();
    let lines: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .take(3)
        .map(Result::unwrap)
        .collect();
    stat.kill9();
    assert!(lines[1].starts_with("keys       mem"), "{lines:?}");
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(row[0], "3", "{lines:?}");
    assert!(row[1].ends_with(['K', 'M', 'G']), "{lines:?}");
}
