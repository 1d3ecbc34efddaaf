//! Serving threads: each connection is served on one thread's event loop with others, and a
//! command that waits for another connection must let that connection run when it shares the
//! thread (CLIENT KILL's victim).

use std::io::Write;

use quiver_node::testing::TestServer;

use crate::bad_input::{expect_closed, expect_reply, info_u64, raw, read_bulk, read_line, show};

/// On one serving thread the killer and its victim share the event loop: the reply to CLIENT
/// KILL comes only once the victim is disconnected (as with Redis), so the killer's next
/// CLIENT LIST no longer shows it, and the victim reads the end of its stream.
#[test]
fn client_kill_of_a_connection_on_the_killers_thread_answers_once_it_is_gone() {
    let server = TestServer::start_with(|c| c.service.threads = 1);
    for round in 0..20 {
        let mut victim = raw(server.addr);
        victim.write_all(b"CLIENT ID\r\n").unwrap();
        let line = read_line(&mut victim);
        let id = show(&line[1..line.len() - 2]);
        let mut killer = raw(server.addr);
        killer
            .write_all(format!("CLIENT KILL ID {id}\r\nCLIENT LIST\r\n").as_bytes())
            .unwrap();
        expect_reply(&mut killer, b":1\r\n");
        let list = show(&read_bulk(&mut killer));
        assert!(
            !list.contains(&format!("id={id} ")),
            "round {round}: client {id} still listed after CLIENT KILL answered:\n{list}"
        );
        expect_closed(&mut victim);
    }
}

/// INFO stats shows how long serving threads were held: runs over 5 and 25 ms and the
/// longest, and the same of their wake meters and of their waits for a core.
#[test]
fn info_shows_the_serving_threads_delays() {
    let server = TestServer::start_with(|c| c.service.threads = 1);
    let mut conn = crate::bad_input::client(server.addr);
    // Runs on the thread, so that its wake meter ticks.
    for _ in 0..20 {
        conn.ping().unwrap();
    }
    // Each delay's counts over 5 ms and over 25 ms, and its longest.
    for (many, kind) in [("runs", "run"), ("wakes", "wake"), ("offcore", "offcore")] {
        let over_5 = info_u64(&mut conn, "stats", &format!("serving_{many}_over_5ms"));
        let over_25 = info_u64(&mut conn, "stats", &format!("serving_{many}_over_25ms"));
        let max_us = info_u64(&mut conn, "stats", &format!("serving_{kind}_max_us"));
        assert!(
            over_25 <= over_5,
            "{kind}: {over_25} over 25 ms but {over_5} over 5 ms"
        );
        assert!(
            over_5 == 0 || max_us > 5_000,
            "{kind}: {over_5} over 5 ms but the longest {max_us} us"
        );
    }
    // The INFO commands themselves were runs: the longest is known.
    assert!(info_u64(&mut conn, "stats", "serving_run_max_us") > 0);
}

/// `fsync` mode: the MSETs that several connections of one serving thread hand over in one
/// turn are committed as one batch (`exec::combine`); see `msets_committed_together`.
#[test]
fn msets_of_many_connections_on_one_thread_are_committed_together() {
    let mut server = TestServer::start_with(|c| {
        c.service.threads = 1;
        c.node.durability = quiver_store::Durability::Fsync;
    });
    msets_committed_together(&mut server);
}

/// `os` mode with several serving threads: each thread combines its connections' MSETs of a
/// turn as in `fsync` mode (its batch takes the partitions' locks once a turn).
#[test]
fn msets_of_many_connections_on_two_threads_are_committed_together_in_os_mode() {
    let mut server = TestServer::start_with(|c| {
        c.service.threads = 2;
        c.node.durability = quiver_store::Durability::Os;
    });
    msets_committed_together(&mut server);
}

/// Eight connections pipelining MSETs while a reader reads: engine vectors wider than one
/// connection's group (64 keys here) appear (the writers' rounds are repeated until one does,
/// a bounded number of times: without the sync waits of `fsync` mode, connections of a thread
/// need not meet in a turn every round), every MSET is answered, each connection reads its
/// own writes back at once, the reader never sees half of any MSET, and all of it is there
/// after a restart.
fn msets_committed_together(server: &mut TestServer) {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 100;
    /// Times the writers' rounds run at most, until a combined batch shows.
    const TRIES: usize = 20;
    let mut wider = false;
    for _ in 0..TRIES {
        write_msets_while_reading(server, WRITERS, ROUNDS);
        let mut conn = crate::bad_input::client(server.addr);
        let text = conn.info(Some("vectors")).unwrap();
        wider = text
            .lines()
            .filter_map(|l| l.strip_prefix("vector_width_le_"))
            .filter_map(|l| l.split_once(':'))
            .any(|(bound, _)| bound == "inf" || bound.parse::<u64>().is_ok_and(|b| b > 64));
        if wider {
            break;
        }
    }
    assert!(
        wider,
        "no vector wider than one connection's group in {TRIES} tries"
    );
    server.restart();
    let mut c = crate::bad_input::client(server.addr);
    let last = (ROUNDS - 1).to_string();
    for w in 0..WRITERS {
        for k in 0..64 {
            let got = c.get(format!("w{w}:k{k}")).unwrap();
            assert_eq!(got.as_deref(), Some(last.as_bytes()), "w{w}:k{k}");
        }
    }
}

/// `writers` connections, each `rounds` times pipelining 4 MSETs of 16 pairs (values: the
/// round) and an MGET of its first and last key, which must see the round; meanwhile a reader
/// of each writer's first and 16th key (one MSET sets both) never finds them different.
fn write_msets_while_reading(server: &TestServer, writers: usize, rounds: usize) {
    let start = std::sync::Arc::new(std::sync::Barrier::new(writers + 1));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (addr, start) = (server.addr, start.clone());
            std::thread::spawn(move || {
                let mut c = crate::bad_input::client(addr);
                start.wait();
                for round in 0..rounds {
                    let value = round.to_string();
                    let mut p = c.pipeline();
                    // 4 MSETs of 16 pairs: one group of 64 keys (`max-vector-width`).
                    for m in 0..4 {
                        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
                        for i in 0..16 {
                            args.push(format!("w{w}:k{}", m * 16 + i).into_bytes());
                            args.push(value.clone().into_bytes());
                        }
                        let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                        p.command(&args);
                    }
                    p.command(&[
                        b"MGET",
                        format!("w{w}:k0").as_bytes(),
                        format!("w{w}:k63").as_bytes(),
                    ]);
                    let replies = p.execute().unwrap();
                    for r in &replies[..4] {
                        assert!(r.is_ok(), "writer {w} round {round}: {r:?}");
                    }
                    let both = quiver_client::Value::Array(vec![
                        quiver_client::Value::Bulk(value.clone().into()),
                        quiver_client::Value::Bulk(value.clone().into()),
                    ]);
                    assert_eq!(
                        replies[4].as_ref().unwrap(),
                        &both,
                        "writer {w} round {round}"
                    );
                }
            })
        })
        .collect();
    let mut reader = crate::bad_input::client(server.addr);
    start.wait();
    let mut checks = 0;
    while threads.iter().any(|t| !t.is_finished()) {
        for w in 0..writers {
            let got = reader
                .multi_get(&[format!("w{w}:k0"), format!("w{w}:k15")])
                .unwrap();
            assert_eq!(got[0], got[1], "writer {w}: half an MSET seen");
            checks += 1;
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(checks > 0);
}

/// `durability = fsync` on serving threads: each connection awaits its writes' fdatasyncs
/// (no thread blocked on the disk), so several connections on one thread share them. Every
/// kind of write — plain SET vectors, pipelines of SETs over many partitions, MSET batches,
/// read-modify-write commands, EXEC — is answered, in order, and is there after a restart.
#[test]
fn fsync_writes_from_many_connections_on_one_thread_are_answered_and_kept() {
    let mut server = TestServer::start_with(|c| {
        c.service.threads = 1;
        c.node.durability = quiver_store::Durability::Fsync;
    });
    let writers: Vec<_> = (0..6)
        .map(|w| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let mut c = crate::bad_input::client(addr);
                for round in 0..20 {
                    let mut p = c.pipeline();
                    for i in 0..16 {
                        p.command(&[
                            b"SET",
                            format!("w{w}:k{i}").as_bytes(),
                            format!("{round}").as_bytes(),
                        ]);
                    }
                    p.command(&[
                        b"MSET",
                        format!("w{w}:m1").as_bytes(),
                        b"a",
                        format!("w{w}:m2").as_bytes(),
                        format!("{round}").as_bytes(),
                    ]);
                    p.command(&[b"INCR", format!("w{w}:n").as_bytes()]);
                    p.command(&[b"GET", format!("w{w}:k3").as_bytes()]);
                    let replies = p.execute().unwrap();
                    assert_eq!(replies.len(), 19);
                    for r in &replies[..17] {
                        assert!(r.is_ok(), "writer {w} round {round}: {r:?}");
                    }
                    assert_eq!(
                        replies[17].as_ref().unwrap(),
                        &quiver_client::Value::Integer(round + 1)
                    );
                    assert_eq!(
                        replies[18].as_ref().unwrap(),
                        &quiver_client::Value::Bulk(round.to_string().into())
                    );
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    server.restart();
    let mut c = crate::bad_input::client(server.addr);
    for w in 0..6 {
        for i in 0..16 {
            assert_eq!(
                c.get(format!("w{w}:k{i}")).unwrap().as_deref(),
                Some(&b"19"[..])
            );
        }
        assert_eq!(
            c.get(format!("w{w}:m2")).unwrap().as_deref(),
            Some(&b"19"[..])
        );
        assert_eq!(
            c.get(format!("w{w}:n")).unwrap().as_deref(),
            Some(&b"20"[..])
        );
    }
}

/// `fsync` on serving threads, an fdatasync that fails: the write was applied but may be
/// lost, so its connection closes without the run's replies (its outcome is unknown, as from
/// any lost connection); the partition refuses writes from then on with a clear error, its
/// keys still read, and the other partitions take writes.
#[test]
fn a_failed_fdatasync_leaves_the_outcome_unknown_and_stops_the_partitions_writes() {
    use quiver_store::faults::{self, Fault, FileOp};
    let mut server = TestServer::start_with(|c| {
        c.service.threads = 1;
        c.node.durability = quiver_store::Durability::Fsync;
        c.node.partitions = 4;
    });
    let in_partition = |p: u32, n: usize| {
        (0..)
            .map(|i| format!("fk:{i}"))
            .filter(|k| quiver_store::slot::even_layout_partition(k.as_bytes(), 4) == p)
            .nth(n)
            .unwrap()
    };
    let (a, b, other) = (in_partition(1, 0), in_partition(1, 1), in_partition(2, 0));
    let mut c = crate::bad_input::client(server.addr);
    c.set(&a, "acknowledged").unwrap();
    let dir = quiver_store::layout::partition_dir(server.dir(), 1);
    let mut fired = false;
    let injection = faults::inject(&dir, move |op, _, _| {
        let fire = op == FileOp::Sync && !fired;
        fired |= fire;
        fire.then_some(Fault::Eio)
    });
    let mut s = raw(server.addr);
    s.write_all(&crate::bad_input::multibulk(&[
        b"SET",
        b.as_bytes(),
        b"unacknowledged",
    ]))
    .unwrap();
    expect_closed(&mut s);
    assert_eq!(injection.injected(), 1);
    drop(injection);
    let err = c.set(&a, "refused").unwrap_err().to_string();
    assert!(err.contains("fdatasync"), "{err}");
    assert_eq!(c.get(&a).unwrap().as_deref(), Some(&b"acknowledged"[..]));
    c.set(&other, "elsewhere").unwrap();
    // Shutting down cannot make the failed partition durable: the server says so.
    let end = server.stop().unwrap_err().to_string();
    assert!(end.contains("fdatasync"), "{end}");
}
