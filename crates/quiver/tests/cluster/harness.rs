//! Real processes for the cluster tests: `quiver serve --cluster` nodes ([`Node`]), `quiver
//! router` front-ends ([`Router`]) and all of them together with an etcd
//! (`quiver_testkit::etcd`) and a topology ([`Cluster`]).
//!
//! Every process started here is stopped here, by its PID (SIGKILL, `quiver_testkit::process`),
//! when its handle is dropped — a failing test leaves nothing running. Ports are picked free on
//! loopback (`quiver_testkit::port`) and kept by the handle, so that a process restarted with
//! `restart()` comes back at the same address (the topology records nodes by address). Every
//! wait is bounded by [`WAIT`] and its failure prints the processes' log tails. A node may be
//! given extra environment variables (a test-only fault), kept across its restarts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use quiver_client::{ClientOptions, ClusterClient, ClusterOptions, Connection, Value};
use quiver_testkit::etcd::Etcd;
use quiver_testkit::port::free_port;
use quiver_testkit::process::{
    append, first_line, log_len, run, start_retrying, tail, Guard, StartFailure,
    REBIND_ATTEMPTS_MAX, REBIND_PAUSE, START_ATTEMPTS_MAX,
};
use quiver_testkit::serve::serve_command;
use quiver_testkit::{wait_until, WAIT};

/// The settings file of every node: a small disk reserve (the default, 1 GiB, is taken on disk
/// by each node: a few clusters at once would fill a shared disk).
pub const NODE_CONFIG: &str = "disk-reserve = \"32mb\"\n";

// ---------------------------------------------------------------------------------------------
// nodes

/// Where a node runs: the etcd URL it is given (`None`: a standalone server), the cgroup it
/// runs in (for a partition made with iptables, `partition`).
#[derive(Clone, Debug)]
pub struct Placement {
    pub etcd: Option<String>,
    pub cgroup: Option<PathBuf>,
}

impl Placement {
    /// On etcd at `url`, in no cgroup of its own.
    pub fn at(url: &str) -> Placement {
        Placement {
            etcd: Some(url.to_string()),
            cgroup: None,
        }
    }
}

/// A `quiver serve --cluster` process on a port of its own (kept across restarts), its store
/// in `dir`, its stderr in `dir.log` — or a standalone `quiver serve` ([`Node::standalone`]).
pub struct Node {
    pub id: String,
    pub port: u16,
    dir: PathBuf,
    /// The cluster's etcd; `None`: a standalone server (no `--cluster`).
    etcd_url: Option<String>,
    /// The cgroup (v2 directory) the process runs in from its start, if any.
    cgroup: Option<PathBuf>,
    /// Extra environment variables of the process (and of its restarts).
    env: Env,
    /// Extra arguments of `serve` (and of its restarts), e.g. `--durability fsync`.
    args: Vec<String>,
    process: Option<Guard>,
    /// Lines printed after the first (kept so the reading thread keeps draining the pipe).
    _stdout: Option<mpsc::Receiver<String>>,
}

impl Node {
    /// A standalone `quiver serve` (no cluster, no etcd) named `id`, its store in `dir`, with
    /// the extra `serve` arguments `args`; returns once it listens. Stopped, killed and
    /// restarted like a cluster node.
    pub fn standalone(dir: &Path, id: &str, args: &[&str]) -> Node {
        let place = Placement {
            etcd: None,
            cgroup: None,
        };
        Node::start_with(dir, place, id, Env::new(), args)
    }

    /// Starts node `id` on a free port with its store in `dir`, placed by `place` (its etcd,
    /// its cgroup), with the extra environment `env` and `serve` arguments `args`; returns
    /// once it listens.
    fn start_with(dir: &Path, place: Placement, id: &str, env: Env, args: &[&str]) -> Node {
        let mut node = Node {
            id: id.to_string(),
            port: 0,
            dir: dir.to_path_buf(),
            etcd_url: place.etcd,
            cgroup: place.cgroup,
            env,
            args: args.iter().map(|a| a.to_string()).collect(),
            process: None,
            _stdout: None,
        };
        let log = node.log();
        start_retrying(id, START_ATTEMPTS_MAX, Duration::ZERO, &log, || {
            node.port = free_port();
            node.spawn()
        });
        node
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> PathBuf {
        self.dir.with_extension("log")
    }

    /// Everything the node (and its predecessors on this directory) logged so far.
    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.log()).unwrap_or_default()).into_owned()
    }

    /// A connection without reconnection (a broken connection is a failure the test sees).
    pub fn conn(&self) -> Connection {
        connect(&self.addr()).unwrap_or_else(|e| {
            panic!(
                "connect to {} ({}): {e}\n{}",
                self.id,
                self.addr(),
                tail(&self.log())
            )
        })
    }

    /// CLUSTER INFO, or why it could not be had.
    pub fn cluster_info(&self) -> Result<String, String> {
        let mut c = connect(&self.addr()).map_err(|e| e.to_string())?;
        let v = c
            .command(&[b"CLUSTER", b"INFO"])
            .map_err(|e| e.to_string())?;
        let text = v.as_bytes().ok_or_else(|| format!("CLUSTER INFO: {v:?}"))?;
        Ok(String::from_utf8_lossy(text).into_owned())
    }

    /// Whether CLUSTER INFO has `line` (`name:value`); `Err` says what it has instead.
    pub fn info_has(&self, line: &str) -> Result<(), String> {
        let info = self.cluster_info()?;
        let (name, _) = line.split_once(':').unwrap();
        match info.lines().find(|l| l.starts_with(&format!("{name}:"))) {
            Some(l) if l.trim_end() == line => Ok(()),
            other => Err(format!("{}: {other:?}, wanted {line}", self.id)),
        }
    }

    /// Every key of the node's store (INFO keyspace's `db0:keys`: every copy it holds, those
    /// of a range being dropped included; DBSIZE counts only the slots it serves as Redis's
    /// tools see it), or why it could not be had.
    pub fn store_keys(&self) -> Result<u64, String> {
        let mut c = connect(&self.addr()).map_err(|e| e.to_string())?;
        let text = match c
            .command(&[b"INFO", b"keyspace"])
            .map_err(|e| e.to_string())?
        {
            Value::Bulk(b) | Value::Verbatim { text: b, .. } => {
                String::from_utf8_lossy(&b).into_owned()
            }
            other => return Err(format!("INFO keyspace: {other:?}")),
        };
        // `db0:keys=N,expires=...`; no line: no key.
        match text.lines().find_map(|l| l.strip_prefix("db0:keys=")) {
            Some(rest) => rest
                .split(',')
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("INFO keyspace: {text}")),
            None => Ok(0),
        }
    }

    /// SIGSTOP (`stop: true`) or SIGCONT: the process stays, frozen or running again. A stop
    /// returns once every thread of the node has stopped.
    pub fn pause(&self, stop: bool) {
        let process = self.process.as_ref().expect("a running node");
        if stop {
            process.freeze();
        } else {
            process.thaw();
        }
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        self.process
            .take()
            .unwrap_or_else(|| panic!("{} is not running", self.id))
            .kill9();
    }

    /// Starts the node again on the same directory and port; returns once it listens.
    pub fn restart(&mut self) {
        assert!(self.process.is_none(), "{} is running", self.id);
        let (what, log) = (format!("{} restart", self.id), self.log());
        start_retrying(&what, REBIND_ATTEMPTS_MAX, REBIND_PAUSE, &log, || {
            self.spawn()
        });
    }

    /// Spawns `quiver --dir DIR serve --port PORT [--cluster ...] ARGS...` and reads its
    /// listening line.
    fn spawn(&mut self) -> Result<(), StartFailure> {
        let log_start = log_len(&self.log());
        let config = self.dir.with_extension("toml");
        std::fs::write(&config, NODE_CONFIG).unwrap();
        let quiver = env!("CARGO_BIN_EXE_quiver");
        let mut command = match &self.cgroup {
            // The shell joins the cgroup, then becomes quiver (same pid): every socket the
            // node opens is the cgroup's (a socket keeps the cgroup it was made in).
            Some(cgroup) => {
                let mut c = Command::new("sh");
                c.args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""])
                    .arg(cgroup)
                    .arg(quiver);
                c
            }
            None => Command::new(quiver),
        };
        serve_command(&mut command, &self.dir, self.port);
        if let Some(etcd_url) = &self.etcd_url {
            command
                .args(["--cluster", "--etcd", etcd_url])
                .args(["--node-id", &self.id]);
        }
        let child = command
            .args(&self.args)
            .arg("--config")
            .arg(&config)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stderr(append(&self.log()))
            .spawn()
            .expect("the quiver binary starts");
        let expected = format!("quiver listening on {}", self.addr());
        let (process, rx) = await_listening(child, &expected, &self.log(), log_start)?;
        self.process = Some(process);
        self._stdout = Some(rx);
        Ok(())
    }
}

/// Waits for a started server's first stdout line, `expected` (it is listening); otherwise
/// kills it and says why, with the end of its log from `log_start`.
pub fn await_listening(
    child: Child,
    expected: &str,
    log: &Path,
    log_start: usize,
) -> Result<(Guard, mpsc::Receiver<String>), StartFailure> {
    let why = match first_line(child) {
        Ok((process, line, rx)) if line.trim() == expected => return Ok((process, rx)),
        // Dropping the process kills it.
        Ok((_process, line, _)) => format!("{line:?} first"),
        Err(e) => e,
    };
    Err(StartFailure::from_log(
        log,
        log_start,
        format!("no `{expected}` line ({why})"),
    ))
}

// ---------------------------------------------------------------------------------------------
// routers

/// A `quiver router` process (no data directory) on a port of its own (kept across restarts),
/// its stderr in `DIR/NAME.log`, reading the topology from etcd at `etcd_url`.
pub struct Router {
    pub name: String,
    pub port: u16,
    dir: PathBuf,
    etcd_url: String,
    /// Extra arguments of the process (and of its restarts), e.g. `--requirepass`.
    args: Vec<String>,
    /// The `--requirepass` among `args`: [`Router::conn`] authenticates with it.
    password: Option<String>,
    process: Option<Guard>,
    /// Lines printed after the first (kept so the reading thread keeps draining the pipe).
    _stdout: Option<mpsc::Receiver<String>>,
}

impl Router {
    /// Starts router `name` on a free port, its log in `dir`, with the extra arguments `args`;
    /// returns once it listens (it may have no topology yet: see [`Cluster::start_router`]).
    pub fn start(dir: &Path, etcd_url: &str, name: &str, args: &[&str]) -> Router {
        let password = args
            .iter()
            .position(|a| *a == "--requirepass")
            .and_then(|i| args.get(i + 1))
            .map(|p| p.to_string());
        let mut router = Router {
            name: name.to_string(),
            port: 0,
            dir: dir.to_path_buf(),
            etcd_url: etcd_url.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            password,
            process: None,
            _stdout: None,
        };
        let log = router.log();
        start_retrying(name, START_ATTEMPTS_MAX, Duration::ZERO, &log, || {
            router.port = free_port();
            router.spawn()
        });
        router
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    /// A connection without reconnection, authenticated when the router wants a password.
    pub fn conn(&self) -> Connection {
        self.try_conn().unwrap_or_else(|e| {
            panic!(
                "connect to {} ({}): {e}\n{}",
                self.name,
                self.addr(),
                tail(&self.log())
            )
        })
    }

    fn try_conn(&self) -> quiver_client::Result<Connection> {
        let mut options = connect_options(&self.addr());
        options.password = self.password.clone();
        Connection::connect_with(options)
    }

    /// `INFO router` as `name:value` lines, or why it could not be had.
    pub fn info(&self) -> Result<String, String> {
        let mut c = self.try_conn().map_err(|e| e.to_string())?;
        c.info(Some("router")).map_err(|e| e.to_string())
    }

    /// The number `name` of `INFO router` (e.g. `router_epoch`), or why it could not be had.
    pub fn try_info_field(&self, name: &str) -> Result<u64, String> {
        let info = self.info()?;
        info_number(&info, name).ok_or_else(|| format!("{}: no {name} in INFO:\n{info}", self.name))
    }

    /// [`Router::try_info_field`], which must succeed.
    pub fn info_field(&self, name: &str) -> u64 {
        self.try_info_field(name)
            .unwrap_or_else(|e| panic!("{e}\n{}", tail(&self.log())))
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        self.running().kill9();
    }

    /// SIGTERM, and its exit within [`WAIT`] (a router that ignores it fails the test); the
    /// exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let what = format!("{} after SIGTERM", self.name);
        self.running().terminate(&what, WAIT)
    }

    /// The process, which must be running; no longer the router's (it is stopped next).
    fn running(&mut self) -> Guard {
        self.process
            .take()
            .unwrap_or_else(|| panic!("{} is not running", self.name))
    }

    /// Starts the router again on the same port; returns once it listens.
    pub fn restart(&mut self) {
        assert!(self.process.is_none(), "{} is running", self.name);
        let (what, log) = (format!("{} restart", self.name), self.log());
        start_retrying(&what, REBIND_ATTEMPTS_MAX, REBIND_PAUSE, &log, || {
            self.spawn()
        });
    }

    /// Spawns `quiver router --etcd URL --port PORT ARGS...` and reads its listening line.
    fn spawn(&mut self) -> Result<(), StartFailure> {
        let port = self.port.to_string();
        let log_start = log_len(&self.log());
        let child = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["router", "--etcd", &self.etcd_url, "--port", &port])
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(append(&self.log()))
            .spawn()
            .expect("the quiver binary starts");
        // Bound to all addresses (`--bind 0.0.0.0`), it prints that address.
        let bind = self
            .args
            .iter()
            .position(|a| a == "--bind")
            .and_then(|i| self.args.get(i + 1))
            .map_or("127.0.0.1", |b| b.as_str());
        let expected = format!("quiver router listening on {bind}:{port}");
        let (process, rx) = await_listening(child, &expected, &self.log(), log_start)?;
        self.process = Some(process);
        self._stdout = Some(rx);
        Ok(())
    }
}

/// The number of line `name:N` of an INFO text.
pub fn info_number(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.parse().ok())
}

/// A node's extra environment variables (name, value).
pub type Env = Vec<(String, String)>;

/// A cluster client seeded with `seeds`, its connections' waits bounded by [`WAIT`] (a write
/// waiting for its range's hand-over is well within it).
pub fn cluster_client(seeds: &[String]) -> ClusterClient {
    ClusterClient::connect_with(cluster_options(seeds))
        .unwrap_or_else(|e| panic!("a cluster client of {seeds:?}: {e}"))
}

/// The options of [`cluster_client`].
pub fn cluster_options(seeds: &[String]) -> ClusterOptions {
    let mut options = ClusterOptions::new(seeds.iter().cloned());
    options.connection.connect_timeout = Some(WAIT);
    options.connection.read_timeout = Some(WAIT);
    options.connection.write_timeout = Some(WAIT);
    options
}

/// A connection to `addr` without reconnection, its waits bounded by [`WAIT`].
pub fn connect(addr: &str) -> quiver_client::Result<Connection> {
    Connection::connect_with(connect_options(addr))
}

/// The options of [`connect`]: no reconnection, every wait bounded by [`WAIT`].
pub fn connect_options(addr: &str) -> ClientOptions {
    let mut options = ClientOptions::new(addr.to_string());
    options.reconnect = false;
    options.connect_timeout = Some(WAIT);
    options.read_timeout = Some(WAIT);
    options.write_timeout = Some(WAIT);
    options
}

// ---------------------------------------------------------------------------------------------
// a cluster

/// etcd and nodes `node-1` .. `node-N` with their first topology (the slots split evenly, in
/// node order), and the routers a test starts, in one temporary directory.
pub struct Cluster {
    // Fields drop in order: the processes before the directory they use, routers first.
    pub routers: Vec<Router>,
    pub managers: Vec<crate::manager::Manager>,
    pub nodes: Vec<Node>,
    /// Extra `serve` arguments of every node started from now on.
    pub node_args: Vec<String>,
    /// Per node id, how it is placed: the etcd URL it is given (etcd's own, or a proxy),
    /// its cgroup.
    pub node_places: BTreeMap<String, Placement>,
    pub etcd: Etcd,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// etcd, `n` nodes, `quiver cluster create`; returns once every node serves the topology
    /// (CLUSTER INFO `cluster_state:ok`).
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with_env(n, |_| Env::new())
    }

    /// [`Cluster::start`], each node given the extra environment `env(id)`.
    pub fn start_with_env(n: usize, env: impl Fn(&str) -> Env) -> Cluster {
        Cluster::start_with(n, 1, env)
    }

    /// [`Cluster::start`] with chains of `replicas` nodes.
    pub fn start_replicated(n: usize, replicas: u8) -> Cluster {
        Cluster::start_with(n, replicas, |_| Env::new())
    }

    /// etcd, `n` nodes (each given the extra environment `env(id)`), `quiver cluster create
    /// --replicas R`.
    pub fn start_with(n: usize, replicas: u8, env: impl Fn(&str) -> Env) -> Cluster {
        Cluster::start_full(n, replicas, &[], env)
    }

    /// [`Cluster::start_with`], every node started with the extra `serve` arguments
    /// `node_args` (kept in [`Cluster::node_args`] for nodes started later).
    pub fn start_full(
        n: usize,
        replicas: u8,
        node_args: &[&str],
        env: impl Fn(&str) -> Env,
    ) -> Cluster {
        Cluster::start_full_placed(n, replicas, node_args, env, |_, url| Placement::at(url))
    }

    /// [`Cluster::start_full`], node `id` placed by `place(id, etcd's URL)`.
    pub fn start_full_placed(
        n: usize,
        replicas: u8,
        node_args: &[&str],
        env: impl Fn(&str) -> Env,
        place: impl Fn(&str, &str) -> Placement,
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let etcd = Etcd::start(&dir.path().join("etcd"));
        let mut cluster = Cluster {
            routers: Vec::new(),
            managers: Vec::new(),
            nodes: Vec::new(),
            node_args: node_args.iter().map(|a| a.to_string()).collect(),
            node_places: BTreeMap::new(),
            etcd,
            dir,
        };
        for i in 1..=n {
            let id = format!("node-{i}");
            let placed = place(&id, &cluster.etcd.url());
            cluster.node_places.insert(id.clone(), placed);
            cluster.start_node_with_env(&id, env(&id));
        }
        let ids: Vec<String> = cluster.nodes.iter().map(|n| n.id.clone()).collect();
        let replicas = replicas.to_string();
        cluster.quiver_ok(&["create", "--nodes", &ids.join(","), "--replicas", &replicas]);
        cluster.wait_all("every node serving the topology", "cluster_state:ok");
        cluster
    }

    /// Starts node `id` (registered in etcd, a member of no topology yet) and waits until it
    /// is connected to etcd; returns its index in [`Cluster::nodes`].
    pub fn start_node(&mut self, id: &str) -> usize {
        self.start_node_with_env(id, Env::new())
    }

    /// [`Cluster::start_node`] with the extra environment `env`.
    pub fn start_node_with_env(&mut self, id: &str, env: Env) -> usize {
        let args: Vec<&str> = self.node_args.iter().map(String::as_str).collect();
        let dir = self.dir.path().join(id);
        let place = self
            .node_places
            .get(id)
            .cloned()
            .unwrap_or_else(|| Placement::at(&self.etcd.url()));
        let node = Node::start_with(&dir, place, id, env, &args);
        self.nodes.push(node);
        let node = self.nodes.last().unwrap();
        wait_until(
            &format!("{id} registered and watching etcd"),
            || self.logs(),
            || node.info_has("quiver_etcd_connected:1"),
        );
        self.nodes.len() - 1
    }

    /// Starts a router (`router-1`, `router-2`, ...) on the cluster's etcd and waits until it
    /// routes by the topology in etcd (its `router_epoch` is the topology's, its
    /// `router_backends` the topology's nodes); returns its index in [`Cluster::routers`].
    pub fn start_router(&mut self) -> usize {
        self.start_router_with(&[])
    }

    /// [`Cluster::start_router`] with extra arguments (e.g. `--requirepass PW`).
    pub fn start_router_with(&mut self, args: &[&str]) -> usize {
        let name = format!("router-{}", self.routers.len() + 1);
        let router = Router::start(self.dir.path(), &self.etcd.url(), &name, args);
        self.routers.push(router);
        self.wait_router_current(self.routers.len() - 1);
        self.routers.len() - 1
    }

    /// Waits until router `i` routes by the topology in etcd now: its epoch and node count.
    pub fn wait_router_current(&self, i: usize) {
        let router = &self.routers[i];
        wait_until(
            &format!("{} routing by the topology in etcd", router.name),
            || self.logs(),
            || {
                let topology = &self.try_status()?["topology"];
                let epoch = topology["epoch"].as_u64().ok_or("no epoch")?;
                let nodes = topology["nodes"].as_array().map_or(0, Vec::len) as u64;
                let info = router.info()?;
                let got = (
                    info_number(&info, "router_epoch"),
                    info_number(&info, "router_backends"),
                );
                if got == (Some(epoch), Some(nodes)) {
                    Ok(())
                } else {
                    Err(format!(
                        "router (epoch, backends) {got:?}, topology ({epoch}, {nodes})"
                    ))
                }
            },
        );
    }

    /// `quiver cluster ARGS... --etcd URL`; its status, stdout and stderr.
    pub fn quiver(&self, args: &[&str]) -> (ExitStatus, String, String) {
        run(
            Command::new(env!("CARGO_BIN_EXE_quiver"))
                .arg("cluster")
                .args(args)
                .args(["--etcd", &self.etcd.url()]),
            &format!("quiver cluster {}", args.join(" ")),
            WAIT,
        )
    }

    /// [`Cluster::quiver`], which must succeed.
    pub fn quiver_ok(&self, args: &[&str]) -> String {
        let (status, out, err) = self.quiver(args);
        assert!(
            status.success(),
            "quiver cluster {}: {status}\n{out}{err}\n{}",
            args.join(" "),
            self.logs()
        );
        out
    }

    /// A cluster client seeded with every node.
    pub fn client(&self) -> ClusterClient {
        let seeds: Vec<String> = self.nodes.iter().map(Node::addr).collect();
        cluster_client(&seeds)
    }

    /// `quiver cluster status --json`, parsed.
    pub fn status(&self) -> serde_json::Value {
        self.try_status()
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()))
    }

    /// [`Cluster::status`], or why it could not be had (for a wait to try again).
    pub fn try_status(&self) -> Result<serde_json::Value, String> {
        let (status, out, err) = self.quiver(&["status", "--json"]);
        if !status.success() {
            return Err(format!("status --json: {status}: {err}"));
        }
        serde_json::from_str(out.trim()).map_err(|e| format!("status --json: {e}: {out}"))
    }

    /// The index in [`Cluster::nodes`] of node `id`.
    pub fn node(&self, id: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The addresses of nodes `ids` (seeds for a client of those nodes only).
    pub fn addrs_of<S: AsRef<str>>(&self, ids: &[S]) -> Vec<String> {
        ids.iter()
            .map(|id| self.nodes[self.node(id.as_ref())].addr())
            .collect()
    }

    /// Waits until every node's CLUSTER INFO has `line`.
    pub fn wait_all(&self, what: &str, line: &str) {
        wait_until(
            &format!("{what} ({line})"),
            || self.logs(),
            || self.nodes.iter().try_for_each(|n| n.info_has(line)),
        );
    }

    /// The tails of every process's log, for a failure's message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            out.push_str(&format!(
                "--- {} ({}):\n{}\n",
                n.id,
                n.addr(),
                tail(&n.log())
            ));
        }
        for r in &self.routers {
            out.push_str(&format!(
                "--- {} ({}):\n{}\n",
                r.name,
                r.addr(),
                tail(&r.log())
            ));
        }
        for m in &self.managers {
            out.push_str(&format!("--- {}:\n{}\n", m.name, tail(&m.log())));
        }
        // etcd's last: its lines are long and many, and a report cut short keeps its start.
        out.push_str(&format!(
            "--- etcd ({}):\n{}\n",
            self.etcd.url(),
            tail(&self.etcd.log())
        ));
        out
    }

    /// The index in [`Cluster::nodes`] of the node listening on `port`.
    pub fn node_on(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }
}

/// A reply's text (bulk, simple or verbatim), or a panic showing what it was.
pub fn text(v: &Value) -> String {
    let bytes = v
        .as_bytes()
        .unwrap_or_else(|| panic!("a string reply expected, got {v:?}"));
    String::from_utf8_lossy(bytes).into_owned()
}
