//! CONFIG SET while serving (issue 37): each family of mutable settings takes effect on
//! connections that were open before the change — the client limits (`maxclients`,
//! `timeout`, the query and output buffer limits), the password (`requirepass`) and the slow
//! log (`slowlog-log-slower-than`, `slowlog-max-len`: SLOWLOG GET shows what Redis shows,
//! secrets redacted); several settings in one call apply all or none; an immutable or
//! unknown one is refused and changes nothing. The replies byte for byte are the compat
//! goldens' (`cases_ops.json`).

use std::io::Write;

use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;

use crate::bad_input::{
    client, expect_closed, expect_reply, info_u64, multibulk, raw, read_line, show,
    wait_connected_clients,
};

/// `args` on `c`, its reply (an error reply fails the test).
fn call(c: &mut Connection, args: &[&str]) -> Value {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.command(&a).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The error `args` answers on `c`.
fn refused(c: &mut Connection, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    match c.command(&a) {
        Err(quiver_client::Error::Server(e)) => e,
        other => panic!("{args:?} was not refused: {other:?}"),
    }
}

fn ok(c: &mut Connection, args: &[&str]) {
    assert_eq!(call(c, args), Value::Simple("OK".into()), "{args:?}");
}

fn get_config(c: &mut Connection, name: &str) -> String {
    match call(c, &["CONFIG", "GET", name]) {
        Value::Array(items) if items.len() == 2 => {
            String::from_utf8_lossy(items[1].as_bytes().unwrap_or_default()).into_owned()
        }
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

#[test]
fn client_limits_apply_to_open_connections() {
    let server = TestServer::start();
    let mut admin = client(server.addr);
    let mut idle = raw(server.addr);
    idle.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut idle, b"+PONG\r\n");
    let mut reader = client(server.addr);
    wait_connected_clients(&mut admin, 3);

    // maxclients: the three open ones stay, a fourth is refused; raised again, admitted.
    ok(&mut admin, &["CONFIG", "SET", "maxclients", "3"]);
    let mut fourth = raw(server.addr);
    fourth.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut fourth, b"-ERR max number of clients reached\r\n");
    ok(&mut admin, &["CONFIG", "SET", "maxclients", "10000"]);
    let mut fifth = raw(server.addr);
    fifth.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut fifth, b"+PONG\r\n");
    drop(fifth);

    // client-output-buffer-limit: a reply past the new limit closes the open connection.
    let big = "x".repeat(2 << 20);
    ok(&mut admin, &["SET", "big", &big]);
    assert_eq!(
        call(&mut reader, &["STRLEN", "big"]),
        Value::Integer(2 << 20)
    );
    ok(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0",
        ],
    );
    assert!(reader.command(&[b"GET", b"big"]).is_err(), "closed");
    ok(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 0 0 pubsub 32mb 8mb 60",
        ],
    );
    assert_eq!(
        get_config(&mut admin, "client-output-buffer-limit"),
        "normal 0 0 0"
    );
    let mut reader = client(server.addr);
    assert_eq!(
        call(&mut reader, &["GET", "big"])
            .as_bytes()
            .map(<[u8]>::len),
        Some(2 << 20)
    );

    // client-query-buffer-limit: a request growing past the new limit closes its connection.
    ok(
        &mut admin,
        &["CONFIG", "SET", "client-query-buffer-limit", "1mb"],
    );
    let mut writer = raw(server.addr);
    writer
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n")
        .unwrap();
    let _ = writer.write_all(&vec![b'v'; 1_500_000]);
    expect_closed(&mut writer);
    ok(
        &mut admin,
        &["CONFIG", "SET", "client-query-buffer-limit", "1gb"],
    );

    // timeout: the connection idle since before the change is closed under the new one
    // (and so is every other that waits as long, the admin's among them).
    ok(&mut admin, &["CONFIG", "SET", "timeout", "1"]);
    expect_closed(&mut idle);
    let mut admin = client(server.addr);
    ok(&mut admin, &["CONFIG", "SET", "timeout", "0"]);
    assert_eq!(get_config(&mut admin, "timeout"), "0");
}

#[test]
fn requirepass_applies_to_new_connections_and_keeps_the_open_ones() {
    let server = TestServer::start();
    let mut admin = client(server.addr);
    ok(&mut admin, &["CONFIG", "SET", "requirepass", "s3cret"]);
    // The open connection stays logged in, as in Redis.
    assert_eq!(call(&mut admin, &["PING"]), Value::Simple("PONG".into()));
    let mut late = raw(server.addr);
    late.write_all(&multibulk(&[b"PING"])).unwrap();
    let line = read_line(&mut late);
    assert!(line.starts_with(b"-NOAUTH"), "{}", show(&line));
    late.write_all(&multibulk(&[b"AUTH", b"wrong"])).unwrap();
    let line = read_line(&mut late);
    assert!(line.starts_with(b"-WRONGPASS"), "{}", show(&line));
    late.write_all(&multibulk(&[b"AUTH", b"s3cret"])).unwrap();
    expect_reply(&mut late, b"+OK\r\n");
    assert_eq!(get_config(&mut admin, "requirepass"), "s3cret");
    ok(&mut admin, &["CONFIG", "SET", "requirepass", ""]);
    let mut free = raw(server.addr);
    free.write_all(b"PING\r\n").unwrap();
    expect_reply(&mut free, b"+PONG\r\n");
}

#[test]
fn the_slow_log_follows_its_settings() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    ok(&mut c, &["CLIENT", "SETNAME", "slowpoke"]);
    ok(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    ok(&mut c, &["SLOWLOG", "RESET"]);
    ok(&mut c, &["SET", "k", "v"]);
    let auth = c.command(&[b"AUTH", b"nobody", b"secret"]).unwrap_err();
    assert!(auth.to_string().contains("WRONGPASS"), "{auth}");
    // RESET, SET, AUTH (a refused AUTH ran: it is logged, its arguments redacted); each
    // command is logged once it has run, so LEN counts those before it and GET sees LEN.
    assert_eq!(call(&mut c, &["SLOWLOG", "LEN"]), Value::Integer(3));
    let Value::Array(entries) = call(&mut c, &["SLOWLOG", "GET", "3"]) else {
        panic!("SLOWLOG GET")
    };
    assert_eq!(entries.len(), 3);
    let fields = |e: &Value| match e {
        Value::Array(f) if f.len() == 6 => f.clone(),
        other => panic!("entry {other:?}"),
    };
    let args = |f: &[Value]| match &f[3] {
        Value::Array(a) => a
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned())
            .collect::<Vec<_>>(),
        other => panic!("arguments {other:?}"),
    };
    let len = fields(&entries[0]);
    assert_eq!(args(&len), ["SLOWLOG", "LEN"]);
    let newest = fields(&entries[1]);
    let older = fields(&entries[2]);
    assert_eq!(args(&newest), ["AUTH", "(redacted)", "(redacted)"]);
    assert_eq!(args(&older), ["SET", "k", "v"]);
    let (Value::Integer(id_new), Value::Integer(id_old)) = (&newest[0], &older[0]) else {
        panic!("ids {newest:?}")
    };
    assert_eq!(id_new - id_old, 1);
    assert!(
        matches!(older[1], Value::Integer(t) if t > 1_700_000_000),
        "{older:?}"
    );
    assert!(matches!(older[2], Value::Integer(us) if us >= 0));
    assert!(older[4]
        .as_bytes()
        .is_some_and(|a| a.starts_with(b"127.0.0.1:")));
    assert_eq!(older[5].as_bytes(), Some(&b"slowpoke"[..]));

    // slowlog-max-len trims at the next command; -1 logs nothing more.
    ok(&mut c, &["CONFIG", "SET", "slowlog-max-len", "2"]);
    assert_eq!(call(&mut c, &["SLOWLOG", "LEN"]), Value::Integer(2));
    ok(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "slowlog-log-slower-than",
            "-1",
            "slowlog-max-len",
            "128",
        ],
    );
    ok(&mut c, &["SLOWLOG", "RESET"]);
    ok(&mut c, &["SET", "k", "v2"]);
    assert_eq!(call(&mut c, &["SLOWLOG", "LEN"]), Value::Integer(0));
    assert_eq!(call(&mut c, &["SLOWLOG", "GET"]), Value::Array(vec![]));
}

/// All or nothing, and only what may change: a call with any bad name or value changes
/// nothing, the first problem is the answer.
#[test]
fn config_set_is_all_or_nothing() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let e = refused(
        &mut c,
        &["CONFIG", "SET", "maxclients", "50", "databases", "4"],
    );
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set \
         immutable config"
    );
    let e = refused(
        &mut c,
        &["CONFIG", "SET", "timeout", "5", "maxclients", "abc"],
    );
    assert!(
        e.contains("'maxclients') - argument couldn't be parsed"),
        "{e}"
    );
    let e = refused(&mut c, &["CONFIG", "SET", "timeout", "5", "nosuch", "1"]);
    assert_eq!(
        e,
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(get_config(&mut c, "maxclients"), "10000");
    assert_eq!(get_config(&mut c, "timeout"), "0");
    assert_eq!(get_config(&mut c, "databases"), "16");
    // A node's own settings are shown, and those fixed at start immutable too.
    let e = refused(&mut c, &["CONFIG", "SET", "durability", "fsync"]);
    assert!(e.ends_with("can't set immutable config"), "{e}");
    ok(
        &mut c,
        &["CONFIG", "SET", "MAXCLIENTS", "500", "Timeout", "7"],
    );
    assert_eq!(get_config(&mut c, "maxclients"), "500");
    assert_eq!(get_config(&mut c, "timeout"), "7");
    let info = c.info(Some("clients")).unwrap();
    assert!(info.contains("maxclients:500"), "{info}");
}

/// CONFIG RESETSTAT: the counts INFO shows start again (commandstats, errorstats, totals), the
/// states stay (connected clients, the changes since the last save).
#[test]
fn config_resetstat_starts_the_counts_again() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    c.set("k", "v").unwrap();
    let _ = c.command(&[b"INCR", b"k"]).unwrap_err();
    let info = |c: &mut Connection, section: &str| c.info(Some(section)).unwrap();
    assert!(info(&mut c, "commandstats").contains("cmdstat_set:calls=1"));
    assert!(info(&mut c, "errorstats").contains("errorstat_ERR:count=1"));
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let stats = info(&mut c, "commandstats");
    assert!(!stats.contains("cmdstat_set"), "{stats}");
    assert!(!info(&mut c, "errorstats").contains("errorstat_ERR"));
    let persistence = info(&mut c, "persistence");
    assert!(
        persistence.contains("rdb_changes_since_last_save:2"),
        "{persistence}"
    );
    let clients = info(&mut c, "clients");
    assert!(clients.contains("connected_clients:1"), "{clients}");
    let e = refused(&mut c, &["CONFIG", "RESETSTAT", "x"]);
    assert_eq!(
        e,
        "ERR wrong number of arguments for 'config|resetstat' command"
    );
}

/// The latency monitor: off until `latency-monitor-threshold` is set; then a step of a run as
/// slow as it is a `command` event, which LATENCY LATEST, HISTORY, GRAPH and DOCTOR show and
/// RESET forgets.
#[test]
fn the_latency_monitor_names_slow_steps() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let wide: Vec<(String, String)> = (0..20_000)
        .map(|i| (format!("wide:{i}"), "x".repeat(256)))
        .collect();
    for chunk in wide.chunks(1000) {
        c.multi_set(chunk).unwrap();
    }
    assert_eq!(call(&mut c, &["LATENCY", "LATEST"]), Value::Array(vec![]));
    ok(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    // Overwrites, as one MSET of 20,000 keys: one step of well over a millisecond.
    c.multi_set(&wide).unwrap();
    let Value::Array(latest) = call(&mut c, &["LATENCY", "LATEST"]) else {
        panic!("LATENCY LATEST")
    };
    let command = latest
        .iter()
        .find_map(|e| match e {
            Value::Array(f) if f[0].as_bytes() == Some(&b"command"[..]) => Some(f.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no command event in {latest:?}"));
    assert!(
        matches!(command[2], Value::Integer(ms) if ms >= 1),
        "{command:?}"
    );
    assert!(
        matches!(command[3], Value::Integer(ms) if ms >= 1),
        "{command:?}"
    );
    let Value::Array(history) = call(&mut c, &["LATENCY", "HISTORY", "command"]) else {
        panic!("LATENCY HISTORY")
    };
    assert!(!history.is_empty());
    let text = |v: Value| String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
    let graph = text(call(&mut c, &["LATENCY", "GRAPH", "command"]));
    assert!(graph.starts_with("command - high "), "{graph}");
    let doctor = text(call(&mut c, &["LATENCY", "DOCTOR"]));
    assert!(doctor.contains("command:"), "{doctor}");
    // The MSETs' latencies by power-of-two microseconds, cumulative, as Redis replies.
    let Value::Array(h) = call(&mut c, &["LATENCY", "HISTOGRAM", "mset", "nosuch"]) else {
        panic!("LATENCY HISTOGRAM")
    };
    assert_eq!(h[0].as_bytes(), Some(&b"mset"[..]), "{h:?}");
    let Value::Array(fields) = &h[1] else {
        panic!("{h:?}")
    };
    assert_eq!(fields[1], Value::Integer(21), "{h:?}");
    let Value::Array(buckets) = &fields[3] else {
        panic!("{h:?}")
    };
    assert_eq!(
        buckets.last(),
        Some(&Value::Integer(21)),
        "cumulative: {h:?}"
    );
    assert!(matches!(call(&mut c, &["LATENCY", "RESET"]), Value::Integer(n) if n >= 1));
    ok(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "0"]);
    assert_eq!(call(&mut c, &["LATENCY", "LATEST"]), Value::Array(vec![]));
    let e = refused(&mut c, &["LATENCY", "GRAPH", "command"]);
    assert_eq!(e, "ERR No samples available for event 'command'");
}

/// CLIENT PAUSE WRITE: reads go on, a write waits — unapplied — until UNPAUSE; PAUSE ALL holds
/// reads too.
#[test]
fn client_pause_holds_writes_or_everything_until_unpause() {
    use std::sync::mpsc;
    let server = TestServer::start();
    let mut admin = client(server.addr);
    ok(&mut admin, &["SET", "k", "before"]);
    ok(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
    let mut reader = client(server.addr);
    assert_eq!(
        call(&mut reader, &["GET", "k"]).as_bytes(),
        Some(&b"before"[..])
    );
    let (done, finished) = mpsc::channel();
    let addr = server.addr;
    let writer = std::thread::spawn(move || {
        let mut w = client(addr);
        w.set("k", "after").unwrap();
        done.send(()).unwrap();
    });
    // The write is held: a read meanwhile sees the old value.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        finished.try_recv().is_err(),
        "the write ran during the pause"
    );
    assert_eq!(
        call(&mut reader, &["GET", "k"]).as_bytes(),
        Some(&b"before"[..])
    );
    ok(&mut admin, &["CLIENT", "UNPAUSE"]);
    finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the write ran after UNPAUSE");
    writer.join().unwrap();
    assert_eq!(
        call(&mut reader, &["GET", "k"]).as_bytes(),
        Some(&b"after"[..])
    );

    // ALL: a read waits too, until the pause's end (an UNPAUSE would wait as well, as in
    // Redis 7.0).
    ok(&mut admin, &["CLIENT", "PAUSE", "2000", "ALL"]);
    let (done, finished) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let v = call(&mut reader, &["GET", "k"]);
        done.send(v).unwrap();
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        finished.try_recv().is_err(),
        "the read ran during PAUSE ALL"
    );
    let v = finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the read ran once the pause ended");
    assert_eq!(v.as_bytes(), Some(&b"after"[..]));
    reader.join().unwrap();
}

/// DEBUG where `enable-debug-command` allows it: SLEEP stalls the connection's thread (the
/// latency monitor names it), OBJECT shows a key as Redis's does; refused where it does not.
#[test]
fn debug_follows_enable_debug_command() {
    use quiver_service::config::DebugCommand;
    let server = TestServer::start_with(|c| c.service.enable_debug_command = DebugCommand::Local);
    let mut c = client(server.addr);
    ok(&mut c, &["SET", "k", "hello"]);
    let object = call(&mut c, &["DEBUG", "OBJECT", "k"]);
    assert_eq!(
        object,
        Value::Simple(
            "Value at:0x0 refcount:1 encoding:embstr serializedlength:5 lru:0 \
             lru_seconds_idle:0"
                .into()
        )
    );
    assert_eq!(
        refused(&mut c, &["DEBUG", "OBJECT", "nokey"]),
        "ERR no such key"
    );
    ok(
        &mut c,
        &["CONFIG", "SET", "latency-monitor-threshold", "20"],
    );
    ok(&mut c, &["DEBUG", "SLEEP", "0.05"]);
    let Value::Array(latest) = call(&mut c, &["LATENCY", "LATEST"]) else {
        panic!("LATENCY LATEST")
    };
    assert!(
        latest.iter().any(|e| matches!(e, Value::Array(f)
            if f[0].as_bytes() == Some(&b"command"[..]) && matches!(f[2], Value::Integer(ms) if ms >= 50))),
        "{latest:?}"
    );
    let e = refused(&mut c, &["DEBUG", "JMAP"]);
    assert!(e.contains("Try DEBUG HELP"), "{e}");

    let server = TestServer::start();
    let mut c = client(server.addr);
    let e = refused(&mut c, &["DEBUG", "SLEEP", "0"]);
    assert!(e.starts_with("ERR DEBUG command not allowed."), "{e}");
}

/// MONITOR streams every client's commands as Redis does (secrets redacted, admin commands
/// left out); the monitoring connection may PING and QUIT, nothing else.
#[test]
fn monitor_streams_the_commands_of_every_client() {
    use std::io::Write;
    let server = TestServer::start();
    let mut m = raw(server.addr);
    m.write_all(b"MONITOR\r\n").unwrap();
    expect_reply(&mut m, b"+OK\r\n");
    let mut c = client(server.addr);
    ok(&mut c, &["SET", "k", "v 1"]);
    assert_eq!(call(&mut c, &["GET", "k"]).as_bytes(), Some(&b"v 1"[..]));
    let _ = c.command(&[b"AUTH", b"someone", b"secret"]).unwrap_err();
    call(&mut c, &["CONFIG", "GET", "maxclients"]);
    ok(&mut c, &["SELECT", "2"]);
    ok(&mut c, &["SET", "k2", "x"]);
    let lines: Vec<String> = (0..5)
        .map(|_| String::from_utf8(read_line(&mut m)).unwrap())
        .collect();
    let tails: Vec<&str> = lines
        .iter()
        .map(|l| {
            assert!(
                l.starts_with('+') && l.contains(" [") && l.contains(" 127.0.0.1:"),
                "{l}"
            );
            &l[l.find("] ").unwrap() + 2..]
        })
        .collect();
    assert_eq!(
        tails,
        [
            "\"SET\" \"k\" \"v 1\"\r\n",
            "\"GET\" \"k\"\r\n",
            "\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n",
            "\"SELECT\" \"2\"\r\n",
            "\"SET\" \"k2\" \"x\"\r\n",
        ]
    );
    assert!(lines[4].contains(" [2 127.0.0.1:"), "{}", lines[4]);
    m.write_all(b"PING\r\nGET k\r\nQUIT\r\n").unwrap();
    expect_reply(
        &mut m,
        b"+PONG\r\n-ERR Replica can't interact with the keyspace\r\n+OK\r\n",
    );
    expect_closed(&mut m);
}

/// A node's own settings change while serving: `max-vector-width` bounds the very next
/// pipelined run's engine vectors; compaction's trigger and pacing are the store's at once;
/// values out of range and the settings fixed at start are refused, changing nothing.
#[test]
fn a_nodes_settings_change_while_serving() {
    let server = TestServer::start();
    let mut admin = client(server.addr);
    let mut piped = raw(server.addr);
    ok(&mut admin, &["CONFIG", "SET", "max-vector-width", "2"]);
    ok(&mut admin, &["CONFIG", "RESETSTAT"]);
    let run: Vec<u8> = (0..8)
        .flat_map(|i| multibulk(&[b"SET", format!("k{i}").as_bytes(), b"v"]))
        .collect();
    piped.write_all(&run).unwrap();
    expect_reply(&mut piped, &b"+OK\r\n".repeat(8));
    let vectors = info_u64(&mut admin, "vectors", "vectors");
    assert!(
        vectors >= 4,
        "8 SETs in vectors of at most 2: {vectors} vectors"
    );
    assert_eq!(
        info_u64(&mut admin, "vectors", "vector_width_le_2"),
        vectors
    );
    assert_eq!(get_config(&mut admin, "max-vector-width"), "2");

    ok(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "compaction-garbage-ratio",
            "0",
            "compaction-cpu-share",
            "1",
        ],
    );
    assert_eq!(get_config(&mut admin, "compaction-garbage-ratio"), "0");
    assert_eq!(get_config(&mut admin, "compaction-cpu-share"), "1");
    for (args, why) in [
        (
            ["compaction-garbage-ratio", "1"],
            "compaction-garbage-ratio') - argument must be below 1",
        ),
        (
            ["compaction-cpu-share", "0"],
            "compaction-cpu-share') - argument must be in (0, 1]",
        ),
        (
            ["max-vector-width", "0"],
            "max-vector-width') - argument must be between 1 and 1048576 inclusive",
        ),
        (
            ["coalesce", "sometimes"],
            "coalesce') - argument(s) must be one of the following: off, adaptive",
        ),
        (
            ["segment-size", "1mb"],
            "segment-size') - can't set immutable config",
        ),
    ] {
        let e = refused(
            &mut admin,
            &["CONFIG", "SET", args[0], args[1], "timeout", "9"],
        );
        assert!(e.ends_with(why), "{args:?}: {e}");
    }
    // Nothing of a refused call was applied.
    assert_eq!(get_config(&mut admin, "timeout"), "0");
    // The intermediate queue on and off: GETs answer alike either way.
    for mode in ["adaptive", "off"] {
        ok(&mut admin, &["CONFIG", "SET", "coalesce", mode]);
        assert_eq!(get_config(&mut admin, "coalesce"), mode);
        let run: Vec<u8> = (0..8)
            .flat_map(|i| multibulk(&[b"GET", format!("k{i}").as_bytes()]))
            .collect();
        piped.write_all(&run).unwrap();
        expect_reply(&mut piped, &b"$1\r\nv\r\n".repeat(8));
    }
    assert_eq!(get_config(&mut admin, "max-vector-width"), "2");
    assert_eq!(get_config(&mut admin, "compaction-garbage-ratio"), "0");
}

/// CONFIG SET acllog-max-len bounds ACL LOG from the next entry on.
#[test]
fn the_acl_log_keeps_acllog_max_len_entries() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    ok(&mut c, &["CONFIG", "SET", "acllog-max-len", "2"]);
    for user in ["a", "b", "c"] {
        let failed = c.command(&[b"AUTH", user.as_bytes(), b"wrong"]);
        assert!(
            format!("{failed:?}").contains("WRONGPASS"),
            "AUTH {user}: {failed:?}"
        );
    }
    match call(&mut c, &["ACL", "LOG"]) {
        Value::Array(entries) => assert_eq!(entries.len(), 2, "{entries:?}"),
        other => panic!("ACL LOG: {other:?}"),
    }
    assert_eq!(get_config(&mut c, "acllog-max-len"), "2");
}
