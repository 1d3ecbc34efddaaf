//! What `bench net` is asked to do: the server, the data, the mix, the loop, the labels; and
//! the limits every parameter is checked against before a connection opens.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::distribution::{Distribution, Zipf};
use crate::error::{Error, Result};
use crate::keys::check_key_params;
use crate::net::token_bucket::{RATE_MAX, RATE_MIN};

/// Most connections (each is a socket and a few buffers on one client thread).
pub const CONNECTIONS_MAX: usize = 10_000;
/// Deepest pipeline per connection in the closed loop.
pub const DEPTH_MAX: usize = 65_536;
/// Widest MGET / MSET (the server's default vector limit).
pub const WIDTH_MAX: usize = 65_536;
/// Largest value: the load and every write build values of this size in RAM.
pub const VALUE_SIZE_MAX: usize = 16 << 20;
/// Largest single request (`width` pairs of key and value): well under the query-buffer
/// limits of Redis (1 GiB) and Quiver.
pub const REQUEST_BYTES_MAX: usize = 64 << 20;
/// Longest measured run and longest warm-up, in seconds.
pub const DURATION_S_MAX: f64 = 86_400.0;
pub const WARMUP_S_MAX: f64 = 3_600.0;

/// Checks a run's warm-up and measured seconds against [`WARMUP_S_MAX`] and
/// [`DURATION_S_MAX`] (every load generator's window).
pub fn check_window(warmup_s: f64, duration_s: f64) -> Result<()> {
    if !(duration_s > 0.0 && duration_s <= DURATION_S_MAX) {
        return Err(Error::Invalid(format!(
            "duration {duration_s} s outside (0, {DURATION_S_MAX}]"
        )));
    }
    if !(0.0..=WARMUP_S_MAX).contains(&warmup_s) {
        return Err(Error::Invalid(format!(
            "warm-up {warmup_s} s outside [0, {WARMUP_S_MAX}]"
        )));
    }
    Ok(())
}
/// Most rates in one `--rate-sweep`.
pub const SWEEP_RATES_MAX: usize = 1000;
/// Default cap on a connection's outstanding requests in the open loop: large, so that a
/// stalled server shows up as latency rather than as a client that politely stopped sending.
pub const MAX_OUTSTANDING_DEFAULT: usize = 65_536;
/// Highest cap on outstanding requests per connection.
pub const MAX_OUTSTANDING_MAX: usize = 1 << 24;
/// Longest label (`--system`, `--workload`, a tag's key or value).
pub const LABEL_LEN_MAX: usize = 256;
/// Most `--tag`s.
pub const TAGS_MAX: usize = 64;
/// Longest time to live of an expiring write: 30 days (Redis reads a larger EX as a Unix
/// time, not a relative one).
pub const TTL_MS_MAX: u64 = 30 * 86_400_000;
/// Shortest sampling interval: a sample reads INFO, `/proc` and the data directory, which
/// must stay a small share of the client's thread.
pub const SAMPLE_EVERY_S_MIN: f64 = 0.1;
/// Most samples in one run (`duration_s / sample_every_s`): the samples are kept nowhere but
/// handed out one by one, so this only bounds the output.
pub const SAMPLES_MAX: f64 = 1_000_000.0;
/// Default time to live of expiring writes: 1 s to 60 s, so that keys expire within a soak's
/// first minute and keep expiring throughout.
pub const TTL_MS_DEFAULT: (u64, u64) = (1_000, 60_000);

/// Most fields of a hash (`--hash-fields`): field names are `f` and four digits.
pub const HASH_FIELDS_MAX: usize = 10_000;
/// Bytes of a field's name.
pub const HASH_FIELD_LEN: usize = 5;
/// With inserts, the key size must hold this many times `keys` (the loaded keys, then those
/// inserted past them).
pub const INSERTED_KEYS_ROOM: u64 = 10;

/// Keys as hashes (`--hash-fields`): every key a hash of `fields` fields (`f0000`, `f0001`,
/// ...), each field's value as a string key's would be. A read reads `width` fields of one
/// hash (HGET, or HMGET when wider; HGETALL when `read_all`), a write sets `width` fields of
/// one hash (HSET), the fields a run of consecutive ones from a random first; the load is one
/// HSET of all the fields per key.
///
/// YCSB's workloads D and F as its Redis binding sends them: `insert_ratio` of the operations
/// insert a new hash (HSET of all its fields) at the next key past the loaded ones — the keys
/// of one `bench net` process, shared by its connections, so several processes insert the
/// same keys —, and with `read_modify_write` each write first reads the hash (its own
/// request, the write sent after its reply at depth 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HashShape {
    pub fields: usize,
    pub read_all: bool,
    pub insert_ratio: f64,
    pub read_modify_write: bool,
}

impl HashShape {
    /// Hashes of `fields` fields, read by field (or whole with `read_all`), no inserts, no
    /// read-modify-write.
    pub fn new(fields: usize, read_all: bool) -> HashShape {
        HashShape {
            fields,
            read_all,
            insert_ratio: 0.0,
            read_modify_write: false,
        }
    }
}

/// How requests are paced.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Each connection keeps `depth` requests outstanding (depth 1: request-response).
    Closed { depth: usize },
    /// Requests at `rate` per second in total (one run per rate), latency measured from each
    /// request's intended send time; at most `max_outstanding` per connection.
    Open {
        rates: Vec<f64>,
        max_outstanding: usize,
    },
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Closed { .. } => "closed",
            Mode::Open { .. } => "open",
        }
    }
}

/// A `bench net` invocation.
#[derive(Clone, Debug)]
pub struct NetConfig {
    pub host: String,
    pub port: u16,
    /// Sent with AUTH on every connection when given.
    pub password: Option<String>,
    /// Keys `0..keys` are read and written (and loaded by `load`).
    pub keys: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub distribution: Distribution,
    pub zipf_theta: f64,
    /// Largest value a write draws: each written value's size is uniform in
    /// `value_size..=value_size_max` (the load's too, from the key's index). `None`: every
    /// value is `value_size` bytes.
    pub value_size_max: Option<usize>,
    /// Probability that an operation reads; otherwise it writes (or deletes, or writes with an
    /// expiry: see the next two).
    pub get_ratio: f64,
    /// Probability that an operation deletes its keys (DEL).
    pub del_ratio: f64,
    /// Probability that an operation is a SET with an expiry (EX or PX, one or the other at
    /// random), of a time to live uniform in `ttl_ms`. Width 1 only (MSET has no expiry).
    pub expire_ratio: f64,
    /// Time to live of expiring writes, in milliseconds: `(shortest, longest)`.
    pub ttl_ms: (u64, u64),
    /// Keys per operation: 1 is GET / SET, more is MGET / MSET (with `hash`: fields of one
    /// hash per operation).
    pub width: usize,
    /// Keys as hashes: see [`HashShape`].
    pub hash: Option<HashShape>,
    pub connections: usize,
    pub mode: Mode,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// Load keys `0..keys` first unless the server's DBSIZE already reaches `keys`.
    pub load: bool,
    /// Load (if needed) and measure nothing.
    pub load_only: bool,
    /// The server process, for its CPU time and RSS.
    pub server_pid: Option<u32>,
    /// `None`: detected from the server's INFO (`quiver` or `redis`).
    pub system: Option<String>,
    /// `None`: derived from the mix ([`NetConfig::default_workload_name`]).
    pub workload: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// Seed of the key choices (each connection derives its own from it).
    pub seed: u64,
    /// Every this many seconds of the measured window, a [`crate::net::sample::NetSample`]:
    /// the latency of that interval, and the server's memory, descriptors, disk and keys.
    pub sample_every_s: Option<f64>,
    /// The server's data directory: its bytes on disk in every sample.
    pub server_dir: Option<PathBuf>,
}

impl NetConfig {
    /// A closed-loop read-only configuration with the defaults of the command line.
    pub fn new(host: impl Into<String>, port: u16) -> NetConfig {
        NetConfig {
            host: host.into(),
            port,
            password: None,
            keys: 1_000_000,
            key_size: 16,
            value_size: 32,
            value_size_max: None,
            distribution: Distribution::Uniform,
            zipf_theta: 0.99,
            get_ratio: 1.0,
            del_ratio: 0.0,
            expire_ratio: 0.0,
            ttl_ms: TTL_MS_DEFAULT,
            width: 1,
            hash: None,
            connections: 50,
            mode: Mode::Closed { depth: 1 },
            warmup_s: 1.0,
            duration_s: 10.0,
            load: false,
            load_only: false,
            server_pid: None,
            system: None,
            workload: None,
            tags: BTreeMap::new(),
            seed: 0x5eed,
            sample_every_s: None,
            server_dir: None,
        }
    }

    /// The largest value written: `value_size_max`, or `value_size` without a range.
    pub fn largest_value(&self) -> usize {
        self.value_size_max.unwrap_or(self.value_size)
    }

    /// Whether reads may find no value by design (deletes and expiry in the mix), so that
    /// misses say nothing about the load.
    pub fn misses_expected(&self) -> bool {
        self.del_ratio > 0.0 || self.expire_ratio > 0.0
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.keys == 0 {
            return bad("--keys must be at least 1".into());
        }
        check_key_params(self.keys, self.key_size)?;
        if self.largest_value() > VALUE_SIZE_MAX {
            return bad(format!(
                "value size {} exceeds {VALUE_SIZE_MAX} bytes",
                self.largest_value()
            ));
        }
        if self.largest_value() < self.value_size {
            return bad(format!(
                "largest value size {} below the value size {}",
                self.largest_value(),
                self.value_size
            ));
        }
        if !(1..=WIDTH_MAX).contains(&self.width) {
            return bad(format!("width {} outside 1..={WIDTH_MAX}", self.width));
        }
        let request = self.width * (self.key_size + self.largest_value() + 32);
        if request > REQUEST_BYTES_MAX {
            return bad(format!(
                "one request of {} pairs of {} + {} bytes exceeds {REQUEST_BYTES_MAX} bytes",
                self.width,
                self.key_size,
                self.largest_value()
            ));
        }
        self.check_mix()?;
        self.check_hash()?;
        if self.distribution != Distribution::Uniform {
            Zipf::new(1, self.zipf_theta)?;
        }
        if !(1..=CONNECTIONS_MAX).contains(&self.connections) {
            return bad(format!(
                "connections {} outside 1..={CONNECTIONS_MAX}",
                self.connections
            ));
        }
        match &self.mode {
            Mode::Closed { depth } => {
                if !(1..=DEPTH_MAX).contains(depth) {
                    return bad(format!("depth {depth} outside 1..={DEPTH_MAX}"));
                }
            }
            Mode::Open {
                rates,
                max_outstanding,
            } => {
                if rates.is_empty() || rates.len() > SWEEP_RATES_MAX {
                    return bad(format!("give 1..={SWEEP_RATES_MAX} rates"));
                }
                if let Some(r) = rates.iter().find(|r| !(RATE_MIN..=RATE_MAX).contains(*r)) {
                    return bad(format!(
                        "rate {r} outside [{RATE_MIN}, {RATE_MAX}] operations/s"
                    ));
                }
                if !(1..=MAX_OUTSTANDING_MAX).contains(max_outstanding) {
                    return bad(format!(
                        "max outstanding {max_outstanding} outside 1..={MAX_OUTSTANDING_MAX}"
                    ));
                }
            }
        }
        check_window(self.warmup_s, self.duration_s)?;
        if let Some(every) = self.sample_every_s {
            if !(every >= SAMPLE_EVERY_S_MIN && self.duration_s / every <= SAMPLES_MAX) {
                return bad(format!(
                    "sampling every {every} s: at least {SAMPLE_EVERY_S_MIN} s, and at most \
                     {SAMPLES_MAX} samples per run"
                ));
            }
        }
        if self.tags.len() > TAGS_MAX {
            return bad(format!("at most {TAGS_MAX} tags"));
        }
        let labels = self.system.iter().chain(&self.workload);
        let tag_parts = self.tags.iter().flat_map(|(k, v)| [k, v]);
        if let Some(l) = labels.chain(tag_parts).find(|l| l.len() > LABEL_LEN_MAX) {
            return bad(format!(
                "label {:?}... longer than {LABEL_LEN_MAX} bytes",
                &l[..LABEL_LEN_MAX.min(l.len())]
            ));
        }
        if self.tags.keys().any(|k| k.is_empty()) {
            return bad("a tag needs a non-empty key (key=value)".into());
        }
        Ok(())
    }

    /// The operation mix: each ratio a probability, together at most 1 (the rest writes
    /// without expiry); an expiring write is a SET, so width 1; a sane time to live.
    fn check_mix(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(m));
        for (name, r) in [
            ("get", self.get_ratio),
            ("del", self.del_ratio),
            ("expire", self.expire_ratio),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return bad(format!("{name} ratio {r} outside [0, 1]"));
            }
        }
        // Ratios typed as decimals may add up to a hair above 1.
        const RATIO_SUM_SLACK: f64 = 1e-9;
        if self.get_ratio + self.del_ratio + self.expire_ratio > 1.0 + RATIO_SUM_SLACK {
            return bad(format!(
                "get {} + del {} + expire {} ratios exceed 1",
                self.get_ratio, self.del_ratio, self.expire_ratio
            ));
        }
        if self.expire_ratio > 0.0 {
            if self.width != 1 {
                return bad("expiring writes are SETs: --width 1 only".into());
            }
            let (lo, hi) = self.ttl_ms;
            if !(1 <= lo && lo <= hi && hi <= TTL_MS_MAX) {
                return bad(format!(
                    "time to live {lo}-{hi} ms: 1 <= shortest <= longest <= {TTL_MS_MAX}"
                ));
            }
        }
        Ok(())
    }

    /// A hash's shape: fields within [`HASH_FIELDS_MAX`], an operation's within the hash's, a
    /// load request within [`REQUEST_BYTES_MAX`]; reads and writes only (no DEL, no expiry).
    fn check_hash(&self) -> Result<()> {
        let Some(h) = self.hash else {
            return Ok(());
        };
        let bad = |m: String| Err(Error::Invalid(m));
        if !(1..=HASH_FIELDS_MAX).contains(&h.fields) {
            return bad(format!(
                "hash fields {} outside 1..={HASH_FIELDS_MAX}",
                h.fields
            ));
        }
        if self.width > h.fields {
            return bad(format!(
                "width {} above the hash's {} fields",
                self.width, h.fields
            ));
        }
        if self.misses_expected() {
            return bad("hashes are read and written: no --del-ratio or --expire-ratio".into());
        }
        if !(0.0..=1.0).contains(&h.insert_ratio) || self.get_ratio + h.insert_ratio > 1.0 {
            return bad(format!(
                "insert ratio {} outside [0, 1 - get ratio {}]",
                h.insert_ratio, self.get_ratio
            ));
        }
        if h.insert_ratio > 0.0 {
            // Inserted keys follow the loaded ones: the key size must leave room for them.
            let room = self.keys.saturating_mul(INSERTED_KEYS_ROOM);
            crate::keys::check_key_params(room, self.key_size)?;
        }
        let load = self.key_size + h.fields * (HASH_FIELD_LEN + self.largest_value() + 32);
        if load > REQUEST_BYTES_MAX {
            return bad(format!(
                "a hash of {} fields of {} bytes exceeds {REQUEST_BYTES_MAX} bytes",
                h.fields,
                self.largest_value()
            ));
        }
        Ok(())
    }

    /// `host:port`, with an IPv6 address in brackets.
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The workload's label: `--workload`, or one derived from the mix.
    pub fn workload_name(&self) -> String {
        self.workload
            .clone()
            .unwrap_or_else(|| self.default_workload_name())
    }

    /// `get`, `set`, `mget32`, `mset32` for pure reads or writes; `mixed-95-5` (percent read,
    /// percent written) otherwise, with `-w32` for a width above 1; with deletes or expiring
    /// writes, `mixed-60-20-ex10-del10` (read, written without expiry, with expiry, deleted);
    /// `-zipf` appended for Zipf keys.
    pub fn default_workload_name(&self) -> String {
        if let Some(h) = self.hash {
            return self.hash_workload_name(h);
        }
        let w = self.width;
        let mut name = if self.misses_expected() {
            let set = (1.0 - self.get_ratio - self.del_ratio - self.expire_ratio).max(0.0);
            let mut n = format!(
                "mixed-{}-{}-ex{}-del{}",
                percent(self.get_ratio),
                percent(set),
                percent(self.expire_ratio),
                percent(self.del_ratio)
            );
            if w > 1 {
                n.push_str(&format!("-w{w}"));
            }
            n
        } else if self.get_ratio >= 1.0 {
            if w == 1 {
                "get".to_string()
            } else {
                format!("mget{w}")
            }
        } else if self.get_ratio <= 0.0 {
            if w == 1 {
                "set".to_string()
            } else {
                format!("mset{w}")
            }
        } else {
            let get = percent(self.get_ratio);
            let set = percent(1.0 - self.get_ratio);
            let mut n = format!("mixed-{get}-{set}");
            if w > 1 {
                n.push_str(&format!("-w{w}"));
            }
            n
        };
        if self.distribution != Distribution::Uniform {
            name.push_str(&format!("-{}", self.distribution));
        }
        name
    }
}

impl NetConfig {
    /// `hgetall-of100`, `hget-of100`, `hmget10-of100`, `hset10-of100`, or
    /// `hmixed-95-5-w10-of100`; `-ins5` with inserts, `-rmw` with read-modify-writes, and the
    /// distribution unless uniform (`hmixed-95-0-w1-of10-ins5-latest`: YCSB D).
    fn hash_workload_name(&self, h: HashShape) -> String {
        let (w, f) = (self.width, h.fields);
        let read = match (h.read_all, w) {
            (true, _) => "hgetall".to_string(),
            (false, 1) => "hget".to_string(),
            (false, w) => format!("hmget{w}"),
        };
        let set_ratio = 1.0 - self.get_ratio - h.insert_ratio;
        let mut name = if self.get_ratio >= 1.0 {
            format!("{read}-of{f}")
        } else if self.get_ratio <= 0.0 && h.insert_ratio <= 0.0 {
            format!("hset{w}-of{f}")
        } else {
            let (get, set) = (percent(self.get_ratio), percent(set_ratio.max(0.0)));
            format!("hmixed-{get}-{set}-w{w}-of{f}")
        };
        if h.insert_ratio > 0.0 {
            name.push_str(&format!("-ins{}", percent(h.insert_ratio)));
        }
        if h.read_modify_write {
            name.push_str("-rmw");
        }
        if self.distribution != Distribution::Uniform {
            name.push_str(&format!("-{}", self.distribution));
        }
        name
    }
}

/// A ratio as a percentage with at most one decimal: 0.95 -> `95`, 0.955 -> `95.5`.
fn percent(ratio: f64) -> String {
    let tenths = (ratio * 1000.0).round() as u64;
    if tenths.is_multiple_of(10) {
        format!("{}", tenths / 10)
    } else {
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_workload_names_name_inserts_and_read_modify_writes() {
        let mut c = NetConfig::new("127.0.0.1", 1);
        c.get_ratio = 0.95;
        c.distribution = Distribution::Latest;
        c.hash = Some(HashShape {
            insert_ratio: 0.05,
            ..HashShape::new(10, true)
        });
        assert_eq!(c.workload_name(), "hmixed-95-0-w1-of10-ins5-latest");
        c.get_ratio = 0.5;
        c.distribution = Distribution::Zipf;
        c.hash = Some(HashShape {
            read_modify_write: true,
            ..HashShape::new(10, true)
        });
        assert_eq!(c.workload_name(), "hmixed-50-50-w1-of10-rmw-zipf");
        // Inserts past what the key size holds, or more than the reads leave, are refused.
        c.key_size = 6;
        c.hash = Some(HashShape {
            insert_ratio: 0.05,
            ..HashShape::new(10, true)
        });
        assert!(c.validate().is_err());
        c.key_size = 16;
        assert!(c.validate().is_ok());
        c.hash = Some(HashShape {
            insert_ratio: 0.6,
            ..HashShape::new(10, true)
        });
        assert!(c.validate().is_err());
    }

    #[test]
    fn workload_names_follow_the_mix() {
        let mut c = NetConfig::new("127.0.0.1", 1);
        assert_eq!(c.workload_name(), "get");
        c.width = 32;
        assert_eq!(c.workload_name(), "mget32");
        c.get_ratio = 0.0;
        assert_eq!(c.workload_name(), "mset32");
        c.width = 1;
        assert_eq!(c.workload_name(), "set");
        c.get_ratio = 0.95;
        c.distribution = Distribution::Zipf;
        assert_eq!(c.workload_name(), "mixed-95-5-zipf");
        c.get_ratio = 0.955;
        c.distribution = Distribution::Uniform;
        c.width = 8;
        assert_eq!(c.workload_name(), "mixed-95.5-4.5-w8");
        c.workload = Some("ycsb-b-zipf".into());
        assert_eq!(c.workload_name(), "ycsb-b-zipf");
        c.workload = None;
        c.width = 1;
        c.get_ratio = 0.6;
        c.del_ratio = 0.1;
        c.expire_ratio = 0.1;
        assert_eq!(c.workload_name(), "mixed-60-20-ex10-del10");
    }

    type Change = Box<dyn Fn(&mut NetConfig)>;

    #[test]
    fn parameters_are_checked() {
        let ok = NetConfig::new("127.0.0.1", 1);
        ok.validate().unwrap();
        let cases: Vec<Change> = vec![
            Box::new(|c| c.keys = 0),
            Box::new(|c| c.key_size = 4),
            Box::new(|c| c.width = 0),
            Box::new(|c| c.width = WIDTH_MAX + 1),
            Box::new(|c| c.get_ratio = 1.5),
            Box::new(|c| c.get_ratio = f64::NAN),
            Box::new(|c| c.connections = 0),
            Box::new(|c| c.mode = Mode::Closed { depth: 0 }),
            Box::new(|c| {
                c.mode = Mode::Open {
                    rates: vec![],
                    max_outstanding: 1,
                }
            }),
            Box::new(|c| {
                c.mode = Mode::Open {
                    rates: vec![1000.0, -1.0],
                    max_outstanding: 1,
                }
            }),
            Box::new(|c| {
                c.mode = Mode::Open {
                    rates: vec![1000.0],
                    max_outstanding: 0,
                }
            }),
            Box::new(|c| c.duration_s = 0.0),
            Box::new(|c| c.warmup_s = -1.0),
            Box::new(|c| {
                c.distribution = Distribution::Zipf;
                c.zipf_theta = 1.0
            }),
            Box::new(|c| c.value_size = VALUE_SIZE_MAX + 1),
            Box::new(|c| {
                c.width = 10_000;
                c.value_size = 10_000
            }),
            Box::new(|c| c.system = Some("x".repeat(LABEL_LEN_MAX + 1))),
            Box::new(|c| {
                c.tags.insert(String::new(), "v".into());
            }),
            Box::new(|c| c.value_size_max = Some(c.value_size - 1)),
            Box::new(|c| c.value_size_max = Some(VALUE_SIZE_MAX + 1)),
            Box::new(|c| c.del_ratio = -0.1),
            Box::new(|c| {
                c.get_ratio = 0.6;
                c.del_ratio = 0.3;
                c.expire_ratio = 0.2
            }),
            Box::new(|c| {
                c.expire_ratio = 0.1;
                c.width = 2
            }),
            Box::new(|c| {
                c.expire_ratio = 0.1;
                c.ttl_ms = (0, 10)
            }),
            Box::new(|c| {
                c.expire_ratio = 0.1;
                c.ttl_ms = (10, 5)
            }),
            Box::new(|c| c.sample_every_s = Some(0.0)),
            Box::new(|c| c.sample_every_s = Some(f64::NAN)),
        ];
        for (i, f) in cases.iter().enumerate() {
            let mut c = ok.clone();
            f(&mut c);
            assert!(c.validate().is_err(), "case {i}: {c:?}");
        }
        assert_eq!(NetConfig::new("::1", 7).addr(), "[::1]:7");
        // A soak's mix passes: ratios that add up to 1 in decimals, an expiring SET.
        let mut soak = ok.clone();
        soak.get_ratio = 0.7;
        soak.del_ratio = 0.1;
        soak.expire_ratio = 0.2;
        soak.value_size_max = Some(1024);
        soak.sample_every_s = Some(10.0);
        soak.validate().unwrap();
    }
}
