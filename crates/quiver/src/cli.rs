//! The command line: every subcommand and flag of `quiver` (clap derive).
//!
//! Two kinds of commands: the server commands (`get`, `set`, `load`, ...) talk to a running
//! `quiver serve` through `quiver-client` and take the connection flags of [`ConnArgs`]; the
//! offline commands (`stats`, `compact`, `check`, `bench`) and `serve` itself open the store
//! in `--dir`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use quiver_bench::distribution::Distribution;
use quiver_store::{BackendKind, Durability};

/// Where offline commands find the store when `--dir` is not given.
pub const DEFAULT_STORE_DIR: &str = "./quiver-data";
/// Where `quiver bench` keeps its data when `--dir` is not given.
pub const DEFAULT_BENCH_DIR: &str = "./quiver-bench-data";

/// Quiver: a persistent key-value store whose work travels as vectors.
#[derive(Debug, Parser)]
#[command(
    name = "quiver",
    version,
    about,
    propagate_version = true,
    after_help = "Server commands (ping, get, set, del, mget, mset, scan, info, load) talk to a \
                  running `quiver serve`: see their --host, --port, --password and --timeout-s. \
                  Put `--` before a key or value that starts with '-'."
)]
pub struct Cli {
    /// Data directory of serve and the offline commands (stats, compact, check, upgrade, bench)
    /// [default: ./quiver-data; for bench: ./quiver-bench-data]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the store in --dir over the Redis protocol until SIGINT / SIGTERM.
    Serve(ServeArgs),
    /// Route commands to a cluster's nodes, for clients that know nothing of clusters, until
    /// SIGINT / SIGTERM.
    ///
    /// A RESP server (the limits, AUTH, INFO and metrics of serve) that stores nothing: each
    /// command goes to the node owning its keys by the topology in etcd; MGET, MSET, DEL,
    /// UNLINK, EXISTS and TOUCH over several nodes become one command per node, pipelined
    /// commands one batch per node; redirects during moves are followed by the router.
    Router(RouterArgs),
    /// Repair a replicated cluster's chains when nodes die, stall or restart, until SIGINT /
    /// SIGTERM.
    ///
    /// Run several (on different hosts): they elect one through etcd. The one elected
    /// watches the nodes' leases; a node whose lease expired, or that came back at a new
    /// run, is taken out of the chains it shares (a dead head is replaced by its successor, a
    /// dead tail by its predecessor, a dead middle is spliced out), each changed chain at a
    /// new version that fences the node out.
    Manager(ManagerArgs),
    /// Check that the server answers: prints PONG.
    Ping(PingArgs),
    /// Print a key's value.
    ///
    /// The value is written raw, then a newline. An absent key prints nothing on stdout, a
    /// message on stderr, and exits with code 1.
    Get(GetArgs),
    /// Set a key to a value; prints OK.
    Set(SetArgs),
    /// Delete keys; prints how many of them existed.
    Del(KeysArgs),
    /// Print the values of several keys, one line per key.
    ///
    /// Lines follow the order of the keys given; each value is written raw. An absent key
    /// prints as an empty line (as in `redis-cli --raw`), so it cannot be told from an empty
    /// value; the exit code is 0 either way (use `get` to test one key).
    Mget(KeysArgs),
    /// Set several keys at once (one atomic MSET); prints OK.
    Mset(MsetArgs),
    /// Print every key, one per line (SCAN over the whole key space).
    ///
    /// Every key present for the whole scan is printed at least once; a key written or
    /// deleted meanwhile may or may not be.
    Scan(ScanArgs),
    /// Print the server's INFO report (the default sections, or one).
    ///
    /// Lines end in LF (CRLF on the wire).
    Info(InfoArgs),
    /// Bulk-load COUNT deterministic keys through the server.
    ///
    /// Key i is i in zero-padded decimal, its value i followed by '.', repeated and cut to
    /// the value size (key `0000000000000042`, value `42.42.42.42...`). Keys go as MSETs of
    /// WIDTH pairs, DEPTH MSETs per round trip; prints `loaded N keys in S s (R keys/s)`.
    Load(LoadArgs),
    /// Offline: print the figures of the store in --dir as JSON (reads only: writes nothing).
    ///
    /// Offline commands open the store themselves: they fail while a server holds it.
    Stats,
    /// Offline: compact every partition of the store in --dir; prints what was done as JSON.
    Compact,
    /// Offline: verify every record and index entry of the store in --dir.
    ///
    /// Prints the findings as JSON; exit code 1 if anything is damaged. Without --repair it
    /// only reads (it works on a full disk and changes nothing).
    Check(CheckArgs),
    /// Offline: convert the store in --dir from an older on-disk format to this version's.
    ///
    /// Every live key is copied into a new store beside it, read back and compared; then the
    /// old store is renamed `<dir>.v1` (delete it once satisfied) and the new one takes its
    /// place. Prints what was done as JSON.
    Upgrade,
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Simulations (no store, no server).
    #[command(subcommand)]
    Sim(crate::sim::SimCommand),
    /// Manage a cluster through its metadata in etcd (create, status, add-node).
    #[command(subcommand)]
    Cluster(crate::cluster::ClusterCommand),
}

impl Command {
    /// The connection flags of a server command; `None` for serve and the offline commands.
    pub fn conn(&self) -> Option<&ConnArgs> {
        match self {
            Command::Ping(a) => Some(&a.conn),
            Command::Get(a) => Some(&a.conn),
            Command::Set(a) => Some(&a.conn),
            Command::Del(a) | Command::Mget(a) => Some(&a.conn),
            Command::Mset(a) => Some(&a.conn),
            Command::Scan(a) => Some(&a.conn),
            Command::Info(a) => Some(&a.conn),
            Command::Load(a) => Some(&a.conn),
            Command::Serve(_)
            | Command::Router(_)
            | Command::Manager(_)
            | Command::Stats
            | Command::Compact
            | Command::Check(_)
            | Command::Upgrade
            | Command::Bench(_)
            | Command::Sim(_)
            | Command::Cluster(_) => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Repair a damaged store: keep what is intact, set aside segment files that cannot be
    /// read (renamed *.damaged), rewrite the log without the damage, and print what was lost
    /// (keys whose newest value was in the damage may now show an older one). A store that
    /// refuses to open because of damage opens again afterwards.
    #[arg(long)]
    pub repair: bool,
}

/// How a server command reaches the server. Not global flags of `quiver` because `serve` has
/// its own `--port` (the one it listens on).
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnArgs {
    /// Server host name or address.
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, value_name = "PORT", default_value_t = quiver_service::config::DEFAULT_PORT)]
    pub port: u16,
    /// Password sent with AUTH (the server's requirepass).
    #[arg(
        long,
        value_name = "PASSWORD",
        env = "QUIVER_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// Longest wait, in seconds, to connect and for each read or write of a request.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_timeout)]
    pub timeout_s: Duration,
}

impl ConnArgs {
    /// `host:port`, with an IPv6 address in brackets.
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A positive, finite number of seconds.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("{s} s is not a positive duration")),
    }
}

#[derive(Debug, Args)]
pub struct PingArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    #[arg(value_name = "KEY")]
    pub key: OsString,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct SetArgs {
    #[arg(value_name = "KEY")]
    pub key: OsString,
    #[arg(value_name = "VALUE", allow_negative_numbers = true)]
    pub value: OsString,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `del` and `mget`: one or more keys.
#[derive(Debug, Args)]
pub struct KeysArgs {
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<OsString>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct MsetArgs {
    /// Keys and values, alternating: KEY VALUE [KEY VALUE ...].
    #[arg(
        value_names = ["KEY", "VALUE"],
        required = true,
        num_args = 2..,
        allow_negative_numbers = true
    )]
    pub pairs: Vec<OsString>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Only keys matching this Redis glob pattern (`*`, `?`, `[a-z]`, `\` escapes).
    #[arg(long = "match", value_name = "PATTERN")]
    pub pattern: Option<OsString>,
    /// Keys the server examines per SCAN call (its COUNT hint) [server default: 10].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// One section: server, clients, memory, persistence, stats, keyspace, vectors, or all.
    #[arg(value_name = "SECTION")]
    pub section: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Number of keys (keys 0..COUNT).
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// Key size in bytes (at least 8).
    #[arg(long, value_name = "K", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, value_name = "V", default_value_t = 32)]
    pub value_size: usize,
    /// Pairs per MSET (one engine vector on the server).
    #[arg(long, value_name = "W", default_value_t = 256)]
    pub width: usize,
    /// MSETs sent per round trip (pipelined).
    #[arg(long, value_name = "D", default_value_t = 4)]
    pub depth: usize,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// The flags of any RESP server (`serve`, `router`); each overrides the same setting of the
/// --config file.
#[derive(Debug, Args)]
pub struct ListenArgs {
    /// TOML file of settings (Redis's names: port, maxclients, requirepass, ...; the router
    /// ignores those about the store).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// TCP port; 0 picks a free one [default: 7379; router: 7380].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Also listen on this Unix socket.
    #[arg(long, value_name = "PATH")]
    pub unixsocket: Option<PathBuf>,
    /// Password clients must give with AUTH.
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,
    /// yes: while the default user has no password, serve only loopback clients [default:
    /// yes].
    #[arg(long, value_name = "YES|NO", value_parser = quiver_service::config::parse_yes_no)]
    pub protected_mode: Option<bool>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9121).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Worker threads (0 = one per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Log format: text or json.
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<quiver_service::config::LogFormat>,
}

/// `quiver serve` flags; each overrides the same setting of the --config file.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    /// What an acknowledged write survives: none, os (process crash) or fsync (power loss)
    /// [default: os].
    #[arg(long, value_name = "MODE")]
    pub durability: Option<Durability>,
    /// Read backend: mmap, pread or io_uring [default: mmap].
    #[arg(long, value_name = "B")]
    pub backend: Option<BackendKind>,
    /// Databases SELECT can choose from [default: 16].
    #[arg(long, value_name = "N")]
    pub databases: Option<u32>,
    /// Widest engine vector built from pipelined single-key commands.
    #[arg(long, value_name = "R")]
    pub max_vector_width: Option<usize>,
    /// Coalesce single GETs across connections: off or adaptive.
    #[arg(long, value_name = "MODE")]
    pub coalesce: Option<quiver_node::node_config::Coalesce>,
    /// Join a cluster: serve the hash slots its topology in etcd gives this node.
    #[arg(long)]
    pub cluster: bool,
    /// etcd endpoints of the cluster, comma-separated (http://host:port).
    #[arg(long, value_name = "URLS")]
    pub etcd: Option<String>,
    /// Prefix of the cluster's keys in etcd [default: /quiver].
    #[arg(long, value_name = "PREFIX")]
    pub etcd_prefix: Option<String>,
    /// This node's id (1 to 40 of [0-9A-Za-z_-]); kept in the data directory, a new one
    /// when not given.
    #[arg(long, value_name = "ID")]
    pub node_id: Option<String>,
    /// host:port that clients are sent to [default: the bound address].
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// Milliseconds without renewing its lease in etcd after which the node is taken out of
    /// its chains (cluster-node-timeout) [default: 5000, at least 2000].
    #[arg(long, value_name = "MS")]
    pub node_timeout: Option<u64>,
}

/// `quiver manager` flags.
#[derive(Debug, Args)]
pub struct ManagerArgs {
    #[command(flatten)]
    pub etcd: crate::cluster::EtcdArgs,
    /// This manager's name in the election and the logs [default: manager-PID].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Milliseconds a dead elected manager keeps the others waiting (its lease).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub lease_ms: u64,
}

/// `quiver router` flags.
#[derive(Debug, Args)]
pub struct RouterArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    /// etcd endpoints of the cluster, comma-separated (http://host:port).
    #[arg(long, value_name = "URLS")]
    pub etcd: String,
    /// Prefix of the cluster's keys in etcd [default: /quiver].
    #[arg(long, value_name = "PREFIX")]
    pub etcd_prefix: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// In-process multiget throughput: load once, then one JSON line per configuration of the
    /// grid backend x distribution x width.
    Local(BenchLocalArgs),
    /// Time to open the store in --dir from its checkpoints, then without them (full rebuild
    /// from the logs); JSON lines.
    Reopen(BenchReopenArgs),
    /// Split and Merge while a reader runs: a store of one partition is loaded in --dir
    /// (replacing a store there), split in half, then merged; one JSON line per step with its
    /// duration and the reads' latency before and during it.
    Split(BenchSplitArgs),
    /// Plots (PNG and SVG) from result files of bench net, bench local and sim vector-width.
    Report(crate::report::ReportArgs),
    /// Load generator for any Redis-protocol server (Quiver, redis-server): one JSON line per
    /// measured run on stdout.
    ///
    /// Each operation reads --width keys (GET, or MGET when wider) with probability
    /// --get-ratio, deletes them (DEL) with --del-ratio, is a SET with an expiry with
    /// --expire-ratio, else writes --width pairs (SET / MSET); key i and its value are the ones
    /// `quiver load` writes. Closed loop: --connections x --depth requests outstanding. Open
    /// loop (--rate or --rate-sweep): requests on a schedule, latency measured from each
    /// request's intended send time. One client thread drives every connection: pin it apart
    /// from the server (taskset); client_cpu_util (closed loop) and send_lag_p99_us (open
    /// loop) tell whether the client kept up.
    Net(BenchNetArgs),
    /// Multigets through the cluster client against a Quiver cluster or a Redis Cluster: one
    /// JSON line per run on stdout.
    ///
    /// --threads threads, each with its own cluster client, each keeping one multiget of
    /// --width uniform random keys (keys 0..--keys, as `quiver load` writes them) outstanding
    /// for --duration-s after --warmup-s. A multiget is one request per node (Quiver), or one
    /// per slot to a node that answers CROSSSLOT (Redis Cluster): the record's
    /// requests_per_multiget and mean_keys_per_request are the vector width each node saw.
    /// Every value read is checked; any error fails the run. With --server-pids, each
    /// server's CPU seconds (matched to its node by its listening port) and keys per
    /// server-CPU-second, in total and per node.
    Cluster(BenchClusterArgs),
}

/// The data set a benchmark loads and reads: keys 0..N of the given sizes (the keys and values
/// `quiver load` writes).
#[derive(Debug, Args)]
pub struct DataSetArgs {
    /// Keys in the data set: keys 0..N are loaded, then read (and written by bench net).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub keys: u64,
    /// Key size in bytes (at least 8).
    #[arg(long, value_name = "K", default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, value_name = "V", default_value_t = 32)]
    pub value_size: usize,
}

#[derive(Debug, Args)]
pub struct BenchLocalArgs {
    #[command(flatten)]
    pub data: DataSetArgs,
    /// Multiget widths, comma-separated.
    #[arg(
        long,
        value_name = "W,...",
        value_delimiter = ',',
        default_value = "32"
    )]
    pub width: Vec<usize>,
    /// Backends, comma-separated: mmap, pread, io_uring.
    #[arg(
        long,
        value_name = "B,...",
        value_delimiter = ',',
        default_value = "mmap"
    )]
    pub backend: Vec<BackendKind>,
    /// Key distributions, comma-separated: uniform, zipf, latest.
    #[arg(
        long,
        value_name = "D,...",
        value_delimiter = ',',
        default_value = "uniform"
    )]
    pub distribution: Vec<Distribution>,
    /// Reader threads.
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub threads: usize,
    /// Measured seconds per configuration (after a warm-up of a fifth of it, at most 1 s).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration_s: f64,
    /// Zipf exponent, in (0, 1).
    #[arg(long, value_name = "THETA", default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Skip the load if --dir already holds a complete load with the same keys and sizes.
    #[arg(long)]
    pub reuse: bool,
    /// Partitions of the loaded store.
    #[arg(long, value_name = "P", default_value_t = 16)]
    pub partitions: u32,
    /// Load every key with an expiry time this many seconds ahead (what expiry costs reads).
    #[arg(long, value_name = "S")]
    pub expire_s: Option<u64>,
}

#[derive(Debug, Args)]
pub struct BenchNetArgs {
    /// Server host name or address.
    #[arg(long, value_name = "HOST", default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, value_name = "PORT")]
    pub port: u16,
    /// Password sent with AUTH on every connection.
    #[arg(long, value_name = "PASSWORD")]
    pub password: Option<String>,
    #[command(flatten)]
    pub data: DataSetArgs,
    /// Key popularity: uniform, zipf, or latest (Zipf over recency: the newest keys hottest).
    #[arg(long, value_name = "D", default_value = "uniform")]
    pub distribution: Distribution,
    /// Zipf exponent, in (0, 1).
    #[arg(long, value_name = "THETA", default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Probability that an operation reads (else it writes, or deletes, or writes with an
    /// expiry: --del-ratio, --expire-ratio).
    #[arg(long, value_name = "P", default_value_t = 1.0)]
    pub get_ratio: f64,
    /// Probability that an operation deletes its keys (DEL).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub del_ratio: f64,
    /// Probability that an operation is a SET with an expiry (EX or PX at random) of a time to
    /// live drawn from --ttl-ms (width 1 only).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub expire_ratio: f64,
    /// Time to live of the expiring SETs, milliseconds: LO-HI (uniform) or one value.
    #[arg(long, value_name = "LO-HI", default_value = "1000-60000", value_parser = parse_range)]
    pub ttl_ms: (u64, u64),
    /// Largest value written: each written value's size is uniform from --value-size to this
    /// (the load's too) [default: --value-size].
    #[arg(long, value_name = "V")]
    pub value_size_max: Option<usize>,
    /// Keys per operation: 1 sends GET / SET, more sends MGET / MSET of that many (with
    /// --hash-fields: fields of one hash, HGET / HMGET and HSET).
    #[arg(long, value_name = "G", default_value_t = 1)]
    pub width: usize,
    /// Keys as hashes of F fields (f0000, f0001, ...), each field's value as the key's
    /// would be: a read is HGET / HMGET of --width fields of one hash (HGETALL with
    /// --hgetall), a write HSET of --width fields; the load is one HSET of all F per key.
    #[arg(long, value_name = "F")]
    pub hash_fields: Option<usize>,
    /// With --hash-fields: reads are HGETALL of the whole hash.
    #[arg(long, requires = "hash_fields")]
    pub hgetall: bool,
    /// With --hash-fields: probability that an operation inserts a new hash (HSET of all its
    /// fields) at the next key past --keys (YCSB D's inserts; pair with --distribution
    /// latest, whose reads favour the newest keys).
    #[arg(
        long,
        value_name = "P",
        default_value_t = 0.0,
        requires = "hash_fields"
    )]
    pub insert_ratio: f64,
    /// With --hash-fields: every write is a read-modify-write (YCSB F): its key's read goes
    /// out first, as its own request, then the HSET.
    #[arg(long, requires = "hash_fields")]
    pub read_modify_write: bool,
    /// Connections (all driven by one client thread).
    #[arg(long, value_name = "C", default_value_t = 50)]
    pub connections: usize,
    /// Closed loop: requests each connection keeps outstanding (1 is request-response)
    /// [default: 1].
    #[arg(long, value_name = "D", conflicts_with_all = ["rate", "rate_sweep"])]
    pub depth: Option<usize>,
    /// Open loop at R operations/s in total.
    #[arg(long, value_name = "R", conflicts_with = "rate_sweep")]
    pub rate: Option<f64>,
    /// Open loop once per rate, comma-separated (a throughput-vs-latency curve).
    #[arg(long, value_name = "R,...", value_delimiter = ',')]
    pub rate_sweep: Option<Vec<f64>>,
    /// Open loop: most requests outstanding per connection.
    #[arg(
        long,
        value_name = "N",
        default_value_t = quiver_bench::net::spec::MAX_OUTSTANDING_DEFAULT
    )]
    pub max_outstanding: usize,
    /// Seconds of load before measuring (not measured).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub warmup_s: f64,
    /// Measured seconds of each run.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration_s: f64,
    /// Before measuring, load keys 0..N (pipelined MSETs) if the server's DBSIZE is below N.
    #[arg(long)]
    pub load: bool,
    /// Load as --load does, then exit without measuring.
    #[arg(long)]
    pub load_only: bool,
    /// The server's process id: its CPU seconds over the run and its RSS at the end are
    /// reported (server_cpu_s, keys_per_server_cpu_s, rss_bytes, rss_bytes_per_key).
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Label of the server in the records (e.g. quiver, redis, redis-aof) [default: from the
    /// server's INFO].
    #[arg(long, value_name = "NAME")]
    pub system: Option<String>,
    /// Label of the workload (e.g. ycsb-b-zipf) [default: from the mix: get, mget32,
    /// mixed-95-5-zipf, ...].
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// A label copied into the record's `tags` object; repeatable.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// Also append each record to this CSV file (header written when the file is new).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Machine output only: the JSON lines on stdout, no summary lines on stderr.
    #[arg(long)]
    pub json: bool,
    /// Seed of the key choices.
    #[arg(long, value_name = "N", default_value_t = 0x5eed)]
    pub seed: u64,
    /// Every S seconds of each measured run, a sample line (`"bench": "net-sample"`) on
    /// stdout: the latency of those S seconds, the server's RSS and open descriptors
    /// (--server-pid), its data directory's bytes on disk (--server-dir), its keys and log
    /// records (INFO). For soak runs (scripts/soak.sh; `quiver bench report` plots them).
    #[arg(long, value_name = "S")]
    pub sample_every_s: Option<f64>,
    /// The server's data directory: its files' allocated bytes in every sample.
    #[arg(long, value_name = "DIR", requires = "sample_every_s")]
    pub server_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchClusterArgs {
    /// Nodes to read the slot table from: host:port, comma-separated.
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        required = true
    )]
    pub seeds: Vec<String>,
    /// Send the multigets through this `quiver router` (one plain connection per thread, one
    /// MGET per multiget, split per back-end by the router) instead of cluster clients; the
    /// seeds still give the slot table.
    #[arg(long, value_name = "HOST:PORT")]
    pub router: Option<String>,
    /// The router's process id: its CPU seconds over the run, counted apart from the servers'.
    #[arg(long, value_name = "PID", requires = "router")]
    pub router_pid: Option<u32>,
    #[command(flatten)]
    pub data: DataSetArgs,
    /// Keys per multiget.
    #[arg(long, value_name = "W", default_value_t = 32)]
    pub width: usize,
    /// What each operation is: mget (every value read checked) or mset (each key to its own
    /// value).
    #[arg(long, value_name = "OP", default_value = "mget", value_parser = ["mget", "mset"])]
    pub op: String,
    /// Cluster clients read multigets from replicas too, asking the fewest nodes.
    #[arg(long)]
    pub read_from_replicas: bool,
    /// Client threads, each with its own cluster client (or router connection) and one
    /// multiget outstanding.
    #[arg(long, value_name = "T", default_value_t = 4)]
    pub threads: usize,
    /// Seconds of load before measuring (not measured).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub warmup_s: f64,
    /// Measured seconds.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration_s: f64,
    /// Before measuring, write keys 0..N (multi_set in batches, every thread).
    #[arg(long)]
    pub load: bool,
    /// Load as --load does, then exit without measuring.
    #[arg(long)]
    pub load_only: bool,
    /// The servers' process ids, comma-separated, any order: their CPU seconds over the run.
    #[arg(long, value_name = "PID,...", value_delimiter = ',')]
    pub server_pids: Vec<u32>,
    /// Name of the system in the record (e.g. quiver, redis-cluster).
    #[arg(long, value_name = "NAME", default_value = "cluster")]
    pub label: String,
    /// A label copied into the record's `tags` object; repeatable.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// Machine output only: the JSON line on stdout, no summary lines on stderr.
    #[arg(long)]
    pub json: bool,
    /// Seed of the key choices.
    #[arg(long, value_name = "N", default_value_t = 0x5eed)]
    pub seed: u64,
}

/// `LO-HI` or `N` (both ends N), non-negative integers, LO <= HI.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let num = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?} is not LO-HI or a number"))
    };
    let (lo, hi) = match s.split_once('-') {
        Some((lo, hi)) => (num(lo)?, num(hi)?),
        None => (num(s)?, num(s)?),
    };
    if lo > hi {
        return Err(format!("{s:?}: LO above HI"));
    }
    Ok((lo, hi))
}

/// `key=value`, the key non-empty.
fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

#[derive(Debug, Args)]
pub struct BenchSplitArgs {
    #[command(flatten)]
    pub data: DataSetArgs,
    /// Seconds of reads timed before each step.
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub settle: f64,
}

#[derive(Debug, Args)]
pub struct BenchReopenArgs {
    /// Drop the page cache before each timed open (needs root): a cold start.
    #[arg(long)]
    pub cold: bool,
}

#[cfg(test)]
mod tests;
