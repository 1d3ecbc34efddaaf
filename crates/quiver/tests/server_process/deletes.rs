//! Regression (issue 8, item 1): after MSETs of 12k keys and DELs of all of them, the third
//! MSET got no reply: a worker spun at 100% CPU in an unbounded retry of an index resize that
//! never made room; PING and SIGTERM went unanswered, and a restart on the same directory hung
//! again. The report's redis-cli session, as it was.

use super::*;

fn seq(prefix: &str, range: std::ops::Range<u64>, value: bool) -> Vec<String> {
    let mut v = Vec::new();
    for i in range {
        v.push(format!("{prefix}:{i}"));
        if value {
            v.push("v".into());
        }
    }
    v
}

fn cmd(name: &str, rest: Vec<String>) -> Vec<String> {
    let mut v = vec![name.to_string()];
    v.extend(rest);
    v
}

#[test]
fn msets_after_mass_deletes_are_answered() {
    if tool::find("redis-cli").is_none() {
        eprintln!("SKIPPED: redis-cli is not installed (scripts/test_deps.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("hang"), tmp.path().join("logs"));
    let server = serve(&dir, &logs, &[]);
    let r = |args: Vec<String>| redis_cli(&server.addr, &args).unwrap();
    for j in 0..10 {
        assert_eq!(
            r(cmd("mset", seq("a", j * 1000..(j + 1) * 1000, true))),
            "OK\n"
        );
    }
    assert_eq!(r(cmd("mset", seq("b", 0..2000, true))), "OK\n");
    for j in 0..10 {
        assert_eq!(
            r(cmd("del", seq("a", j * 1000..(j + 1) * 1000, false))),
            "1000\n"
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(r(cmd("del", seq("b", 0..2000, false))), "2000\n");
    // Each of these hung (no reply, ever) before the fix; `run` fails a hang after WAIT.
    for j in 0..10 {
        assert_eq!(
            r(cmd("mset", seq("a", j * 1000..(j + 1) * 1000, true))),
            "OK\n",
            "MSET #{j}"
        );
    }
    assert_eq!(r(vec!["ping".into()]), "PONG\n");
    assert_eq!(r(vec!["dbsize".into()]), "10000\n");
    server.stop_with(libc::SIGTERM);

    // A restart on the same directory serves at once, and writes go on.
    let server = serve(&dir, &logs, &[]);
    let r = |args: Vec<String>| redis_cli(&server.addr, &args).unwrap();
    assert_eq!(r(cmd("del", seq("a", 0..10_000, false))), "10000\n");
    assert_eq!(r(cmd("mset", seq("c", 0..5000, true))), "OK\n");
    assert_eq!(r(vec!["dbsize".into()]), "5000\n");
    server.stop_with(libc::SIGTERM);
}
