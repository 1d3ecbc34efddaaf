//! Samples of a measured window (`bench net --sample-every-s S`), for soak runs: every S
//! seconds one [`NetSample`] — the latency of the replies since the previous sample and the
//! server's state — handed to the observer as it is taken. A first sample at the window's start
//! is the baseline (no latency yet), a last one closes the window.
//!
//! What a sample holds, and how it is measured:
//! - `p50_us`.. `max_us`: the replies that arrived since the previous sample, each charged as
//!   in the run's record (closed loop: from its send; open loop: from its intended send time);
//!   requests still unanswered count in the sample their reply arrives in;
//! - `rss_bytes`, `rss_anon_bytes`, `rss_file_bytes`: `VmRSS`, `RssAnon`, `RssFile` of
//!   `/proc/<pid>/status` (`--server-pid`); `fds`: the entries of `/proc/<pid>/fd`;
//! - `disk_bytes`: the regular files under `--server-dir`, by their allocated blocks
//!   (`st_blocks` x 512, what `du --block-size=1` counts for them), not their apparent sizes: a
//!   segment file is sparse, as long as a whole segment from its creation. Of these,
//!   `disk_segment_bytes` are the segment files and `disk_reserve_bytes` the `RESERVE` file
//!   (space set aside, constant by design);
//! - `keys`, `expiring_keys`: INFO keyspace, summed over the databases; `records`,
//!   `dead_records`, `garbage_ratio`, `segments`, `compaction_copied_records`,
//!   `maintenance_stall_max_us`: INFO persistence (Quiver's; absent elsewhere);
//! - `live_bytes_est`: the bytes the live keys' records take in the log. The server does not
//!   report it, so it is estimated: the keys without expiry times the mean record length over
//!   the range of value sizes (written values draw their sizes uniformly from it, the load's
//!   too, so the live ones are uniform over it), plus the expiring keys times the same with
//!   the expiry field (Quiver servers only: the length is Quiver's record format);
//! - `disk_bound_bytes`: `live_bytes_est / (1 - garbage_ratio_trigger)`. Compaction starts when
//!   a partition's dead records pass `garbage_ratio_trigger` of its records, so between passes
//!   its log holds about that many records per live one, and as many bytes when sizes do not
//!   depend on liveness. The trigger is the store's default (`Options::compact_garbage_ratio`),
//!   which `quiver serve` has no setting for.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::net::TcpStream;

use quiver_store::layout::RESERVE_FILE;
use quiver_store::log::format::{ext_len, record_len_ext, FLAG_EXPIRES};
use quiver_store::log::segment::SEGMENT_SUFFIX;

use crate::net::conn::{self, SetupReply};
use crate::net::hist::LatencyRecorder;
use crate::net::procstat;
use crate::net::record::rfc3339_utc;
use crate::net::spec::NetConfig;
use crate::net::tally::Tally;

/// The `bench` field of a sample: what `quiver bench report` recognises it by.
pub const SAMPLE_BENCH: &str = "net-sample";
/// Longest wait for the server's INFO reply (or a new connection for it): a server that
/// stalls must not hold the run past its end. The sample then goes without INFO's figures.
pub const INFO_TIMEOUT: Duration = Duration::from_secs(2);
/// Deepest directory the data directory walk enters (a store is its root and one directory
/// per partition).
pub const DIR_DEPTH_MAX: usize = 4;
/// Most entries the data directory walk visits.
pub const DIR_ENTRIES_MAX: usize = 1_000_000;
/// The unit of `st_blocks`, whatever the file system's block size.
const ST_BLOCK_BYTES: u64 = 512;
/// Nanoseconds per second.
const NS_PER_S: f64 = 1e9;

/// One sample; see the module documentation. `None`: not measured (no `--server-pid`, no
/// `--server-dir`, a server without the figure, or it could not be read this time).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetSample {
    /// [`SAMPLE_BENCH`].
    pub bench: &'static str,
    pub system: String,
    pub workload: String,
    /// Operations per second asked for (open loop).
    pub rate_target: Option<f64>,
    pub connections: usize,
    /// Keys in the data set (`--keys`).
    pub keys_total: u64,
    /// Seconds since the measured window began, when this sample was taken.
    pub t_s: f64,
    /// Seconds since the previous sample (0 for the first).
    pub interval_s: f64,
    /// Replies, errors (error replies and broken connections) and null reads in the interval.
    pub ops: u64,
    pub ops_per_sec: f64,
    pub errors: u64,
    pub misses: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    /// The server's CPU seconds over the interval per second: 1.0 is one core busy.
    pub server_cpu_util: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub fds: Option<u64>,
    pub disk_bytes: Option<u64>,
    pub disk_segment_bytes: Option<u64>,
    pub disk_reserve_bytes: Option<u64>,
    /// The figures read from INFO, as fields of the sample's own line.
    #[serde(flatten)]
    pub info: InfoFigures,
    pub live_bytes_est: Option<u64>,
    pub garbage_ratio_trigger: Option<f64>,
    pub disk_bound_bytes: Option<u64>,
    pub tags: BTreeMap<String, String>,
    /// When the sample was taken, RFC 3339 UTC.
    pub at: String,
}

impl NetSample {
    // Numbers, strings, options and a map with string keys: serializing to JSON cannot fail.
    #[allow(clippy::expect_used)]
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a sample serializes")
    }
}

/// Bytes of the regular files under a directory, by allocated blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirBytes {
    pub allocated: u64,
    /// Of which segment files (`*.seg`).
    pub segments: u64,
    /// Of which the `RESERVE` file.
    pub reserve: u64,
}

/// Walks `dir` (at most [`DIR_DEPTH_MAX`] levels, [`DIR_ENTRIES_MAX`] entries; symbolic links
/// are not followed) and adds up its regular files' allocated blocks. Files that vanish during
/// the walk (compaction retires segments) are skipped.
pub fn dir_bytes(dir: &Path) -> std::io::Result<DirBytes> {
    let mut total = DirBytes::default();
    let mut visited = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            // The root must be readable; a subdirectory may have just been removed.
            Err(e) if depth == 0 => return Err(e),
            Err(_) => continue,
        };
        for entry in entries {
            visited += 1;
            if visited > DIR_ENTRIES_MAX {
                return Ok(total);
            }
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() && depth + 1 < DIR_DEPTH_MAX {
                stack.push((entry.path(), depth + 1));
            } else if meta.is_file() {
                let bytes = meta.blocks() * ST_BLOCK_BYTES;
                total.allocated += bytes;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name == RESERVE_FILE {
                    total.reserve += bytes;
                } else if name.ends_with(SEGMENT_SUFFIX) {
                    total.segments += bytes;
                }
            }
        }
    }
    Ok(total)
}

/// What a sample reads from INFO.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InfoFigures {
    pub keys: Option<u64>,
    pub expiring_keys: Option<u64>,
    pub records: Option<u64>,
    pub dead_records: Option<u64>,
    pub garbage_ratio: Option<f64>,
    /// Segment files of the store's partitions (each an open descriptor of the server's).
    pub segments: Option<u64>,
    pub compaction_copied_records: Option<u64>,
    pub maintenance_stall_max_us: Option<u64>,
}

/// Reads the keyspace (`db0:keys=3,expires=1,avg_ttl=0`, summed over the databases) and the
/// persistence figures of an INFO reply.
pub fn parse_info(text: &str) -> InfoFigures {
    let mut f = InfoFigures::default();
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    let mut keyspace_seen = false;
    for line in text.lines() {
        let Some((name, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        if name.starts_with("db") && name[2..].bytes().all(|b| b.is_ascii_digit()) {
            keyspace_seen = true;
            for part in value.split(',') {
                let n = |k: &str| part.strip_prefix(k).and_then(|v| v.parse::<u64>().ok());
                if let Some(k) = n("keys=") {
                    *f.keys.get_or_insert(0) += k;
                } else if let Some(e) = n("expires=") {
                    *f.expiring_keys.get_or_insert(0) += e;
                }
            }
        } else {
            fields.insert(name, value);
        }
    }
    // An empty database is not listed: a keyspace section without lines is no keys, and a
    // reply without the section says nothing.
    if keyspace_seen || text.contains("# Keyspace") {
        f.keys.get_or_insert(0);
        f.expiring_keys.get_or_insert(0);
    }
    let int = |k: &str| fields.get(k).and_then(|v| v.parse::<u64>().ok());
    f.records = int("records");
    f.dead_records = int("dead_records");
    f.garbage_ratio = fields.get("garbage_ratio").and_then(|v| v.parse().ok());
    f.segments = int("segments");
    f.compaction_copied_records = int("compaction_copied_records");
    f.maintenance_stall_max_us = int("maintenance_stall_max_us");
    f
}

/// The mean length of a record (a put of database 0, padding included) of a `key_size`-byte
/// key and a value of a size uniform in `value_min..=value_max`, with `ext` bytes of header
/// fields. The range is at most `VALUE_SIZE_MAX` sizes (validated): one pass over it.
pub fn mean_record_bytes(key_size: usize, value_min: usize, value_max: usize, ext: usize) -> f64 {
    let sizes = value_max.saturating_sub(value_min) + 1;
    let sum: u64 = (value_min..=value_max.max(value_min))
        .map(|v| record_len_ext(ext, key_size, v) as u64)
        .sum();
    sum as f64 / sizes as f64
}

/// Takes the samples of one run; see the module documentation.
pub struct Sampler {
    addr: SocketAddr,
    display: String,
    password: Option<String>,
    /// The connection INFO is read on; reopened at the next sample after a failure.
    info: Option<TcpStream>,
    base: NetSample,
    server_pid: Option<u32>,
    server_dir: Option<PathBuf>,
    every_ns: u64,
    start_ns: u64,
    /// Samples taken so far.
    taken: u64,
    /// Mean record lengths of a live key without and with an expiry (Quiver servers only).
    record_bytes: Option<(f64, f64)>,
    /// At the previous sample: its time, the tally's counters, the server's CPU seconds.
    prev_ns: u64,
    prev_ops: u64,
    prev_errors: u64,
    prev_misses: u64,
    prev_cpu_s: Option<f64>,
}

impl Sampler {
    /// Opens the INFO connection; sampling starts at `start_ns`, every `every_s` seconds.
    pub async fn connect(
        cfg: &NetConfig,
        addr: SocketAddr,
        display: &str,
        system: &str,
        every_s: f64,
        start_ns: u64,
    ) -> crate::error::Result<Sampler> {
        let info = conn::connect(addr, display, cfg.password.as_deref()).await?;
        let quiver = system == "quiver";
        let record_bytes = quiver.then(|| {
            let (lo, hi) = (cfg.value_size, cfg.largest_value());
            (
                mean_record_bytes(cfg.key_size, lo, hi, 0),
                mean_record_bytes(cfg.key_size, lo, hi, ext_len(FLAG_EXPIRES)),
            )
        });
        Ok(Sampler {
            addr,
            display: display.to_string(),
            password: cfg.password.clone(),
            info: Some(info),
            base: NetSample {
                bench: SAMPLE_BENCH,
                system: system.to_string(),
                workload: cfg.workload_name(),
                rate_target: None,
                connections: cfg.connections,
                keys_total: cfg.keys,
                t_s: 0.0,
                interval_s: 0.0,
                ops: 0,
                ops_per_sec: 0.0,
                errors: 0,
                misses: 0,
                p50_us: None,
                p99_us: None,
                p999_us: None,
                max_us: None,
                server_cpu_util: None,
                rss_bytes: None,
                rss_anon_bytes: None,
                rss_file_bytes: None,
                fds: None,
                disk_bytes: None,
                disk_segment_bytes: None,
                disk_reserve_bytes: None,
                info: InfoFigures::default(),
                live_bytes_est: None,
                garbage_ratio_trigger: quiver
                    .then(|| quiver_store::Options::default().compact_garbage_ratio),
                disk_bound_bytes: None,
                tags: cfg.tags.clone(),
                at: String::new(),
            },
            server_pid: cfg.server_pid,
            server_dir: cfg.server_dir.clone(),
            every_ns: (every_s * NS_PER_S) as u64,
            start_ns,
            taken: 0,
            record_bytes,
            prev_ns: start_ns,
            prev_ops: 0,
            prev_errors: 0,
            prev_misses: 0,
            prev_cpu_s: None,
        })
    }

    /// The run's target rate, for the samples' records.
    pub fn set_rate(&mut self, rate: Option<f64>) {
        self.base.rate_target = rate;
    }

    /// When the next sample is due: on a fixed schedule from the window's start, so that slow
    /// samples do not make the later ones drift.
    pub fn next_due_ns(&self) -> u64 {
        self.start_ns + self.taken * self.every_ns
    }

    /// Takes a sample at `now_ns`. The first one starts the tally's recent latencies.
    pub async fn sample(&mut self, now_ns: u64, tally: &RefCell<Tally>) -> NetSample {
        let mut s = self.base.clone();
        s.at = rfc3339_utc(SystemTime::now());
        s.t_s = now_ns.saturating_sub(self.start_ns) as f64 / NS_PER_S;
        s.interval_s = now_ns.saturating_sub(self.prev_ns) as f64 / NS_PER_S;
        {
            let mut t = tally.borrow_mut();
            let recent = match &mut t.recent {
                Some(r) => std::mem::take(r),
                None => {
                    t.recent = Some(LatencyRecorder::new());
                    LatencyRecorder::new()
                }
            };
            if let Some(l) = recent.summary() {
                (s.p50_us, s.p99_us, s.p999_us, s.max_us) = (
                    Some(l.p50_us),
                    Some(l.p99_us),
                    Some(l.p999_us),
                    Some(l.max_us),
                );
            }
            let errors = t.error_replies + t.disconnects;
            s.ops = t.ops - self.prev_ops;
            s.errors = errors - self.prev_errors;
            s.misses = t.misses - self.prev_misses;
            (self.prev_ops, self.prev_errors, self.prev_misses) = (t.ops, errors, t.misses);
        }
        if s.interval_s > 0.0 {
            s.ops_per_sec = s.ops as f64 / s.interval_s;
        }
        if let Some(pid) = self.server_pid {
            let cpu = procstat::process_cpu_s(pid);
            if let (Some(a), Some(b)) = (self.prev_cpu_s, cpu) {
                s.server_cpu_util = (s.interval_s > 0.0).then(|| (b - a).max(0.0) / s.interval_s);
            }
            self.prev_cpu_s = cpu;
            if let Some(m) = procstat::process_memory(pid) {
                (s.rss_bytes, s.rss_anon_bytes, s.rss_file_bytes) = (Some(m.rss), m.anon, m.file);
            }
            s.fds = procstat::process_fds(pid);
        }
        if let Some(dir) = &self.server_dir {
            if let Ok(d) = dir_bytes(dir) {
                s.disk_bytes = Some(d.allocated);
                s.disk_segment_bytes = Some(d.segments);
                s.disk_reserve_bytes = Some(d.reserve);
            }
        }
        if let Some(f) = self.info().await {
            s.info = f;
        }
        if let (Some((plain, expiring)), Some(keys), Some(exp)) =
            (self.record_bytes, s.info.keys, s.info.expiring_keys)
        {
            let exp = exp.min(keys);
            let live = (keys - exp) as f64 * plain + exp as f64 * expiring;
            s.live_bytes_est = Some(live as u64);
            if let Some(r) = s.garbage_ratio_trigger.filter(|r| *r > 0.0 && *r < 1.0) {
                s.disk_bound_bytes = Some((live / (1.0 - r)) as u64);
            }
        }
        self.prev_ns = now_ns;
        self.taken += 1;
        s
    }

    /// INFO persistence and keyspace, or `None` (the connection is dropped, to be reopened at
    /// the next sample: a reply that came late would answer the next request).
    async fn info(&mut self) -> Option<InfoFigures> {
        if self.info.is_none() {
            let c = conn::connect(self.addr, &self.display, self.password.as_deref());
            self.info = tokio::time::timeout(INFO_TIMEOUT, c).await.ok()?.ok();
        }
        let s = self.info.as_mut()?;
        let args: [&[u8]; 3] = [b"INFO", b"persistence", b"keyspace"];
        let reply =
            tokio::time::timeout(INFO_TIMEOUT, conn::command(s, &self.display, "INFO", &args))
                .await;
        match reply {
            Ok(Ok(SetupReply::Bulk(b))) => Some(parse_info(&String::from_utf8_lossy(&b))),
            _ => {
                self.info = None;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_keyspace_is_summed_and_persistence_read() {
        let text = "# Persistence\r\nloading:0\r\nrecords:1200\r\ndead_records:300\r\n\
                    garbage_ratio:0.2500\r\nsegments:9\r\ncompaction_copied_records:77\r\n\
                    maintenance_stall_max_us:450\r\n\r\n# Keyspace\r\n\
                    db0:keys=900,expires=100,avg_ttl=5000\r\ndb3:keys=10,expires=0,avg_ttl=0\r\n";
        let f = parse_info(text);
        assert_eq!(f.keys, Some(910));
        assert_eq!(f.expiring_keys, Some(100));
        assert_eq!(f.records, Some(1200));
        assert_eq!(f.dead_records, Some(300));
        assert_eq!(f.garbage_ratio, Some(0.25));
        assert_eq!(f.segments, Some(9));
        assert_eq!(f.compaction_copied_records, Some(77));
        assert_eq!(f.maintenance_stall_max_us, Some(450));
        // An empty keyspace section is no keys; a reply without one says nothing.
        assert_eq!(parse_info("# Keyspace\r\n").keys, Some(0));
        assert_eq!(parse_info("# Persistence\r\nrecords:5\r\n").keys, None);
        // redis-server: no records.
        assert_eq!(
            parse_info("# Keyspace\r\ndb0:keys=5,expires=0,avg_ttl=0\r\n").records,
            None
        );
    }

    #[test]
    fn mean_record_length_over_a_range() {
        // One size: that record's length.
        let one = record_len_ext(0, 16, 100) as f64;
        assert_eq!(mean_record_bytes(16, 100, 100, 0), one);
        // A range: between its ends' lengths, near the middle size's.
        let m = mean_record_bytes(16, 64, 1024, 0);
        let mid = record_len_ext(0, 16, 544) as f64;
        assert!((m - mid).abs() < 8.0, "{m} vs {mid}");
        // The expiry field makes each record longer.
        assert!(mean_record_bytes(16, 64, 1024, ext_len(FLAG_EXPIRES)) > m);
    }

    #[test]
    fn data_directory_bytes_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("p0");
        std::fs::create_dir(&part).unwrap();
        let write = |p: PathBuf, n: usize| std::fs::write(p, vec![1u8; n]).unwrap();
        write(part.join(format!("000001{SEGMENT_SUFFIX}")), 10_000);
        write(dir.path().join(RESERVE_FILE), 5_000);
        write(dir.path().join("QUIVER"), 100);
        // A sparse file counts by its blocks, not its length.
        let sparse = std::fs::File::create(part.join(format!("000002{SEGMENT_SUFFIX}"))).unwrap();
        sparse.set_len(1 << 30).unwrap();
        let d = dir_bytes(dir.path()).unwrap();
        let blocks = |p: PathBuf| std::fs::metadata(p).unwrap().blocks() * ST_BLOCK_BYTES;
        let seg = blocks(part.join(format!("000001{SEGMENT_SUFFIX}")))
            + blocks(part.join(format!("000002{SEGMENT_SUFFIX}")));
        assert_eq!(d.segments, seg);
        assert!(seg < 1 << 20, "{seg}");
        assert_eq!(d.reserve, blocks(dir.path().join(RESERVE_FILE)));
        assert_eq!(
            d.allocated,
            seg + d.reserve + blocks(dir.path().join("QUIVER"))
        );
        assert!(dir_bytes(&dir.path().join("absent")).is_err());
    }

    /// A sampled open-loop run of the soak's mix against an in-process server: the samples'
    /// schedule and figures, and the run's record beside them. No timing thresholds.
    #[test]
    fn a_sampled_run_reports_on_its_schedule() {
        use crate::net::{self, Mode, NetObserver, NetRecord};
        use quiver_node::testing::TestServer;

        #[derive(Default)]
        struct Collect {
            records: Vec<NetRecord>,
            samples: Vec<NetSample>,
        }
        impl NetObserver for Collect {
            fn record(&mut self, r: &NetRecord) {
                self.records.push(r.clone());
            }
            fn sample(&mut self, s: &NetSample) {
                self.samples.push(s.clone());
            }
        }

        let server = TestServer::start();
        let mut cfg = NetConfig::new("127.0.0.1", server.port());
        cfg.keys = 500;
        cfg.load = true;
        cfg.value_size = 8;
        cfg.value_size_max = Some(64);
        cfg.get_ratio = 0.5;
        cfg.del_ratio = 0.2;
        cfg.expire_ratio = 0.2;
        cfg.ttl_ms = (50, 200);
        cfg.connections = 2;
        cfg.mode = Mode::Open {
            rates: vec![2000.0],
            max_outstanding: 1000,
        };
        cfg.warmup_s = 0.1;
        cfg.duration_s = 1.0;
        cfg.sample_every_s = Some(0.25);
        cfg.server_pid = Some(std::process::id());
        cfg.server_dir = Some(server.dir().to_path_buf());
        cfg.tags.insert("run".into(), "t".into());
        let mut obs = Collect::default();
        net::run(&cfg, &mut obs).unwrap();
        let r = &obs.records[0];
        assert_eq!(
            (r.errors, r.del_ratio, r.expire_ratio),
            (0, 0.2, 0.2),
            "{r:?}"
        );
        assert_eq!((r.ttl_ms_min, r.ttl_ms_max), (Some(50), Some(200)));
        assert_eq!(r.workload, "mixed-50-10-ex20-del20");
        // At 0, 0.25, 0.5 and 0.75 s, and at the window's end.
        let s = &obs.samples;
        assert_eq!(s.len(), 5, "{s:?}");
        assert!(s[0].p99_us.is_none() && s[0].interval_s < 0.25);
        assert!((s[4].t_s - cfg.duration_s).abs() < 1e-6, "{}", s[4].t_s);
        assert!(s.windows(2).all(|w| w[0].t_s <= w[1].t_s));
        // Every reply of the window is in exactly one sample.
        assert_eq!(s.iter().map(|x| x.ops).sum::<u64>(), r.ops);
        for x in s {
            assert_eq!(x.bench, SAMPLE_BENCH);
            assert_eq!(x.system, "quiver");
            assert_eq!(x.rate_target, Some(2000.0));
            assert_eq!(x.tags["run"], "t");
            assert!(x.rss_bytes.unwrap() > 0 && x.fds.unwrap() > 0, "{x:?}");
            let (disk, segs) = (x.disk_bytes.unwrap(), x.disk_segment_bytes.unwrap());
            assert!(
                segs > 0 && segs + x.disk_reserve_bytes.unwrap() <= disk,
                "{x:?}"
            );
            assert!(
                x.info.keys.unwrap() <= cfg.keys && x.info.records.is_some(),
                "{x:?}"
            );
            let live = x.live_bytes_est.unwrap() as f64;
            assert_eq!(x.garbage_ratio_trigger, Some(0.5));
            let bound = x.disk_bound_bytes.unwrap() as f64;
            assert!((bound - 2.0 * live).abs() <= 1.0, "{x:?}");
            let line: serde_json::Value = serde_json::from_str(&x.to_json_line()).unwrap();
            assert_eq!(line["bench"], "net-sample");
        }
    }
}
