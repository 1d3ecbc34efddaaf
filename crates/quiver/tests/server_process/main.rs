//! `quiver serve` as a real process: kill -9 in the middle of a write load loses no
//! acknowledged write and tears no MSET; SIGTERM and SIGINT shut down cleanly (exit 0) and the
//! next start reopens from the checkpoint; `--config` files and the flags that override them;
//! `redis-benchmark` runs against it without an error. The regressions of issue 8 are in
//! modules named for the fault: `deletes` (a hang after mass deletes), `full_disk` (on a real
//! tmpfs), `damage` (a damaged log refused, checked and repaired).
//!
//! Every server is started with `--port 0` on a temporary directory; the port is read from the
//! `quiver listening on ADDR` line on stdout. Every process started here is stopped here (a
//! server still running when its handle is dropped is killed).

// The helpers outside the tests unwrap too: a failure there is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use quiver_client::{ClientOptions, Connection, Value};
use quiver_testkit::acked::Writes;
use quiver_testkit::process::{self, Guard};
use quiver_testkit::rng::{seed_from_env, Rng};
use quiver_testkit::serve::{self, serve_command};
use quiver_testkit::{tool, WAIT};

mod damage;
mod deletes;
mod full_disk;
mod kill_loop;

/// The seed of the kill tests' timing (the kill loop's mix too).
const SEED_ENV: &str = "QUIVER_SERVER_KILL_SEED";

/// A running `quiver serve`, killed when dropped.
struct Served {
    process: Guard,
    /// `127.0.0.1:PORT`.
    addr: String,
    stderr_path: PathBuf,
    /// Lines printed on stdout after the first one (kept so the reading thread keeps
    /// draining the pipe).
    _stdout: mpsc::Receiver<String>,
}

/// Starts `quiver --dir DIR serve --port 0 EXTRA...` and waits for its listening line.
fn serve(dir: &Path, logs: &Path, extra: &[&str]) -> Served {
    let (stderr, stderr_path) = stderr_file(logs);
    serve_logging_to(dir, stderr, stderr_path, extra)
}

/// [`serve`] with its stderr on `stderr` (read back from `stderr_path`).
fn serve_logging_to(
    dir: &Path,
    stderr: std::fs::File,
    stderr_path: PathBuf,
    extra: &[&str],
) -> Served {
    let served = serve::start(serve_quiver(dir, extra).stderr(stderr)).unwrap_or_else(|e| {
        panic!(
            "quiver serve printed no address ({e}); stderr:\n{}",
            read_log(&stderr_path)
        )
    });
    assert!(served.addr.starts_with("127.0.0.1:"), "{}", served.addr);
    Served {
        process: served.process,
        addr: served.addr,
        stderr_path,
        _stdout: served.stdout,
    }
}

/// Spawns `quiver serve` with stdout read line by line on a thread and stderr in a file (a
/// pipe nobody reads could fill up and stall the server's logging).
fn spawn_serve(
    dir: &Path,
    logs: &Path,
    extra: &[&str],
) -> (Child, PathBuf, mpsc::Receiver<String>) {
    let (stderr, stderr_path) = stderr_file(logs);
    let mut child = serve_quiver(dir, extra)
        .stderr(stderr)
        .spawn()
        .expect("the quiver binary starts");
    let rx = process::lines_of(child.stdout.take().unwrap());
    (child, stderr_path, rx)
}

/// A new file under `logs` for a server's stderr, and its path.
fn stderr_file(logs: &Path) -> (std::fs::File, PathBuf) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(logs).unwrap();
    let stderr_path = logs.join(format!(
        "serve-{}.stderr",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    (stderr, stderr_path)
}

/// `quiver --dir DIR serve --port 0 EXTRA...`, to be given its stderr and spawned.
fn serve_quiver(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quiver"));
    serve_command(&mut cmd, dir, 0).args(extra);
    cmd
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits for `child` to exit; past [`WAIT`] it is killed and the test fails.
fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
    process::wait_exit(child, what, WAIT)
}

/// Runs a program to its end (a hang past [`WAIT`] fails the test); returns its exit status,
/// stdout and stderr.
fn run(cmd: &mut Command, what: &str) -> (ExitStatus, String, String) {
    process::run(cmd, what, WAIT)
}

/// `quiver --dir DIR ARGS...` (an offline command) to its end.
fn quiver(dir: &Path, args: &[&str]) -> (ExitStatus, String, String) {
    run(
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .arg("--dir")
            .arg(dir)
            .args(args),
        &format!("quiver {}", args.join(" ")),
    )
}

/// `redis-cli -p PORT ARGS...` against a served address; its stdout. `None` when redis-cli is
/// not installed (scripts/test_deps.sh installs it).
fn redis_cli(addr: &str, args: &[String]) -> Option<String> {
    let cli = tool::find("redis-cli")?;
    let port = addr.rsplit(':').next().unwrap();
    let (status, out, err) = run(
        Command::new(cli).args(["-p", port]).args(args),
        &format!("redis-cli {}", args.first().map_or("", |a| a.as_str())),
    );
    assert!(status.success(), "redis-cli: {status}: {err}");
    Some(out)
}

impl Served {
    fn client(&self) -> Connection {
        self.client_with(|_| {})
    }

    fn client_with(&self, configure: impl FnOnce(&mut ClientOptions)) -> Connection {
        let mut options = ClientOptions::new(self.addr.clone());
        options.reconnect = false;
        options.read_timeout = Some(WAIT);
        options.write_timeout = Some(WAIT);
        configure(&mut options);
        Connection::connect_with(options).expect("connect to quiver serve")
    }

    fn signal(&self, signal: libc::c_int) {
        self.process.signal(signal);
    }

    /// SIGKILL, then reap.
    fn kill_9(&mut self) {
        self.process.kill9();
    }

    /// Sends `signal` and expects a clean exit (code 0).
    fn stop_with(mut self, signal: libc::c_int) -> String {
        self.signal(signal);
        let status = self.process.wait_exit("shutdown", WAIT);
        let log = self.stderr();
        assert_eq!(
            status.code(),
            Some(0),
            "exit after signal {signal}: {status}; stderr:\n{log}"
        );
        log
    }

    /// Waits for the server to exit by itself (SHUTDOWN), cleanly (code 0).
    fn wait_clean_exit(mut self, what: &str) -> String {
        let status = self.process.wait_exit(what, WAIT);
        let log = self.stderr();
        assert_eq!(
            status.code(),
            Some(0),
            "exit after {what}: {status}; stderr:\n{log}"
        );
        log
    }

    fn stderr(&self) -> String {
        read_log(&self.stderr_path)
    }
}

// ---------------------------------------------------------------------------------------------
// kill -9

const BATCH_KEYS: usize = 50;
const WRITERS: usize = 2;
const CYCLES: usize = 5;

/// One MSET: its keys and values.
#[derive(Clone)]
struct Batch(Vec<(String, String)>);

impl Batch {
    fn new(cycle: usize, writer: usize, n: usize) -> Batch {
        Batch(
            (0..BATCH_KEYS)
                .map(|i| {
                    (
                        format!("c{cycle}:w{writer}:b{n}:k{i}"),
                        format!(
                            "value of key {i} of batch {n} of writer {writer} in cycle {cycle}"
                        ),
                    )
                })
                .collect(),
        )
    }
}

/// What one writer saw: the batches acknowledged with +OK, and those in flight when the
/// server died (each applied or not, but never in part).
type WriterLog = Writes<Batch>;

/// MSETs in flight per writer: several, so the kill often lands while the server has
/// unanswered MSETs in hand.
const PIPELINE: usize = 4;

/// MSETs batches, [`PIPELINE`] per write, on `stream` until the connection fails; a batch
/// counts as acknowledged once its +OK has been read. The caller connects `stream` before the
/// kill can come (a writer thread that started late once found the server already killed).
fn writer(
    mut stream: std::net::TcpStream,
    cycle: usize,
    id: usize,
    acks: Arc<AtomicUsize>,
) -> WriterLog {
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    let mut log = WriterLog::default();
    let mut next = 0;
    loop {
        let batches: Vec<Batch> = (next..next + PIPELINE)
            .map(|n| Batch::new(cycle, id, n))
            .collect();
        next += PIPELINE;
        let mut request = bytes::BytesMut::new();
        for batch in &batches {
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for (k, v) in &batch.0 {
                args.push(k.as_bytes());
                args.push(v.as_bytes());
            }
            quiver_client::encode_command(&mut request, &args);
        }
        let mut pending = batches.into_iter();
        if std::io::Write::write_all(&mut stream, &request).is_err() {
            log.in_flight.extend(pending);
            return log;
        }
        while let Some(batch) = pending.next() {
            let mut reply = [0u8; 5];
            match stream.read_exact(&mut reply) {
                Ok(()) => {
                    assert_eq!(
                        &reply,
                        b"+OK\r\n",
                        "MSET answered {:?}",
                        reply.escape_ascii().to_string()
                    );
                    log.acked.push(batch);
                    acks.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e.kind(),
                            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                        ),
                        "writer {id}: {e} (expected the server's death)"
                    );
                    log.in_flight.push(batch);
                    log.in_flight.extend(pending);
                    return log;
                }
            }
        }
    }
}

/// Every acknowledged batch is there with its values. Of the batches one writer had in flight
/// at a kill, each is there entirely or not at all, and those there are a prefix (one
/// connection's MSETs are applied in order).
fn verify(conn: &mut Connection, acked: &[Batch], in_flight: &[Vec<Batch>]) {
    for chunk in acked.chunks(20) {
        let keys: Vec<&str> = chunk
            .iter()
            .flat_map(|b| b.0.iter().map(|(k, _)| k.as_str()))
            .collect();
        let values = conn.multi_get(&keys).expect("MGET");
        let expected = chunk
            .iter()
            .flat_map(|b| b.0.iter().map(|(_, v)| v.as_bytes()));
        for ((key, got), want) in keys.iter().zip(&values).zip(expected) {
            assert_eq!(
                got.as_deref(),
                Some(want),
                "acknowledged key {key} after kill -9"
            );
        }
    }
    for group in in_flight {
        let mut applied = Vec::new();
        for batch in group {
            let keys: Vec<&str> = batch.0.iter().map(|(k, _)| k.as_str()).collect();
            let values = conn.multi_get(&keys).expect("MGET");
            let present = values.iter().filter(|v| v.is_some()).count();
            assert!(
                present == 0 || present == keys.len(),
                "the MSET in flight at kill -9 is torn: {present} of {} keys present (first {})",
                keys.len(),
                keys[0]
            );
            for ((key, want), got) in batch.0.iter().zip(&values) {
                if present > 0 {
                    assert_eq!(got.as_deref(), Some(want.as_bytes()), "{key}");
                }
            }
            applied.push(present > 0);
        }
        assert!(
            applied.windows(2).all(|w| w[0] || !w[1]),
            "a later MSET of one connection survived an earlier one: {applied:?} from {}",
            group[0].0[0].0
        );
    }
}

#[test]
fn kill_9_loses_no_acknowledged_mset() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let mut rng = Rng::new(seed_from_env(SEED_ENV));
    let mut acked: Vec<Batch> = Vec::new();
    let mut in_flight: Vec<Vec<Batch>> = Vec::new();
    for cycle in 0..CYCLES {
        let mut server = serve(&dir, &logs, &["--durability", "os"]);
        let mut check = server.client();
        verify(&mut check, &acked, &in_flight);
        let keys = info_keys(&mut check);
        assert!(
            keys >= (acked.len() * BATCH_KEYS) as u64,
            "cycle {cycle}: {keys} keys for {} acknowledged batches",
            acked.len()
        );
        drop(check);

        let acks = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|id| {
                let stream = std::net::TcpStream::connect(&server.addr).expect("connect a writer");
                let acks = acks.clone();
                std::thread::spawn(move || writer(stream, cycle, id, acks))
            })
            .collect();
        // Kill at a random moment after a few hundred acknowledged MSETs.
        let target = 200 + rng.below(200) as usize;
        let deadline = Instant::now() + WAIT;
        while acks.load(Ordering::SeqCst) < target {
            assert!(
                writers.iter().all(|w| !w.is_finished()),
                "a writer stopped before the kill; stderr:\n{}",
                server.stderr()
            );
            assert!(Instant::now() < deadline, "the load made no progress");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(rng.below(20_000)));
        server.kill_9();
        let before = acked.len();
        for w in writers {
            let log = w.join().expect("a writer panicked");
            acked.extend(log.acked);
            in_flight.push(log.in_flight);
        }
        assert!(acked.len() - before >= target);
    }
    let server = serve(&dir, &logs, &["--durability", "os"]);
    let mut check = server.client();
    verify(&mut check, &acked, &in_flight);
    server.stop_with(libc::SIGTERM);
}

fn info_keys(conn: &mut Connection) -> u64 {
    let text = conn.info(Some("keyspace")).expect("INFO keyspace");
    text.lines()
        .find_map(|l| l.strip_prefix("db0:keys="))
        .map_or(0, |rest| {
            rest.split(',')
                .next()
                .unwrap()
                .parse()
                .expect("a key count")
        })
}

// ---------------------------------------------------------------------------------------------
// Graceful shutdown

/// How a test stops a server that must reopen with nothing to replay.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGTERM or SIGINT.
    Signal(libc::c_int),
    /// The SHUTDOWN command: no reply, the connection closed, exit 0.
    Shutdown,
    /// SAVE, then kill -9: the checkpoint SAVE wrote is what the restart opens from.
    SaveThenKill9,
}

fn graceful_shutdown(stop: Stop) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    let pairs: Vec<(String, String)> = (0..500)
        .map(|i| (format!("key:{i}"), format!("value {i}")))
        .collect();
    for chunk in pairs.chunks(100) {
        c.multi_set(chunk).unwrap();
    }
    c.delete("key:499").unwrap();
    // An idle connection and one in the middle of a request do not hold the shutdown up.
    let _idle = server.client();
    let mut partial = std::net::TcpStream::connect(&server.addr).unwrap();
    std::io::Write::write_all(&mut partial, b"*2\r\n$3\r\nGET\r\n$5\r\nke").unwrap();
    match stop {
        Stop::Signal(signal) => {
            server.stop_with(signal);
        }
        Stop::Shutdown => {
            // Redis's SHUTDOWN answers nothing: the connection closes.
            let e = c.command(&[b"SHUTDOWN"]).unwrap_err();
            assert!(e.is_connection_error(), "SHUTDOWN answered {e}");
            server.wait_clean_exit("SHUTDOWN");
        }
        Stop::SaveThenKill9 => {
            let before = unix_now();
            assert_eq!(c.command(&[b"SAVE"]).unwrap(), Value::Simple("OK".into()));
            match c.command(&[b"LASTSAVE"]).unwrap() {
                Value::Integer(t) => assert!(t as u64 >= before, "LASTSAVE {t} < {before}"),
                other => panic!("LASTSAVE answered {other:?}"),
            }
            let info = c.info(Some("persistence")).unwrap();
            assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
            assert!(info.contains("rdb_bgsave_in_progress:0"), "{info}");
            let mut server = server;
            server.kill_9();
        }
    }
    // The connections were closed by the server.
    partial.set_read_timeout(Some(WAIT)).unwrap();
    let mut rest = Vec::new();
    let _ = partial.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
    drop(c);

    // The next start reopens from the checkpoint written at shutdown: nothing is replayed.
    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    assert_eq!(info_keys(&mut c), 499);
    match c.command(&[b"DBSIZE"]).unwrap() {
        Value::Integer(n) => assert_eq!(n, 499),
        other => panic!("DBSIZE answered {other:?}"),
    }
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let values = c.multi_get(&keys).unwrap();
    for (i, ((k, v), got)) in pairs.iter().zip(&values).enumerate() {
        let want = (i < 499).then_some(v.as_bytes());
        assert_eq!(got.as_deref(), want, "{k}");
    }
    let log = server.stderr();
    assert!(
        log.lines().any(|l| l.contains("store open")),
        "no 'store open' line in stderr:\n{log}"
    );
    let recovery = log
        .lines()
        .find(|l| l.contains(" recovery ") && l.contains("partitions_rebuilt="))
        .unwrap_or_else(|| panic!("no recovery line in stderr:\n{log}"));
    let fields: Vec<&str> = recovery.split_whitespace().collect();
    for expected in [
        "partitions_rebuilt=0",
        "records_replayed=0",
        "torn_tails=0",
        "damage=0",
    ] {
        assert!(
            fields.contains(&expected),
            "the restart did not open cleanly from the checkpoint ({expected}): {recovery}"
        );
    }
    // A clean restart has nothing to warn about.
    assert!(!log.contains("recovery found"), "{log}");
    assert!(!log.contains("recovery truncated"), "{log}");
    assert!(!log.contains("recovery ignored"), "{log}");
    drop(c);
    server.stop_with(libc::SIGTERM);
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn sigterm_shuts_down_cleanly_and_restart_reopens_from_the_checkpoint() {
    graceful_shutdown(Stop::Signal(libc::SIGTERM));
}

#[test]
fn sigint_shuts_down_cleanly_and_restart_reopens_from_the_checkpoint() {
    graceful_shutdown(Stop::Signal(libc::SIGINT));
}

#[test]
fn shutdown_command_shuts_down_cleanly_and_restart_reopens_from_the_checkpoint() {
    graceful_shutdown(Stop::Shutdown);
}

#[test]
fn save_then_kill_9_reopens_from_the_save_with_nothing_to_replay() {
    graceful_shutdown(Stop::SaveThenKill9);
}

/// SHUTDOWN NOSAVE closes without a checkpoint: every acknowledged write is still there at the
/// next start (replayed from the log); SHUTDOWN refused inside MULTI, its bad options refused.
#[test]
fn shutdown_nosave_keeps_every_write() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    let pairs: Vec<(String, String)> = (0..300)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    c.multi_set(&pairs).unwrap();
    for (args, error) in [
        (
            &[&b"SHUTDOWN"[..], b"NOSAVE", b"SAVE"][..],
            "ERR syntax error",
        ),
        (&[b"SHUTDOWN", b"ABORT"], "ERR No shutdown in progress."),
    ] {
        match c.command(args) {
            Err(quiver_client::Error::Server(e)) => assert_eq!(e, error),
            other => panic!("{args:?} answered {other:?}"),
        }
    }
    c.command(&[b"MULTI"]).unwrap();
    match c.command(&[b"SHUTDOWN"]) {
        Err(quiver_client::Error::Server(e)) => {
            assert_eq!(e, "ERR Command not allowed inside a transaction")
        }
        other => panic!("SHUTDOWN in MULTI answered {other:?}"),
    }
    assert!(c.command(&[b"EXEC"]).is_err(), "EXECABORT");
    let e = c.command(&[b"SHUTDOWN", b"NOSAVE"]).unwrap_err();
    assert!(e.is_connection_error(), "SHUTDOWN NOSAVE answered {e}");
    server.wait_clean_exit("SHUTDOWN NOSAVE");

    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let values = c.multi_get(&keys).unwrap();
    for ((k, v), got) in pairs.iter().zip(&values) {
        assert_eq!(got.as_deref(), Some(v.as_bytes()), "{k}");
    }
    drop(c);
    server.stop_with(libc::SIGTERM);
}

/// The store cannot be closed at shutdown (here its directory is gone, so the checkpoint cannot
/// be written; a full disk does the same): the exit code says so, and the message names the
/// close, not the open.
#[test]
fn sigterm_with_a_failing_close_names_the_close() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let mut server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    c.set("k", "v").unwrap();
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
    server.signal(libc::SIGTERM);
    let status = server
        .process
        .wait_exit("shutdown with a failing close", WAIT);
    let log = server.stderr();
    assert_eq!(status.code(), Some(1), "{status}; stderr:\n{log}");
    assert!(
        log.contains("quiver: error: closing the store failed: "),
        "stderr:\n{log}"
    );
    assert!(!log.contains("cannot open the store"), "stderr:\n{log}");
}

// ---------------------------------------------------------------------------------------------
// --config

fn config_get(conn: &mut Connection, name: &str) -> String {
    match conn.command(&[b"CONFIG", b"GET", name.as_bytes()]).unwrap() {
        Value::Array(items) if items.len() == 2 => match &items[1] {
            Value::Bulk(v) => String::from_utf8_lossy(v).into_owned(),
            other => panic!("CONFIG GET {name}: {other:?}"),
        },
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

/// CONFIG SET, then CONFIG REWRITE: the file keeps its comments and other settings, and a
/// restart on it serves the settings set; without a file, REWRITE says so.
#[test]
fn config_rewrite_then_a_restart_keeps_the_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let file = tmp.path().join("quiver.toml");
    std::fs::write(
        &file,
        "# tuned by hand
timeout = 300 # five minutes
",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();
    let server = serve(&dir, &logs, &["--config", file_arg]);
    let mut c = server.client();
    let set = c.command(&[
        b"CONFIG",
        b"SET",
        b"timeout",
        b"60",
        b"maxclients",
        b"123",
        b"slowlog-log-slower-than",
        b"2500",
        b"loglevel",
        b"warning",
        b"proto-max-bulk-len",
        b"2mb",
        b"max-vector-width",
        b"16",
        b"compaction-garbage-ratio",
        b"0.3",
    ]);
    assert_eq!(set.unwrap(), Value::Simple("OK".into()));
    assert_eq!(
        c.command(&[b"CONFIG", b"REWRITE"]).unwrap(),
        Value::Simple("OK".into())
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.starts_with("# tuned by hand\ntimeout = 60 # five minutes\n"),
        "{written}"
    );
    drop(c);
    server.stop_with(libc::SIGTERM);

    let server = serve(&dir, &logs, &["--config", file_arg]);
    let mut c = server.client();
    assert_eq!(config_get(&mut c, "timeout"), "60");
    assert_eq!(config_get(&mut c, "maxclients"), "123");
    assert_eq!(config_get(&mut c, "slowlog-log-slower-than"), "2500");
    assert_eq!(config_get(&mut c, "loglevel"), "warning");
    assert_eq!(config_get(&mut c, "proto-max-bulk-len"), "2097152");
    assert_eq!(config_get(&mut c, "max-vector-width"), "16");
    assert_eq!(config_get(&mut c, "compaction-garbage-ratio"), "0.3");
    assert_eq!(config_get(&mut c, "compaction-cpu-share"), "0.25");
    drop(c);
    server.stop_with(libc::SIGTERM);

    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    match c.command(&[b"CONFIG", b"REWRITE"]) {
        Err(quiver_client::Error::Server(e)) => {
            assert_eq!(e, "ERR The server is running without a config file")
        }
        other => panic!("CONFIG REWRITE answered {other:?}"),
    }
    drop(c);
    server.stop_with(libc::SIGTERM);
}

/// CONFIG SET loglevel changes what the running process logs: a protocol error (a notice)
/// is not logged at `warning`, and is again at `notice`.
#[test]
fn config_set_loglevel_changes_what_the_server_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let server = serve(&dir, &logs, &[]);
    let mut c = server.client();
    let bad_frame = |addr: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        std::io::Write::write_all(&mut s, b"*1\r\n$x\r\n").unwrap();
        // The error reply, then the close.
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        assert!(reply.starts_with(b"-ERR Protocol error"), "{reply:?}");
    };
    for (level, frames) in [("warning", 2), ("notice", 1)] {
        let set = c.command(&[b"CONFIG", b"SET", b"loglevel", level.as_bytes()]);
        assert_eq!(set.unwrap(), Value::Simple("OK".into()));
        for _ in 0..frames {
            bad_frame(&server.addr);
        }
    }
    drop(c);
    let log = server.stop_with(libc::SIGTERM);
    let logged = log.matches("protocol error").count();
    assert_eq!(
        logged, 1,
        "one protocol error logged at notice, none at warning:\n{log}"
    );
}

#[test]
fn config_file_settings_and_flag_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, logs) = (tmp.path().join("store"), tmp.path().join("logs"));
    let file = tmp.path().join("quiver.toml");
    std::fs::write(
        &file,
        "# Redis names\nmaxclients = 7\nrequirepass = \"from-file\"\ntimeout = 300\n\
         proto-max-bulk-len = \"2mb\"\nclient-output-buffer-total-limit = \"64mb\"\n",
    )
    .unwrap();
    let file_arg = file.to_str().unwrap();

    let server = serve(&dir, &logs, &["--config", file_arg]);
    let mut anonymous = server.client();
    let err = anonymous.ping().unwrap_err();
    assert!(matches!(err, quiver_client::Error::NoAuth(_)), "{err:?}");
    let mut c = server.client_with(|o| o.password = Some("from-file".into()));
    assert_eq!(config_get(&mut c, "maxclients"), "7");
    assert_eq!(config_get(&mut c, "timeout"), "300");
    assert_eq!(
        config_get(&mut c, "proto-max-bulk-len"),
        (2 << 20).to_string()
    );
    assert_eq!(
        config_get(&mut c, "client-output-buffer-total-limit"),
        (64 << 20).to_string()
    );
    c.set("k", "v").unwrap();
    drop((anonymous, c));
    server.stop_with(libc::SIGTERM);

    // A flag overrides the file; the file's other settings stay.
    let server = serve(
        &dir,
        &logs,
        &["--config", file_arg, "--requirepass", "from-flag"],
    );
    let mut options = ClientOptions::new(server.addr.clone());
    options.password = Some("from-file".into());
    options.reconnect = false;
    let err = Connection::connect_with(options).unwrap_err();
    assert!(
        matches!(err, quiver_client::Error::AuthFailed(_)),
        "{err:?}"
    );
    let mut c = server.client_with(|o| o.password = Some("from-flag".into()));
    assert_eq!(config_get(&mut c, "maxclients"), "7");
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(c);
    server.stop_with(libc::SIGINT);

    // An unknown key: exit code 1 and a message naming it, before anything is served.
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "maxclients = 7\nmaxclientz = 5\n").unwrap();
    let (mut child, stderr_path, stdout) =
        spawn_serve(&dir, &logs, &["--config", bad.to_str().unwrap()]);
    let status = wait_exit(&mut child, "serve with a bad config");
    let err = read_log(&stderr_path);
    assert_eq!(status.code(), Some(1), "{status}; stderr:\n{err}");
    assert!(err.contains("maxclientz"), "stderr:\n{err}");
    assert!(!err.contains("panicked"), "stderr:\n{err}");
    let printed: Vec<String> = stdout.try_iter().collect();
    assert!(
        printed.iter().all(|l| !l.contains("listening")),
        "{printed:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

#[test]
fn redis_benchmark_runs_without_errors() {
    let benchmark = tool::require("redis-benchmark");
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(&tmp.path().join("store"), &tmp.path().join("logs"), &[]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let (status, out, err) = run(
        Command::new(&benchmark)
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(["-t", "set,get,mset", "-P", "16", "-n", "20000", "-q"]),
        "redis-benchmark",
    );
    let output = out + &err;
    assert!(status.success(), "redis-benchmark: {status}\n{output}");
    let lines = quiver_testkit::redis::benchmark_lines(&output);
    for line in &lines {
        let lower = line.to_ascii_lowercase();
        assert!(
            !lower.contains("error") && !line.contains("ERR") && !lower.contains("warning"),
            "redis-benchmark reported: {line}\n{output}"
        );
    }
    for test in ["SET:", "GET:", "MSET (10 keys):"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(test) && l.contains("requests per second")),
            "no result for {test}\n{output}"
        );
    }
    // The server is fine afterwards, and has the benchmark's keys.
    let mut c = server.client();
    c.ping().unwrap();
    assert!(c.get("key:__rand_int__").unwrap().is_some());
    assert!(info_keys(&mut c) >= 1);
    drop(c);
    server.stop_with(libc::SIGTERM);
}

/// An HTTP request on the RESP port (a web page's cross-protocol scripting) runs nothing and
/// is closed without a reply, and the server logs Redis's warning.
#[test]
fn an_http_request_is_closed_and_logged() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let served = serve(&tmp.path().join("data"), &tmp.path().join("logs"), &[]);
    let mut s = std::net::TcpStream::connect(&served.addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\nSET pwned 1\r\n")
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("the connection is closed");
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    let mut c = Connection::connect_with(ClientOptions::new(served.addr.clone())).unwrap();
    assert_eq!(c.get("pwned").unwrap(), None);
    let deadline = Instant::now() + WAIT;
    while !read_log(&served.stderr_path).contains("Possible SECURITY ATTACK detected") {
        assert!(
            Instant::now() < deadline,
            "no warning logged:\n{}",
            read_log(&served.stderr_path)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
