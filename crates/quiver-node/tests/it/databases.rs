//! Databases (SELECT) across connections, restarts and the server's settings. Single-connection
//! replies, byte for byte, are in the golden sessions (`select/`, `move/`, `swapdb/`,
//! `flushdb/per_db`, ...).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use quiver_client::{Connection, Value};
use quiver_node::node_config::Coalesce;
use quiver_node::testing::TestServer;

fn connect(server: &TestServer) -> Connection {
    Connection::connect(&server.addr.to_string()).expect("connect")
}

fn ok() -> Value {
    Value::Simple("OK".into())
}

fn select(c: &mut Connection, db: u32) {
    assert_eq!(
        c.command(&[b"SELECT", db.to_string().as_bytes()]).unwrap(),
        ok()
    );
}

/// The error text a command is refused with.
fn refusal(c: &mut Connection, args: &[&[u8]]) -> String {
    c.command(args).unwrap_err().to_string()
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    c.get(key)
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

/// Each connection reads and writes the database it selected; a key of one database is not
/// another's, through every path (vectors, transactions, keyspace commands).
#[test]
fn each_connection_addresses_its_own_database() {
    let server = TestServer::start();
    let mut c0 = connect(&server);
    let mut c3 = connect(&server);
    select(&mut c3, 3);
    c0.set("k", "zero").unwrap();
    c3.set("k", "three").unwrap();
    c3.multi_set(&[("a", "1"), ("b", "2")]).unwrap();
    assert_eq!(get(&mut c0, "k").as_deref(), Some("zero"));
    assert_eq!(get(&mut c3, "k").as_deref(), Some("three"));
    assert_eq!(
        c0.multi_get(&["a", "b", "k"]).unwrap(),
        vec![None, None, Some(bytes::Bytes::from("zero"))]
    );
    assert_eq!(c0.command(&[b"DBSIZE"]).unwrap(), Value::Integer(1));
    assert_eq!(c3.command(&[b"DBSIZE"]).unwrap(), Value::Integer(3));
    assert_eq!(c3.command(&[b"INCR", b"a"]).unwrap(), Value::Integer(2));
    assert_eq!(
        c0.command(&[b"DEL", b"a", b"k"]).unwrap(),
        Value::Integer(1)
    );
    assert_eq!(get(&mut c3, "a").as_deref(), Some("2"));

    let info = c0.info(Some("keyspace")).unwrap();
    assert!(!info.contains("db0:"), "{info}");
    assert!(info.contains("db3:keys=3,expires=0,avg_ttl=0"), "{info}");
    // CLIENT LIST shows each connection's database.
    let list = c0.command(&[b"CLIENT", b"LIST"]).unwrap();
    let list = String::from_utf8(list.as_bytes().unwrap().to_vec()).unwrap();
    assert_eq!(list.matches(" db=3 ").count(), 1, "{list}");
    assert_eq!(list.matches(" db=0 ").count(), 1, "{list}");
}

/// A WATCH is on a key of one database: another client's write to the same key in another
/// database leaves EXEC alone, a write in the watched database aborts it, and so do SWAPDB
/// and FLUSHDB of that database when the key exists.
#[test]
fn watch_is_per_database_across_clients() {
    let server = TestServer::start();
    let mut a = connect(&server);
    let mut b = connect(&server);
    select(&mut a, 1);
    let exec_after = |a: &mut Connection, b: &mut Connection, other: &[&[u8]]| {
        a.command(&[b"WATCH", b"w"]).unwrap();
        b.command(other).unwrap();
        a.command(&[b"MULTI"]).unwrap();
        a.command(&[b"SET", b"w", b"mine"]).unwrap();
        a.command(&[b"EXEC"]).unwrap()
    };
    // b is in database 0.
    let applied = exec_after(&mut a, &mut b, &[b"SET", b"w", b"other"]);
    assert_eq!(applied, Value::Array(vec![ok()]));
    b.command(&[b"SELECT", b"1"]).unwrap();
    let aborted = exec_after(&mut a, &mut b, &[b"SET", b"w", b"other"]);
    assert_eq!(aborted, Value::Null);
    let aborted = exec_after(&mut a, &mut b, &[b"SWAPDB", b"1", b"2"]);
    assert_eq!(aborted, Value::Null, "SWAPDB of the watched, existing key");
    // Database 2 holds w now: swapping it back brings an existing key into database 1.
    let aborted = exec_after(&mut a, &mut b, &[b"SWAPDB", b"2", b"1"]);
    assert_eq!(aborted, Value::Null, "the key exists in the other database");
    assert_eq!(get(&mut a, "w").as_deref(), Some("other"));
    let aborted = exec_after(&mut a, &mut b, &[b"FLUSHDB"]);
    assert_eq!(aborted, Value::Null, "FLUSHDB of the watched, existing key");
    let applied = exec_after(&mut a, &mut b, &[b"FLUSHDB"]);
    assert_eq!(
        applied,
        Value::Array(vec![ok()]),
        "FLUSHDB of a watched key that did not exist"
    );
    assert_eq!(get(&mut a, "w").as_deref(), Some("mine"));

    // An EXEC that a watched key aborts runs none of its commands, SELECT included.
    a.command(&[b"WATCH", b"w"]).unwrap();
    b.set("w", "again").unwrap();
    a.command(&[b"MULTI"]).unwrap();
    a.command(&[b"SELECT", b"5"]).unwrap();
    assert_eq!(a.command(&[b"EXEC"]).unwrap(), Value::Null);
    assert_eq!(
        get(&mut a, "w").as_deref(),
        Some("again"),
        "still database 1"
    );
}

/// Keys, expiry times, SWAPDB and FLUSHDB of every database survive a restart.
#[test]
fn databases_survive_a_restart() {
    let mut server = TestServer::start();
    {
        let mut c = connect(&server);
        for db in 0..16u32 {
            select(&mut c, db);
            c.set("k", format!("v{db}")).unwrap();
        }
        c.command(&[b"SET", b"t", b"x", b"EXAT", b"4000000000"])
            .unwrap();
        c.command(&[b"SWAPDB", b"15", b"1"]).unwrap();
        select(&mut c, 2);
        c.command(&[b"FLUSHDB"]).unwrap();
        c.command(&[b"MOVE", b"k", b"0"]).unwrap();
    }
    server.restart();
    let mut c = connect(&server);
    let mut want: Vec<Option<String>> = (0..16).map(|db| Some(format!("v{db}"))).collect();
    want.swap(1, 15);
    want[2] = None;
    for (db, want) in want.iter().enumerate() {
        select(&mut c, db as u32);
        assert_eq!(get(&mut c, "k").as_ref(), want.as_ref(), "database {db}");
    }
    select(&mut c, 1);
    assert_eq!(
        c.command(&[b"EXPIRETIME", b"t"]).unwrap(),
        Value::Integer(4_000_000_000)
    );
    select(&mut c, 15);
    assert_eq!(c.command(&[b"DBSIZE"]).unwrap(), Value::Integer(1));
}

/// `databases` sets how many SELECT may choose from; CONFIG GET reports it.
#[test]
fn the_databases_setting_bounds_select() {
    let server = TestServer::start_with(|c| c.service.databases = 4);
    let mut c = connect(&server);
    select(&mut c, 3);
    for args in [
        &[&b"SELECT"[..], b"4"][..],
        &[b"MOVE", b"k", b"4"],
        &[b"SWAPDB", b"0", b"4"],
    ] {
        let e = refusal(&mut c, args);
        assert!(e.contains("ERR DB index is out of range"), "{args:?}: {e}");
    }
    assert_eq!(
        c.command(&[b"CONFIG", b"GET", b"databases"]).unwrap(),
        Value::Array(vec![
            Value::Bulk("databases".into()),
            Value::Bulk("4".into())
        ])
    );
}

/// With the intermediate queue on, GETs of a database other than 0 are answered from their
/// own database (the queue serves database 0).
#[test]
fn the_intermediate_queue_reads_the_selected_database() {
    let server = TestServer::start_with(|c| c.node.coalesce = Coalesce::Adaptive);
    let mut c0 = connect(&server);
    let mut c5 = connect(&server);
    select(&mut c5, 5);
    c0.set("k", "zero").unwrap();
    c5.set("k", "five").unwrap();
    for _ in 0..20 {
        assert_eq!(get(&mut c0, "k").as_deref(), Some("zero"));
        assert_eq!(get(&mut c5, "k").as_deref(), Some("five"));
    }
}

/// Readers of two databases never see a SWAPDB half done: a reader of database 0 sees the
/// one database's pair of keys or the other's, never one of each, while SWAPDB runs over and
/// over.
#[test]
fn swapdb_is_atomic_for_readers() {
    let server = TestServer::start();
    let mut w = connect(&server);
    w.multi_set(&[("x", "A"), ("y", "A")]).unwrap();
    select(&mut w, 1);
    w.multi_set(&[("x", "B"), ("y", "B")]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut r = connect(&server);
            let stop = stop.clone();
            thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) || reads == 0 {
                    let v = r.multi_get(&["x", "y"]).unwrap();
                    assert!(v[0].is_some() && v[0] == v[1], "half a swap: {v:?}");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for _ in 0..200 {
        w.command(&[b"SWAPDB", b"0", b"1"]).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // 200 swaps: back where it started.
    assert_eq!(get(&mut w, "x").as_deref(), Some("B"));
}
