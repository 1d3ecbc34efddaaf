//! The dispatcher under generated and mutated requests: every command of the table (and
//! names that are none), with argument counts around its arity and arguments drawn from what
//! commands parse — keys that collide, integers at and past their limits, floats, option
//! words, binary values — sent pipelined to a real server, then the same frames with bytes
//! flipped, inserted and deleted (which also reaches the parser's error paths). The server
//! must answer every well-formed request with exactly one reply, never die, and keep its
//! memory bounded (values are capped by `proto-max-bulk-len` at its 1 MB floor).
//!
//! CI sends [`FRAMES_CI`] frames from a fixed seed; the ignored test sends [`FRAMES_LONG`]
//! (`cargo test -p quiver-node --release --test it -- --ignored ten_million`), and prints
//! its counts.
//!
//! The corpus kept in the repository (`tests/corpus/requests/`, one connection's bytes per
//! file) holds one request for each distinct way the server answered among
//! [`CORPUS_SEARCH`] generated ones — per command, each error text (numbers and quoted text
//! left out) and each kind of reply — and mutated requests that drew distinct errors: what a
//! coverage-guided fuzzer would keep, chosen by outcome. CI sends every file, and a mutated
//! copy of each; `cargo test -p quiver-node --release --test it -- --ignored
//! write_the_request_corpus` chooses it again (after the command table grows).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::BytesMut;
use quiver_client::{encode_command, Parser, Value};
use quiver_node::testing::TestServer;
use quiver_plan::rng::WyRand;
use quiver_service::table::COMMANDS;

/// Frames in CI's run.
const FRAMES_CI: u64 = 200_000;
/// Frames in the long run.
const FRAMES_LONG: u64 = 10_000_000;
/// Frames per connection: each batch is written, the write side closed, and every reply read.
const BATCH_FRAMES: usize = 2_000;
/// Requests the corpus is chosen from, and its size at most.
const CORPUS_SEARCH: u64 = 60_000;
const CORPUS_FILES_MAX: usize = 1_000;
/// Characters of an error reply that name its kind.
const ERROR_KIND_CHARS: usize = 60;

/// The server's resident memory may grow by at most this over a run (its store holds a few
/// dozen keys of at most 1 MB each; the rest is buffers a finished connection gives back).
const RSS_GROWTH_MAX: u64 = 512 << 20;

fn pick<'a>(rng: &mut WyRand, from: &[&'a [u8]]) -> &'a [u8] {
    from[rng.index(from.len())]
}

/// Option words and subcommands of the table's commands (CLIENT KILL left out: it may close
/// the connection that sends it, whose remaining replies would then be missing).
const WORDS: &[&[u8]] = &[
    b"EX",
    b"PX",
    b"EXAT",
    b"PXAT",
    b"NX",
    b"XX",
    b"GT",
    b"LT",
    b"GET",
    b"KEEPTTL",
    b"PERSIST",
    b"DB",
    b"REPLACE",
    b"MATCH",
    b"COUNT",
    b"TYPE",
    b"string",
    b"LEN",
    b"IDX",
    b"MINMATCHLEN",
    b"WITHMATCHLEN",
    b"ASYNC",
    b"SYNC",
    b"PUT",
    b"DEL",
    b"CHECK",
    b"IF",
    b"ABSENT",
    b"EXISTS",
    b"EQUALS",
    b"ENCODING",
    b"REFCOUNT",
    b"IDLETIME",
    b"FREQ",
    b"HELP",
    b"ID",
    b"GETNAME",
    b"SETNAME",
    b"LIST",
    b"INFO",
    b"KEYSLOT",
    b"COUNTKEYSINSLOT",
    b"GETKEYSINSLOT",
    b"DOCS",
    b"BEGIN",
    b"END",
    b"SEQ",
    b"*",
    b"maxclients",
    b"AUTH",
    b"default",
    b"WITHSCORES",
    b"ON",
    b"OFF",
    b"server",
    b"keyspace",
    b"commandstats",
    b"everything",
    b"default",
    b"NOLOOP",
    b"RESET",
    b"SCHEDULE",
];
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"1",
    b"-1",
    b"2",
    b"3",
    b"10",
    b"100",
    b"16383",
    b"16384",
    b"1000000",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"9223372036854775808",
    b"1.5",
    b"-0",
    b"inf",
    b"-inf",
    b"nan",
    b"+inf",
    b"1e10",
    b"0x10",
    b" 1",
    b"",
    b"99999999999999999999",
    b"3.0e-5",
    b"17179869184",
];
const KEYS: &[&[u8]] = &[
    b"k0",
    b"k1",
    b"k2",
    b"k3",
    b"{t}a",
    b"{t}b",
    b"",
    b"\x00\r\n",
    b"counter",
    b"float",
];

fn arg(rng: &mut WyRand, out: &mut Vec<Vec<u8>>) {
    let a = match rng.index(10) {
        0..=2 => pick(rng, KEYS).to_vec(),
        3..=5 => pick(rng, NUMBERS).to_vec(),
        6 | 7 => pick(rng, WORDS).to_vec(),
        8 => (0..rng.index(64)).map(|_| rng.next_u64() as u8).collect(),
        _ => vec![b'v'; [1, 100, 1000, 5000][rng.index(4)]],
    };
    out.push(a);
}

/// One request: a command of the table in random case (or a name that is none), with an
/// argument count around its arity.
fn request(rng: &mut WyRand) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    if rng.index(20) == 0 {
        args.push(pick(rng, WORDS).to_vec());
    } else {
        let spec = &COMMANDS[rng.index(COMMANDS.len())];
        // QUIT and SHUTDOWN would end the connection or the server the run needs; MONITOR
        // would interleave other connections' commands with its replies; a (un)subscription
        // answers one reply per channel, and subscribed mode refuses what follows.
        if matches!(
            spec.name,
            "quit"
                | "shutdown"
                | "monitor"
                | "subscribe"
                | "psubscribe"
                | "unsubscribe"
                | "punsubscribe"
        ) {
            args.push(b"PING".to_vec());
        } else {
            let name: Vec<u8> = spec
                .name
                .bytes()
                .map(|b| {
                    if rng.index(2) == 0 {
                        b.to_ascii_uppercase()
                    } else {
                        b
                    }
                })
                .collect();
            args.push(name);
        }
        let arity = spec.arity.unsigned_abs() as usize;
        let n = match rng.index(4) {
            0 => rng.index(6),
            _ => arity.saturating_sub(1) + rng.index(if spec.arity < 0 { 6 } else { 2 }),
        };
        for _ in 0..n {
            arg(rng, &mut args);
        }
    }
    args
}

fn encode(args: &[Vec<u8>], out: &mut BytesMut) {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    encode_command(out, &refs);
}

/// Flips, inserts and deletes a few bytes of `bytes`.
fn mutate(rng: &mut WyRand, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.index(4) {
        let n = bytes.len();
        match rng.index(3) {
            0 if n > 0 => bytes[rng.index(n)] ^= (rng.next_u64() as u8) | 1,
            1 => bytes.insert(
                rng.index(n + 1),
                pick(rng, &[b"*", b"$", b"\r", b"\n", b"-", b"9"])[0],
            ),
            _ if n > 0 => {
                bytes.remove(rng.index(n));
            }
            _ => {}
        }
    }
}

/// Sends `bytes`, closes the write side and reads to the end; returns the replies read (a
/// reply the client's parser refuses is a failure: the server sent malformed RESP). With
/// `cut_short` the last reply may be incomplete: after a protocol error the server closes the
/// connection with requests still unread, and the kernel then resets it (RST), dropping
/// whatever the client had not yet received.
fn exchange(addr: SocketAddr, bytes: &[u8], cut_short: bool) -> Vec<Value> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // The server reads and answers while we write: a second thread writes.
    let mut w = s.try_clone().unwrap();
    let bytes = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&bytes);
        let _ = w.shutdown(Shutdown::Write);
    });
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::ConnectionReset => Ok(0),
            _ => Err(e),
        })
        .expect("read the replies");
    writer.join().unwrap();
    let mut buf = BytesMut::from(&got[..]);
    let mut parser = Parser::new();
    let mut replies = Vec::new();
    while let Some(v) = parser
        .parse(&mut buf)
        .expect("the server's replies are valid RESP")
    {
        replies.push(v);
    }
    assert!(
        cut_short || buf.is_empty(),
        "a partial reply at the end: {:?}",
        &buf[..buf.len().min(80)]
    );
    replies
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

fn run(frames: u64, seed: u64) {
    let server = TestServer::start_with(|c| {
        c.service.proto_max_bulk_len = 1 << 20;
        c.service.databases = 4;
    });
    let mut rng = WyRand::new(seed);
    let (mut sent, mut replies, mut errors, mut mutated) = (0u64, 0u64, 0u64, 0u64);
    let mut rss_start = None;
    while sent < frames {
        let n = BATCH_FRAMES.min((frames - sent) as usize);
        let mut out = BytesMut::new();
        for _ in 0..n {
            encode(&request(&mut rng), &mut out);
        }
        if rng.index(4) == 0 {
            // Mutated: the server may stop at a protocol error; what it answers must be RESP.
            let mut bytes = out.to_vec();
            mutate(&mut rng, &mut bytes);
            replies += exchange(server.addr, &bytes, true).len() as u64;
            mutated += n as u64;
        } else {
            let got = exchange(server.addr, &out, false);
            assert_eq!(
                got.len(),
                n,
                "one reply per request (seed {seed}, frame {sent})"
            );
            errors += got.iter().filter(|v| matches!(v, Value::Error(_))).count() as u64;
            replies += n as u64;
        }
        sent += n as u64;
        // The baseline once the store holds its few keys and buffers are warm.
        if rss_start.is_none() && sent >= 20 * BATCH_FRAMES as u64 {
            rss_start = Some(rss_bytes());
        }
    }
    let alive = exchange(server.addr, b"*1\r\n$4\r\nPING\r\n", false);
    assert_eq!(
        alive,
        [Value::Simple("PONG".into())],
        "the server still answers"
    );
    let rss = rss_bytes();
    if let Some(start) = rss_start {
        assert!(
            rss <= start + RSS_GROWTH_MAX,
            "resident memory grew from {start} to {rss} bytes"
        );
    }
    println!(
        "dispatcher fuzz: seed {seed}: {sent} frames ({mutated} in mutated batches), {replies} \
         replies ({errors} errors among the well-formed), rss {} MiB",
        rss >> 20
    );
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/requests")
}

/// What kind of reply `v` is: an error's text without numbers or quoted parts (cut short),
/// else its type.
fn reply_kind(v: &Value) -> String {
    match v {
        Value::Error(text) => {
            let mut kind = String::new();
            let mut quoted = false;
            for c in text.chars() {
                match c {
                    '\'' | '"' => {
                        quoted = !quoted;
                        if quoted {
                            kind.push('…');
                        }
                    }
                    _ if quoted || c.is_ascii_digit() => {}
                    _ => kind.push(c),
                }
            }
            kind.chars().take(ERROR_KIND_CHARS).collect()
        }
        other => {
            let d = format!("{other:?}");
            d[..d.find(['(', ' ', '{']).unwrap_or(d.len())].to_string()
        }
    }
}

/// Chooses the corpus again (see the module's comment) and writes it over
/// `tests/corpus/requests/`.
fn write_corpus(seed: u64) {
    let server = TestServer::start_with(|c| {
        c.service.proto_max_bulk_len = 1 << 20;
        c.service.databases = 4;
    });
    let mut rng = WyRand::new(seed);
    let mut chosen: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut tried = 0;
    while tried < CORPUS_SEARCH {
        // Well-formed requests a batch per connection, each reply its request's.
        let batch: Vec<Vec<Vec<u8>>> = (0..BATCH_FRAMES).map(|_| request(&mut rng)).collect();
        let mut out = BytesMut::new();
        for r in &batch {
            encode(r, &mut out);
        }
        let got = exchange(server.addr, &out, false);
        for (r, v) in batch.iter().zip(&got) {
            let name = String::from_utf8_lossy(&r[0]).to_lowercase();
            let mut one = BytesMut::new();
            encode(r, &mut one);
            chosen
                .entry(format!("{name} {}", reply_kind(v)))
                .or_insert_with(|| one.to_vec());
        }
        tried += batch.len() as u64;
        // Mutated ones, one per connection: the first reply (if any) names the outcome.
        for _ in 0..BATCH_FRAMES / 20 {
            let mut one = BytesMut::new();
            encode(&request(&mut rng), &mut one);
            let mut bytes = one.to_vec();
            mutate(&mut rng, &mut bytes);
            let got = exchange(server.addr, &bytes, true);
            let kind = got.first().map_or("no reply".to_string(), reply_kind);
            chosen.entry(format!("mutated {kind}")).or_insert(bytes);
            tried += 1;
        }
    }
    let dir = corpus_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (n, bytes) in chosen.values().take(CORPUS_FILES_MAX).enumerate() {
        std::fs::write(dir.join(format!("{n:04}.resp")), bytes).unwrap();
    }
    println!(
        "request corpus: {} outcome kinds among {tried} requests",
        chosen.len()
    );
}

/// Every file of the kept corpus on a connection of its own, then a mutated copy of it: the
/// replies are RESP and the server lives on.
fn replay_corpus(seed: u64) -> usize {
    let server = TestServer::start_with(|c| {
        c.service.proto_max_bulk_len = 1 << 20;
        c.service.databases = 4;
    });
    let mut rng = WyRand::new(seed);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in &paths {
        let mut bytes = std::fs::read(p).unwrap();
        exchange(server.addr, &bytes, true);
        mutate(&mut rng, &mut bytes);
        exchange(server.addr, &bytes, true);
    }
    let alive = exchange(server.addr, b"*1\r\n$4\r\nPING\r\n", false);
    assert_eq!(
        alive,
        [Value::Simple("PONG".into())],
        "the server still answers"
    );
    paths.len()
}

#[test]
fn the_kept_request_corpus_through_the_dispatcher() {
    let files = replay_corpus(0xC0_4905);
    assert!(files > 100, "the corpus has only {files} files");
}

#[test]
#[ignore = "writes tests/corpus/requests/ (run by hand after the command table grows)"]
fn write_the_request_corpus() {
    write_corpus(0xC0_4905);
}

#[test]
fn generated_and_mutated_requests_through_the_dispatcher() {
    run(FRAMES_CI, 0x5EED);
}

#[test]
#[ignore = "ten million frames (several minutes in release): run by hand, counts in docs"]
fn ten_million_requests_through_the_dispatcher() {
    run(FRAMES_LONG, 0x5EED_0002);
}
