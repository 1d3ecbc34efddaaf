//! SAVE, BGSAVE and LASTSAVE on a node (issue 37): a background save runs beside a write
//! load that keeps being served, one at a time (another is refused, or scheduled after it),
//! and INFO's `# Persistence` shows it as Redis's tools read it. (SAVE then kill -9, and
//! SHUTDOWN, reopening with nothing to replay: the server-process tests.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use quiver_client::Value;
use quiver_node::testing::TestServer;

use crate::bad_input::{client, info_field, wait_until};

fn simple(v: &Value) -> &str {
    match v {
        Value::Simple(s) => s,
        other => panic!("a simple string expected, got {other:?}"),
    }
}

#[test]
fn bgsave_runs_beside_a_write_load_one_at_a_time() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let Value::Integer(started_at) = c.command(&[b"LASTSAVE"]).unwrap() else {
        panic!("LASTSAVE")
    };
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written, addr) = (stop.clone(), written.clone(), server.addr);
        std::thread::spawn(move || {
            let mut w = client(addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                w.set(format!("k{}", i % 5000), format!("v{i}")).unwrap();
                i += 1;
                written.store(i, Ordering::Relaxed);
            }
        })
    };
    wait_until("the writer's first writes", || {
        written.load(Ordering::Relaxed) > 500
    });
    let mut saves = 0;
    for _ in 0..5 {
        let reply = c.command(&[b"BGSAVE"]);
        match reply {
            Ok(v) if simple(&v) == "Background saving started" => saves += 1,
            Err(quiver_client::Error::Server(e)) => {
                assert_eq!(e, "ERR Background save already in progress")
            }
            other => panic!("BGSAVE answered {other:?}"),
        }
        let scheduled = c.command(&[b"BGSAVE", b"SCHEDULE"]).unwrap();
        assert!(
            ["Background saving started", "Background saving scheduled"]
                .contains(&simple(&scheduled)),
            "{scheduled:?}"
        );
        // The writer goes on meanwhile.
        let before = written.load(Ordering::Relaxed);
        wait_until("writes during the save", || {
            written.load(Ordering::Relaxed) > before + 50
        });
        wait_until("the background saves to end", || {
            info_field(&mut c, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("0")
        });
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(saves >= 1);
    let status = info_field(&mut c, "persistence", "rdb_last_bgsave_status");
    assert_eq!(status.as_deref(), Some("ok"));
    let secs = info_field(&mut c, "persistence", "rdb_last_bgsave_time_sec").unwrap();
    assert!(secs.parse::<i64>().unwrap() >= 0, "{secs}");
    let Value::Integer(last) = c.command(&[b"LASTSAVE"]).unwrap() else {
        panic!("LASTSAVE")
    };
    assert!(last >= started_at);
    // A foreground save: no change left since it.
    assert_eq!(simple(&c.command(&[b"SAVE"]).unwrap()), "OK");
    let changes = info_field(&mut c, "persistence", "rdb_changes_since_last_save");
    assert_eq!(changes.as_deref(), Some("0"));
    c.set("one", "more").unwrap();
    let changes = info_field(&mut c, "persistence", "rdb_changes_since_last_save");
    assert_eq!(changes.as_deref(), Some("1"));
}
