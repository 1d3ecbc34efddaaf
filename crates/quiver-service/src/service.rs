//! What a RESP server is, whatever answers its commands: `quiver serve` (a node: `ServerState`
//! executes runs on its store) and `quiver router` (a front-end: `router::Router` forwards them
//! to the nodes). Both accept connections the same way (`server::serve_clients`), read and
//! parse them with the same limits, hold replies under the same output budget, count the same
//! statistics and answer the connection commands (AUTH, HELLO, CLIENT, ...) with the same code
//! ([`conn`](crate::conn)); only [`Service::execute_run`] differs. The service knows nothing of
//! what serves: a node's per-connection state is its own ([`Service::Conn`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::acl::log::AclLog;
use crate::acl::{Users, DEFAULT_USER};
use crate::clients::{ClientInfo, Clients};
use crate::config::Config;
use crate::latency::LatencyMonitor;
use crate::monitor::Monitors;
use crate::output::{Output, OutputBudget};
use crate::pause::Pause;
use crate::pubsub::PubSub;
use crate::session::Session;
use crate::settings::{Change, Live};
use crate::slowlog::SlowLog;
use crate::stats::Stats;
use crate::tracking::Tracking;

/// Why a run stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every request was executed.
    Complete,
    /// The replies exceed `client-output-buffer-limit`: close the connection.
    OutputLimit,
    /// The replies wait for a replication commit whose outcome is unknown here (`chain`):
    /// close the connection without them.
    Unresolved,
}

/// The state every RESP server shares between its connections, whatever executes commands.
pub struct Core {
    /// The settings as the server started with them; those CONFIG SET changes are read from
    /// `live`.
    pub config: Config,
    pub live: Live,
    /// SLOWLOG's entries.
    pub slowlog: SlowLog,
    /// LATENCY's events.
    pub latency: LatencyMonitor,
    /// CLIENT PAUSE.
    pub pause: Pause,
    /// ACL LOG's entries.
    pub acl_log: AclLog,
    /// MONITOR's connections.
    pub monitors: Monitors,
    /// CLIENT TRACKING's table (fed by a node's writes).
    pub tracking: Arc<Tracking>,
    /// Pub/Sub's channels and patterns.
    pub pubsub: PubSub,
    /// The ACL users (`default`'s password is `requirepass`).
    pub users: Users,
    pub stats: Stats,
    pub clients: Clients,
    /// Hex id of this process's run (INFO `run_id`).
    pub run_id: String,
    /// Actual TCP port (differs from the configured one for `--port 0`).
    pub port: u16,
    /// Reply bytes buffered by all connections, bounded by `client-output-buffer-total-limit`.
    pub output_budget: OutputBudget,
    /// Set once shutdown begins: connections finish their current run and close.
    pub shutting_down: AtomicBool,
}

impl Core {
    /// The core of a server on `port` with `users` (`Users::at_start`).
    pub fn new(config: Config, port: u16, users: Users) -> Core {
        Core {
            output_budget: OutputBudget::new(config.client_output_buffer_total_limit),
            users,
            live: Live::of(&config),
            slowlog: SlowLog::default(),
            latency: LatencyMonitor::default(),
            pause: Pause::default(),
            acl_log: AclLog::default(),
            monitors: Monitors::default(),
            tracking: Arc::default(),
            pubsub: PubSub::default(),
            config,
            stats: Stats::default(),
            clients: Clients::default(),
            run_id: new_id(),
            port,
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Applies a change CONFIG SET checked: to the live settings, and `requirepass` to the
    /// `default` user, whose passwords become that one alone (none for an empty one), as
    /// Redis does.
    pub fn apply(&self, change: &Change) {
        if let Change::RequirePass(password) = change {
            let rule = match password {
                Some(p) => Bytes::from(format!(">{p}")),
                None => Bytes::from_static(b"nopass"),
            };
            let rules = [Bytes::from_static(b"resetpass"), rule];
            // Fixed rules on the user that always exists: they cannot fail.
            let _ = self.users.set_user(DEFAULT_USER.as_bytes(), &rules);
        }
        self.live.set(change);
    }

    /// A command `args` of `client` ran in database `db`, taking `usec` (its share of its
    /// engine call): the slow log and MONITOR's connections see it.
    pub fn command_done(&self, args: &[Bytes], usec: u64, db: u32, client: &ClientInfo) {
        self.slowlog.command(&self.live, args, usec, client);
        self.monitors
            .feed(&self.config.rename_command, args, db, client);
    }

    /// A step of a run (a command, or a vector of them) took `usec`: the latency monitor's
    /// `command` event.
    pub fn step_took(&self, usec: u64) {
        self.latency.add(
            &self.live,
            "command",
            usec / 1000,
            crate::clock::unix_seconds(),
        );
    }
}

/// A line of INFO: `name:value`.
pub type Line = (String, String);

/// An INFO line `name:value`.
pub fn line(name: &str, value: String) -> Line {
    (name.to_string(), value)
}

/// A section a RESP server adds to the common ones: (name, title, lines).
pub type Section = (&'static str, &'static str, Vec<Line>);

/// What a service adds to INFO's common sections, each where Redis (or Quiver) prints it.
#[derive(Default)]
pub struct InfoParts {
    /// Cluster mode (`redis_mode`, `cluster_enabled`).
    pub cluster_enabled: bool,
    /// `# Memory`, after `used_memory_rss`.
    pub memory: Vec<Line>,
    /// `# Persistence`, whole (a service that stores nothing has none).
    pub persistence: Option<Vec<Line>>,
    /// `# Stats`, after the service's own.
    pub stats: Vec<Line>,
    /// `# Replication`, whole (`cmd::replication::info_lines`).
    pub replication: Vec<Line>,
    /// Sections of its own, after `# Cluster`.
    pub sections: Vec<Section>,
    /// `# Keyspace`: one line per database with keys.
    pub keyspace: Vec<Line>,
    /// `# Vectors`, after `vector_width_mean`.
    pub vectors: Vec<Line>,
}

/// What executes the requests of a RESP server's connections.
pub trait Service: Send + Sync + 'static {
    /// A connection's state beyond its [`Session`] that only this service knows.
    type Conn: Default + Send;

    fn core(&self) -> &Core;

    /// Executes a pipelined run of requests in order, appending one reply per request to `out`.
    fn execute_run<'a>(
        &'a self,
        session: &'a mut Session,
        conn: &'a mut Self::Conn,
        requests: &'a [Vec<Bytes>],
        out: &'a mut Output<'_>,
    ) -> impl Future<Output = RunEnd> + Send + 'a;

    /// The connection has ended: forget what it held (watched keys, pinned back-ends).
    fn disconnected(&self, session: &mut Session, conn: Self::Conn);

    /// The Prometheus text of `GET /metrics`.
    fn render_metrics(&self) -> String;

    /// What this service adds to INFO (`cmd::info`).
    fn info_parts(&self) -> InfoParts;
}

/// A new 40-hex-character id, like Redis's node and run ids.
pub fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::time::Instant;
    let mut id = String::with_capacity(48);
    while id.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(Instant::now().elapsed().as_nanos());
        h.write_u32(std::process::id());
        id.push_str(&format!("{:016x}", h.finish()));
    }
    id.truncate(40);
    id
}
