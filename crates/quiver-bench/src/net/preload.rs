//! The load phase: keys `0..keys` with their values, as pipelined MSET vectors on one
//! connection (hashes: pipelined runs of HSETs, one per key), before anything is measured
//! (and only if the server holds fewer keys).

use std::collections::VecDeque;
use std::time::Instant;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::net::closed::READ_BUF;
use crate::net::resp::ReplyScanner;
use crate::net::spec::NetConfig;
use crate::net::workload::{Inserts, RequestGen};

/// Pairs per MSET: one engine vector on a Quiver server, and per-command overhead amortized
/// on any server.
pub const LOAD_PAIRS: usize = 256;
/// Largest MSET of the load (fewer pairs when values are large).
pub const LOAD_MSET_BYTES_MAX: usize = 4 << 20;
/// MSETs in flight: enough to keep the server busy while a reply travels back.
pub const LOAD_DEPTH: usize = 8;

/// What the load did.
#[derive(Clone, Debug, Serialize)]
pub struct NetLoadReport {
    /// Keys the server held before (DBSIZE).
    pub present_before: u64,
    pub keys: u64,
    pub seconds: f64,
    pub msets: u64,
    pub pairs_per_mset: usize,
    /// Keys as hashes of this many fields: a batch is then that many HSETs.
    pub hash_fields: Option<usize>,
}

impl NetLoadReport {
    pub fn keys_per_sec(&self) -> f64 {
        self.keys as f64 / self.seconds.max(1e-9)
    }

    /// How the keys went: `250 MSETs of 4000 pairs`, or `250 batches of 4000 HSETs of 10
    /// fields`.
    pub fn requests(&self) -> String {
        match self.hash_fields {
            None => format!("{} MSETs of {} pairs", self.msets, self.pairs_per_mset),
            Some(f) => format!(
                "{} batches of {} HSETs of {f} fields",
                self.msets, self.pairs_per_mset
            ),
        }
    }
}

/// Keys per load MSET (or run of HSETs) for this key and (largest) value size.
pub fn pairs_per_mset(cfg: &NetConfig) -> usize {
    let fields = cfg.hash.map_or(1, |h| h.fields);
    let pair_bytes = cfg.key_size + fields * (cfg.largest_value() + 40);
    (LOAD_MSET_BYTES_MAX / pair_bytes).clamp(1, LOAD_PAIRS)
}

/// Writes keys `0..cfg.keys`; `progress` gets the count written so far after each read.
pub async fn load(
    stream: &mut TcpStream,
    cfg: &NetConfig,
    display: &str,
    present_before: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<NetLoadReport> {
    let net = |e| Error::Net {
        addr: display.to_string(),
        what: "loading",
        source: e,
    };
    let gen = RequestGen::new(cfg, 0, &Inserts::default())?;
    let pairs = pairs_per_mset(cfg);
    let mut out = Vec::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut scanner = ReplyScanner::new();
    // Keys of each load request in flight and the replies it still waits for, oldest first.
    let mut inflight: VecDeque<(usize, usize)> = VecDeque::with_capacity(LOAD_DEPTH);
    let (mut next, mut done, mut msets) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    loop {
        out.clear();
        while inflight.len() < LOAD_DEPTH && next < cfg.keys {
            let n = (cfg.keys - next).min(pairs as u64) as usize;
            let replies = gen.put_load(&mut out, next, n);
            inflight.push_back((n, replies));
            next += n as u64;
            msets += 1;
        }
        if !out.is_empty() {
            stream.write_all(&out).await.map_err(net)?;
        }
        if inflight.is_empty() {
            break;
        }
        let n = stream.read(&mut buf).await.map_err(net)?;
        if n == 0 {
            return Err(net(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        let mut refused: Option<String> = None;
        scanner
            .feed(&buf[..n], |r, text| {
                if r.error && refused.is_none() {
                    refused = Some(String::from_utf8_lossy(text).into_owned());
                }
                if let Some((keys, replies)) = inflight.front_mut() {
                    *replies -= 1;
                    if *replies == 0 {
                        done += *keys as u64;
                        inflight.pop_front();
                    }
                }
            })
            .map_err(|e| Error::Protocol {
                addr: display.to_string(),
                reason: e.to_string(),
            })?;
        if let Some(reply) = refused {
            return Err(Error::ServerReply {
                addr: display.to_string(),
                what: "MSET of the load",
                reply,
            });
        }
        progress(done);
    }
    Ok(NetLoadReport {
        present_before,
        keys: cfg.keys,
        seconds: start.elapsed().as_secs_f64(),
        msets,
        pairs_per_mset: pairs,
        hash_fields: cfg.hash.map(|h| h.fields),
    })
}
