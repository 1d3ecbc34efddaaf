//! What every connection shares: the store, the settings, the statistics and the registries.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use quiver_store::Store;

use crate::cluster::ClusterNode;
use crate::node_config::NodeConfig;
use crate::watch::{DbKey, Watches};
use quiver_service::server::ShutdownHandle;
use quiver_service::service::Core;

pub mod expired;
pub mod figures;
pub mod info;
pub mod live;
pub mod metrics;
pub mod saves;

pub struct ServerState {
    /// What every RESP server has: settings, statistics, clients, output budget.
    pub core: Core,
    /// The node's own settings (`node_config`), as they were at start.
    pub config: NodeConfig,
    /// Those CONFIG SET changes while serving (`live`).
    pub live: live::NodeLive,
    pub store: Store,
    pub watches: Watches,
    /// The intermediate queue, used while `coalesce` is `adaptive` (`live`).
    pub coalescer: crate::coalesce::Coalescer,
    /// This node in its cluster, in cluster mode.
    pub cluster: Option<Arc<ClusterNode>>,
    /// SAVE, BGSAVE, LASTSAVE and what INFO shows of them.
    pub saves: saves::Saves,
    /// What SHUTDOWN fires (none in unit tests' states, which serve nothing).
    pub shutdown: Option<ShutdownHandle>,
    /// Serving threads (`threads`, resolved once: where it is 0 that asks the system).
    pub serving_threads: usize,
}

impl ServerState {
    pub fn is_shutting_down(&self) -> bool {
        self.core.is_shutting_down()
    }

    /// Whether engine calls may wait on the disk: reads with the io_uring backend (O_DIRECT),
    /// and in `fsync` mode on a cluster node, whose writes are durable here before they go
    /// down the chain. They must then not hold a thread other connections need: such a node
    /// serves its connections on the work-stealing runtime, inside `block_in_place`
    /// (`serving`, `exec::thread`).
    pub fn blocking(&self) -> bool {
        self.config.backend == quiver_store::BackendKind::Uring
            || (self.fsync() && self.cluster.is_some())
    }

    /// Whether a connection awaits its writes' fdatasyncs itself (`fsync` mode, serving
    /// threads): its engine calls run inside `Store::deferring_sync`, and the run's replies
    /// wait for the positions they return (`exec::run_and_settle`).
    pub fn defers_sync(&self) -> bool {
        self.fsync() && !self.blocking()
    }

    /// Whether every write waits for an fdatasync before it is acknowledged (`fsync` mode).
    pub fn fsync(&self) -> bool {
        self.config.durability == quiver_store::Durability::Fsync
    }

    /// Hands the store's long maintenance holds since the last call to the latency monitor,
    /// each an event named for its task (`checkpoint`, `compaction-range`, ...).
    pub fn note_stalls(&self) {
        for e in self.store.take_stall_events() {
            let event = e.by.replace(' ', "-");
            self.core
                .latency
                .add(&self.core.live, &event, e.us / 1000, e.unix_secs);
        }
    }
}

pub type SharedState = Arc<ServerState>;

/// What a node keeps of a connection beyond the service's `Session` (the service's
/// `Service::Conn`): its watched keys, and what its run's replies wait for.
#[derive(Default)]
pub struct NodeConn {
    /// Watched keys (each in the database selected when WATCH ran) and their values then.
    pub watched: Vec<(DbKey, Option<quiver_store::Entry>)>,
    /// Set by any write to a watched key.
    pub watch_dirty: Arc<AtomicBool>,
    /// The keys of the run's commands on chains this node replicates (`chain`): the run's
    /// replies wait for the commit of their last writes here.
    pub chain_keys: Vec<Bytes>,
    /// Other commits the run's replies wait for (CHAIN APPLY's).
    pub barrier: crate::chain::Barrier,
    /// What the run's writes wait for before its replies go out (`fsync` mode on serving
    /// threads: `exec::thread::on_thread`).
    pub durable: quiver_store::SyncWait,
    /// A key of the connection's last write on a replicated chain (WAIT counts the other
    /// members of its chain; its slot is found only then, off the write path).
    pub last_write_key: Option<Bytes>,
}

impl NodeConn {
    /// Forgets every key connection `id` watches (UNWATCH, EXEC, DISCARD, RESET, disconnect).
    pub fn unwatch(&mut self, id: u64, watches: &Watches) {
        if !self.watched.is_empty() {
            watches.remove(id, self.watched.iter().map(|(k, _)| k));
            self.watched.clear();
        }
        self.watch_dirty.store(false, Relaxed);
    }
}

#[cfg(test)]
impl ServerState {
    /// Default settings on a fresh store in `dir`, without a server around it (unit tests).
    pub fn for_tests(dir: &std::path::Path) -> ServerState {
        ServerState::for_tests_with_clock(dir, quiver_store::Clock::system())
    }

    /// [`ServerState::for_tests`] with the store measuring key expiry on `clock`.
    pub fn for_tests_with_clock(dir: &std::path::Path, clock: quiver_store::Clock) -> ServerState {
        let config = crate::node_config::ServeConfig {
            node: NodeConfig {
                dir: dir.to_path_buf(),
                ..NodeConfig::default()
            },
            ..crate::node_config::ServeConfig::default()
        };
        let options = quiver_store::Options {
            clock,
            ..config.store_options()
        };
        let users = quiver_service::acl::Users::new(config.service.requirepass.as_deref());
        let mut core = Core::new(config.service, 0, users);
        core.live
            .limit_proto_max_bulk_len(config.node.store_options(&core.config).value_len_max);
        core.output_budget = quiver_service::output::OutputBudget::new(0);
        ServerState {
            serving_threads: core.config.threads(),
            store: Store::open(dir, options).unwrap(),
            watches: Watches::new(core.tracking.clone()),
            core,
            live: live::NodeLive::of(&config.node),
            config: config.node,
            coalescer: crate::coalesce::Coalescer::default(),
            cluster: None,
            saves: saves::Saves::default(),
            shutdown: None,
        }
    }
}
