//! Key expiry over time, on a server whose store reads a manual clock: the test moves time
//! by hand (`Clock::advance`), so nothing here waits or depends on how fast it runs, and TTLs
//! in milliseconds are exact.

use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;
use quiver_store::Clock;

use crate::bad_input::client;

/// 2023-11-14T22:13:20Z: any fixed time works.
const T0: u64 = 1_700_000_000_000;

fn start() -> (TestServer, Clock) {
    let clock = Clock::manual(T0);
    let server = TestServer::start_with_clock(clock.clone(), |_| {});
    (server, clock)
}

/// Sends a command given as words (no spaces inside an argument).
fn cmd(c: &mut Connection, line: &str) -> Value {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    match c.command(&args) {
        Ok(v) => v,
        Err(quiver_client::Error::Server(text)) => Value::Error(text),
        Err(e) => panic!("{line}: {e}"),
    }
}

fn int(c: &mut Connection, line: &str) -> i64 {
    match cmd(c, line) {
        Value::Integer(n) => n,
        other => panic!("{line}: {other:?}"),
    }
}

fn bulk(c: &mut Connection, line: &str) -> Option<String> {
    match cmd(c, line) {
        Value::Bulk(b) => Some(String::from_utf8(b.to_vec()).unwrap()),
        Value::Null => None,
        other => panic!("{line}: {other:?}"),
    }
}

fn ok(c: &mut Connection, line: &str) {
    assert_eq!(cmd(c, line), Value::Simple("OK".into()), "{line}");
}

/// The keys of a reply that is an array of bulks, sorted.
fn key_list(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}");
    };
    let mut keys: Vec<String> = items
        .iter()
        .map(|i| String::from_utf8(i.as_bytes().unwrap().to_vec()).unwrap())
        .collect();
    keys.sort();
    keys
}

/// Every key SCAN finds, following the cursor to its end, sorted and without repeats.
fn scan_all(c: &mut Connection) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    loop {
        let Value::Array(page) = cmd(c, &format!("SCAN {cursor} COUNT 100")) else {
            panic!("SCAN reply");
        };
        keys.extend(key_list(&page[1]));
        cursor = String::from_utf8(page[0].as_bytes().unwrap().to_vec()).unwrap();
        if cursor == "0" {
            keys.sort();
            keys.dedup();
            return keys;
        }
    }
}

fn keyspace_line(c: &mut Connection) -> Option<String> {
    let text = c.info(Some("keyspace")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("db0:").map(|v| v.trim().to_string()))
}

#[test]
fn a_key_set_with_ex_is_gone_from_every_read_once_its_time_comes() {
    let (server, clock) = start();
    let mut c = client(server.addr);
    ok(&mut c, "SET k v EX 10");
    ok(&mut c, "SET lasting v");
    assert_eq!(int(&mut c, "PTTL k"), 10_000);
    clock.advance(9_999);
    assert_eq!(int(&mut c, "PTTL k"), 1);
    assert_eq!(int(&mut c, "TTL k"), 0, "1 ms left rounds to 0 s");
    assert_eq!(bulk(&mut c, "GET k").as_deref(), Some("v"));
    assert_eq!(int(&mut c, "EXISTS k lasting"), 2);
    assert_eq!(int(&mut c, "DBSIZE"), 2);
    assert_eq!(scan_all(&mut c), ["k", "lasting"]);
    assert_eq!(key_list(&cmd(&mut c, "KEYS *")), ["k", "lasting"]);

    // Its expiry time is now: expired (as in Redis, a key expires at its time, not after).
    clock.advance(1);
    assert_eq!(bulk(&mut c, "GET k"), None);
    assert_eq!(
        cmd(&mut c, "MGET k lasting"),
        Value::Array(vec![Value::Null, Value::Bulk("v".into())])
    );
    assert_eq!(int(&mut c, "EXISTS k lasting"), 1);
    assert_eq!(int(&mut c, "TOUCH k"), 0);
    assert_eq!(int(&mut c, "DBSIZE"), 1);
    assert_eq!(scan_all(&mut c), ["lasting"]);
    assert_eq!(key_list(&cmd(&mut c, "KEYS *")), ["lasting"]);
    assert_eq!(key_list(&cmd(&mut c, "KEYS k")), Vec::<String>::new());
    assert_eq!(int(&mut c, "TTL k"), -2);
    assert_eq!(int(&mut c, "PTTL k"), -2);
    assert_eq!(int(&mut c, "EXPIRETIME k"), -2);
    assert_eq!(int(&mut c, "STRLEN k"), 0);
    assert_eq!(cmd(&mut c, "TYPE k"), Value::Simple("none".into()));
    assert_eq!(bulk(&mut c, "GETEX k PERSIST"), None);
    assert_eq!(int(&mut c, "PERSIST k"), 0);
    assert_eq!(int(&mut c, "EXPIRE k 100"), 0);
    assert_eq!(
        cmd(&mut c, "RENAME k j"),
        Value::Error("ERR no such key".into())
    );
    // A write finds it absent: a new key, without the old expiry.
    assert_eq!(int(&mut c, "INCR k"), 1);
    assert_eq!(int(&mut c, "TTL k"), -1);
    assert_eq!(cmd(&mut c, "SET k v EX 10 NX"), Value::Null);
}

#[test]
fn the_ttl_is_kept_by_incr_append_setrange_cleared_by_set_moved_by_rename() {
    let (server, clock) = start();
    let mut c = client(server.addr);
    ok(&mut c, "SET n 1 PX 5000");
    assert_eq!(int(&mut c, "INCR n"), 2);
    assert_eq!(int(&mut c, "INCRBY n 3"), 5);
    assert_eq!(int(&mut c, "DECR n"), 4);
    assert_eq!(int(&mut c, "APPEND n 0"), 2);
    assert_eq!(int(&mut c, "SETRANGE n 2 x"), 3);
    assert_eq!(int(&mut c, "PTTL n"), 5000);
    ok(&mut c, "SET n v KEEPTTL");
    assert_eq!(int(&mut c, "PTTL n"), 5000);
    clock.advance(4000);
    assert_eq!(int(&mut c, "PTTL n"), 1000);
    ok(&mut c, "SET n 2");
    assert_eq!(int(&mut c, "PTTL n"), -1);
    clock.advance(10_000);
    assert_eq!(
        bulk(&mut c, "GET n").as_deref(),
        Some("2"),
        "SET cleared it"
    );

    // GETSET, MSET and SETNX on an absent key write without expiry too.
    for (setup, write) in [
        ("SET g v PX 100", "GETSET g w"),
        ("SET m v PX 100", "MSET m w"),
    ] {
        ok(&mut c, setup);
        cmd(&mut c, write);
        let key = &write[write.find(' ').unwrap() + 1..][..1];
        assert_eq!(int(&mut c, &format!("PTTL {key}")), -1, "{write}");
    }

    // RENAME moves the expiry (the destination's own is gone), COPY copies it.
    ok(&mut c, "SET a v PX 3000");
    ok(&mut c, "SET b w PX 9000");
    ok(&mut c, "RENAME a b");
    assert_eq!(int(&mut c, "PTTL b"), 3000);
    assert_eq!(int(&mut c, "PTTL a"), -2);
    assert_eq!(int(&mut c, "COPY b c"), 1);
    assert_eq!(int(&mut c, "PTTL c"), 3000);
    ok(&mut c, "SET d x");
    assert_eq!(int(&mut c, "RENAMENX d e"), 1);
    assert_eq!(int(&mut c, "PTTL e"), -1);
    clock.advance(3000);
    assert_eq!(int(&mut c, "EXISTS a b c"), 0);
    assert_eq!(int(&mut c, "EXISTS e"), 1);
}

#[test]
fn expire_with_nx_xx_gt_lt() {
    let (server, clock) = start();
    let mut c = client(server.addr);
    ok(&mut c, "SET k v");
    assert_eq!(int(&mut c, "PEXPIRE k 1000 XX"), 0, "XX: no expiry yet");
    assert_eq!(int(&mut c, "PEXPIRE k 1000 GT"), 0, "GT: none is infinite");
    assert_eq!(int(&mut c, "PTTL k"), -1);
    assert_eq!(int(&mut c, "PEXPIRE k 1000 NX"), 1);
    assert_eq!(int(&mut c, "PEXPIRE k 2000 NX"), 0);
    assert_eq!(int(&mut c, "PEXPIRE k 1000 GT"), 0, "GT: not later");
    assert_eq!(int(&mut c, "PEXPIRE k 1000 LT"), 0, "LT: not earlier");
    assert_eq!(int(&mut c, "PEXPIRE k 1001 GT"), 1);
    assert_eq!(int(&mut c, "PEXPIRE k 999 LT"), 1);
    assert_eq!(int(&mut c, "PTTL k"), 999);
    assert_eq!(int(&mut c, "PEXPIRE k 5000 XX GT"), 1);
    assert_eq!(
        int(
            &mut c,
            "PEXPIREAT k {} LT"
                .replace("{}", &(T0 + 4000).to_string())
                .as_str()
        ),
        1
    );
    assert_eq!(int(&mut c, "PEXPIRETIME k"), (T0 + 4000) as i64);
    assert_eq!(int(&mut c, "EXPIRETIME k"), (T0 / 1000 + 4) as i64);
    assert_eq!(int(&mut c, "PERSIST k"), 1);
    assert_eq!(int(&mut c, "PEXPIRE k 100 LT"), 1, "LT: none is infinite");
    assert_eq!(int(&mut c, "PTTL k"), 100);
    clock.advance(100);
    assert_eq!(int(&mut c, "EXISTS k"), 0);
    assert_eq!(
        cmd(&mut c, "EXPIRE k 1 NX XX"),
        Value::Error("ERR NX and XX, GT or LT options at the same time are not compatible".into())
    );
    assert_eq!(
        cmd(&mut c, "EXPIRE k 1 GT LT"),
        Value::Error("ERR GT and LT options at the same time are not compatible".into())
    );
}

#[test]
fn an_expiry_time_in_the_past_deletes_the_key() {
    let (server, _clock) = start();
    let mut c = client(server.addr);
    let past_s = (T0 / 1000 - 1).to_string();
    for expire in [
        "EXPIRE k -1".to_string(),
        "EXPIRE k 0".to_string(),
        "PEXPIRE k 0".to_string(),
        format!("EXPIREAT k {past_s}"),
        format!("PEXPIREAT k {T0}"),
        "PEXPIREAT k -9223372036854775808".to_string(),
    ] {
        ok(&mut c, "SET k v");
        assert_eq!(int(&mut c, &expire), 1, "{expire}");
        assert_eq!(int(&mut c, "EXISTS k"), 0, "{expire}");
        assert_eq!(int(&mut c, "DBSIZE"), 0, "{expire}");
    }
    // SET and GETEX with an absolute time in the past: set, and gone at once.
    ok(&mut c, &format!("SET k v PXAT {T0}"));
    assert_eq!(int(&mut c, "EXISTS k"), 0);
    ok(&mut c, "SET k v");
    assert_eq!(
        bulk(&mut c, &format!("GETEX k EXAT {past_s}")).as_deref(),
        Some("v")
    );
    assert_eq!(int(&mut c, "EXISTS k"), 0);
    // One millisecond ahead is not past.
    ok(&mut c, "SET k v");
    assert_eq!(int(&mut c, &format!("PEXPIREAT k {}", T0 + 1)), 1);
    assert_eq!(int(&mut c, "PTTL k"), 1);
}

#[test]
fn expire_by_another_client_aborts_exec_on_a_watched_key() {
    let (server, _clock) = start();
    let mut c1 = client(server.addr);
    let mut c2 = client(server.addr);
    ok(&mut c1, "SET k v");
    ok(&mut c1, "WATCH k");
    assert_eq!(int(&mut c2, "EXPIRE k 100"), 1);
    ok(&mut c1, "MULTI");
    cmd(&mut c1, "SET k x");
    assert_eq!(
        cmd(&mut c1, "EXEC"),
        Value::Null,
        "EXPIRE changed a watched key"
    );
    assert_eq!(bulk(&mut c1, "GET k").as_deref(), Some("v"));

    // PERSIST and GETEX by another client abort it too; commands that change nothing do not.
    for (change, aborts) in [
        ("PERSIST k", true),
        ("GETEX k PX 5000", true),
        ("GETEX k", false),
        ("EXPIRE k 100 NX", false),
        ("EXPIRE k 1 GT", false),
        ("TTL k", false),
        ("PEXPIREAT k 99 XX", true),
    ] {
        ok(&mut c1, "SET k v EX 100");
        ok(&mut c1, "WATCH k");
        cmd(&mut c2, change);
        ok(&mut c1, "MULTI");
        cmd(&mut c1, "PING");
        let reply = cmd(&mut c1, "EXEC");
        assert_eq!(reply == Value::Null, aborts, "{change}: {reply:?}");
    }
}

#[test]
fn a_watched_key_that_expires_aborts_exec() {
    let (server, clock) = start();
    let mut c = client(server.addr);
    ok(&mut c, "SET k v PX 1000");
    ok(&mut c, "WATCH k");
    clock.advance(999);
    ok(&mut c, "MULTI");
    cmd(&mut c, "SET j 1");
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Value::Array(vec![Value::Simple("OK".into())]),
        "not expired yet"
    );

    ok(&mut c, "WATCH k");
    clock.advance(1);
    ok(&mut c, "MULTI");
    cmd(&mut c, "SET j 2");
    assert_eq!(cmd(&mut c, "EXEC"), Value::Null, "the watched key expired");
    assert_eq!(bulk(&mut c, "GET j").as_deref(), Some("1"));

    // A key already expired (absent) when watched is no change when it stays absent.
    ok(&mut c, "WATCH k");
    clock.advance(5000);
    ok(&mut c, "MULTI");
    cmd(&mut c, "SET j 3");
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Value::Array(vec![Value::Simple("OK".into())])
    );
}

#[test]
fn commands_in_one_exec_see_one_instant() {
    let (server, _clock) = start();
    let mut c = client(server.addr);
    ok(&mut c, "MULTI");
    for line in [
        "SET k v PX 100",
        "PTTL k",
        "PEXPIRE k 50",
        "PTTL k",
        "INCR n",
        "PEXPIRE n 10",
        "INCR n",
        "PTTL n",
        "PEXPIREAT k 1",
        "GET k",
    ] {
        assert_eq!(cmd(&mut c, line), Value::Simple("QUEUED".into()), "{line}");
    }
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Value::Array(vec![
            Value::Simple("OK".into()),
            Value::Integer(100),
            Value::Integer(1),
            Value::Integer(50),
            Value::Integer(1),
            Value::Integer(1),
            Value::Integer(2),
            Value::Integer(10),
            Value::Integer(1),
            Value::Null,
        ])
    );
    assert_eq!(int(&mut c, "PTTL n"), 10);
    assert_eq!(int(&mut c, "EXISTS k"), 0);
}

#[test]
fn info_keyspace_counts_expiring_keys_and_their_average_ttl() {
    let (server, clock) = start();
    let mut c = client(server.addr);
    assert_eq!(keyspace_line(&mut c), None, "an empty store lists no db0");
    ok(&mut c, "SET a v EX 100");
    ok(&mut c, "SET b v EX 300");
    ok(&mut c, "SET c v");
    assert_eq!(
        keyspace_line(&mut c).as_deref(),
        Some("keys=3,expires=2,avg_ttl=200000")
    );
    clock.advance(50_000);
    assert_eq!(
        keyspace_line(&mut c).as_deref(),
        Some("keys=3,expires=2,avg_ttl=150000")
    );
    clock.advance(50_000);
    assert_eq!(
        keyspace_line(&mut c).as_deref(),
        Some("keys=2,expires=1,avg_ttl=200000"),
        "a expired"
    );
    assert_eq!(int(&mut c, "DBSIZE"), 2);
    assert_eq!(int(&mut c, "PERSIST b"), 1);
    assert_eq!(
        keyspace_line(&mut c).as_deref(),
        Some("keys=2,expires=0,avg_ttl=0")
    );
}
