//! The server commands: `ping`, `get`, `set`, `del`, `mget`, `mset`, `scan`, `info` and
//! `load`, sent to a running `quiver serve` through `quiver-client`.
//!
//! Output is redis-cli's raw mode: values and keys written as their bytes, each followed by a
//! newline, so `quiver get k > file` keeps the value intact (plus the newline).

use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use quiver_bench::keys::{write_key, write_value};
use quiver_bench::load::LoadSpec;
use quiver_client::{ClientOptions, Connection, Value};

use crate::cli::{ConnArgs, GetArgs, InfoArgs, KeysArgs, LoadArgs, MsetArgs, ScanArgs, SetArgs};
use crate::error::{CliError, RemoteError, Stage};
use crate::progress::{self, LOAD_TEMPLATE};

/// Largest request one load round trip sends (`depth` MSETs of `width` pairs): well under the
/// server's default client-query-buffer-limit (1 GiB), and a bound on the client's memory.
const LOAD_ROUND_BYTES_MAX: usize = 256 << 20;

/// An open connection, and what error messages say about it.
struct Client {
    conn: Connection,
    addr: String,
    timeout: Duration,
}

impl Client {
    /// Connects (and authenticates) with the connection flags. Reconnecting is off: a CLI
    /// command that loses its connection fails, and says so, rather than retrying.
    fn connect(a: &ConnArgs) -> Result<Client, CliError> {
        let addr = a.addr();
        let options = ClientOptions {
            connect_timeout: Some(a.timeout_s),
            read_timeout: Some(a.timeout_s),
            write_timeout: Some(a.timeout_s),
            password: a.password.clone(),
            reconnect: false,
            ..ClientOptions::new(addr.clone())
        };
        match Connection::connect_with(options) {
            Ok(conn) => Ok(Client {
                conn,
                addr,
                timeout: a.timeout_s,
            }),
            Err(source) => Err(CliError::Remote(RemoteError {
                addr,
                timeout: a.timeout_s,
                stage: Stage::Connect,
                source,
            })),
        }
    }

    fn error(&self, source: quiver_client::Error) -> CliError {
        CliError::Remote(RemoteError {
            addr: self.addr.clone(),
            timeout: self.timeout,
            stage: Stage::Command,
            source,
        })
    }

    /// Runs one client call, its failure becoming a [`CliError`].
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Connection) -> quiver_client::Result<T>,
    ) -> Result<T, CliError> {
        f(&mut self.conn).map_err(|e| self.error(e))
    }
}

/// Writes each item followed by a newline, then flushes.
fn print_lines<I, B>(lines: I) -> Result<(), CliError>
where
    I: IntoIterator<Item = B>,
    B: AsRef<[u8]>,
{
    let mut out = BufWriter::new(io::stdout().lock());
    for line in lines {
        out.write_all(line.as_ref())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// A key as a quoted, escaped string, for messages.
fn printable(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

pub fn ping(a: &ConnArgs) -> Result<(), CliError> {
    let mut client = Client::connect(a)?;
    client.call(|c| c.ping())?;
    print_lines(["PONG"])
}

pub fn get(a: &GetArgs) -> Result<(), CliError> {
    let mut client = Client::connect(&a.conn)?;
    let key = a.key.as_bytes();
    match client.call(|c| c.get(key))? {
        Some(value) => print_lines([value]),
        None => Err(CliError::Negative(format!(
            "key {} not found",
            printable(key)
        ))),
    }
}

pub fn set(a: &SetArgs) -> Result<(), CliError> {
    let mut client = Client::connect(&a.conn)?;
    client.call(|c| c.set(a.key.as_bytes(), a.value.as_bytes()))?;
    print_lines(["OK"])
}

pub fn del(a: &KeysArgs) -> Result<(), CliError> {
    let keys: Vec<&[u8]> = a.keys.iter().map(|k| k.as_bytes()).collect();
    let mut client = Client::connect(&a.conn)?;
    let existed = client.call(|c| c.multi_delete(&keys))?;
    print_lines([existed.to_string()])
}

pub fn mget(a: &KeysArgs) -> Result<(), CliError> {
    let keys: Vec<&[u8]> = a.keys.iter().map(|k| k.as_bytes()).collect();
    let mut client = Client::connect(&a.conn)?;
    let values = client.call(|c| c.multi_get(&keys))?;
    // An absent key prints as an empty line, like `redis-cli --raw`: one line per key keeps
    // the output aligned with the arguments.
    print_lines(values.iter().map(|v| v.as_deref().unwrap_or_default()))
}

pub fn mset(a: &MsetArgs) -> Result<(), CliError> {
    let pairs = a.pairs.chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return Err(CliError::Usage(format!(
            "mset takes keys and values in pairs; got {} arguments (the last key has no value)",
            a.pairs.len()
        )));
    }
    let pairs: Vec<(&[u8], &[u8])> = pairs
        .map(|kv| (kv[0].as_bytes(), kv[1].as_bytes()))
        .collect();
    let mut client = Client::connect(&a.conn)?;
    client.call(|c| c.multi_set(&pairs))?;
    print_lines(["OK"])
}

pub fn scan(a: &ScanArgs) -> Result<(), CliError> {
    let pattern = a.pattern.as_ref().map(|p| p.as_bytes());
    let count = a.count.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut client = Client::connect(&a.conn)?;
    // Keys are printed page by page: a scan of millions of keys never sits in memory.
    let mut out = BufWriter::new(io::stdout().lock());
    let mut cursor = 0;
    loop {
        let (next, keys) = client.call(|c| c.scan(cursor, pattern, count))?;
        for key in keys {
            out.write_all(&key)?;
            out.write_all(b"\n")?;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    out.flush()?;
    Ok(())
}

pub fn info(a: &InfoArgs) -> Result<(), CliError> {
    let mut client = Client::connect(&a.conn)?;
    let text = client.call(|c| c.info(a.section.as_deref()))?;
    // INFO lines end in CRLF on the wire; a terminal or `grep` wants LF.
    let text = text.replace("\r\n", "\n");
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.is_empty() && !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

pub fn load(a: &LoadArgs) -> Result<(), CliError> {
    let spec = LoadSpec {
        count: a.count,
        key_size: a.key_size,
        value_size: a.value_size,
        width: a.width,
        expire_after_ms: None,
    };
    spec.validate()?;
    let round_bytes = a
        .width
        .saturating_mul(a.depth)
        .saturating_mul(a.key_size + a.value_size);
    if a.depth == 0 || round_bytes > LOAD_ROUND_BYTES_MAX {
        return Err(CliError::Usage(format!(
            "--depth {} x --width {} pairs of {} + {} bytes: a round trip must send 1 to \
             {LOAD_ROUND_BYTES_MAX} bytes",
            a.depth, a.width, a.key_size, a.value_size
        )));
    }
    let mut client = Client::connect(&a.conn)?;
    let pb = progress::bar(a.count, LOAD_TEMPLATE);
    pb.set_message("loading");
    let start = Instant::now();
    let sent = send_load(&mut client, &spec, a.depth, &mut |done| {
        pb.set_position(done)
    });
    pb.finish_and_clear();
    sent?;
    let seconds = start.elapsed().as_secs_f64();
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "loaded {} keys in {seconds:.3} s ({:.0} keys/s)",
        a.count,
        a.count as f64 / seconds.max(1e-9)
    )?;
    out.flush()?;
    Ok(())
}

/// Sends keys `0..spec.count` with their values as MSETs of `spec.width` pairs, `depth` of
/// them per round trip; `progress` gets the number of keys acknowledged so far.
fn send_load(
    client: &mut Client,
    spec: &LoadSpec,
    depth: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<(), CliError> {
    let (ks, pair) = (spec.key_size, spec.key_size + spec.value_size);
    let round_pairs = spec.width * depth;
    // One round's keys and values, generated in place (no allocation per key).
    let mut buf = vec![0u8; round_pairs * pair];
    let mut done = 0u64;
    while done < spec.count {
        let n = (spec.count - done).min(round_pairs as u64) as usize;
        for (j, chunk) in buf.chunks_exact_mut(pair).take(n).enumerate() {
            let (k, v) = chunk.split_at_mut(ks);
            write_key(done + j as u64, k);
            write_value(done + j as u64, v);
        }
        let mut pipeline = client.conn.pipeline();
        for vector in buf[..n * pair].chunks(spec.width * pair) {
            let mut args: Vec<&[u8]> = Vec::with_capacity(2 * spec.width + 1);
            args.push(b"MSET");
            for kv in vector.chunks_exact(pair) {
                let (k, v) = kv.split_at(ks);
                args.extend([k, v]);
            }
            pipeline.command(&args);
        }
        let replies = pipeline.execute().map_err(|e| client.error(e))?;
        for reply in replies {
            match reply {
                Ok(Value::Simple(s)) if s == "OK" => {}
                Ok(other) => {
                    return Err(client.error(quiver_client::Error::UnexpectedReply(format!(
                        "MSET: expected +OK, got {} {other:?}",
                        other.kind()
                    ))))
                }
                Err(e) => return Err(client.error(e)),
            }
        }
        done += n as u64;
        progress(done);
    }
    Ok(())
}
