//! What every connection shares: the store, the settings, the statistics and the registries.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quiver_store::Store;

use crate::clients::Clients;
use crate::cluster::ClusterNode;
use crate::config::Config;
use crate::output::OutputBudget;
use crate::stats::Stats;
use crate::watch::Watches;

pub struct ServerState {
    pub store: Store,
    pub config: Config,
    pub stats: Stats,
    pub watches: Watches,
    pub clients: Clients,
    /// Hex id of this server process's run (INFO `run_id`).
    pub run_id: String,
    /// Actual TCP port (differs from the configured one for `--port 0`).
    pub port: u16,
    /// The intermediate queue, when `coalesce = "adaptive"`.
    pub coalescer: Option<crate::coalesce::Coalescer>,
    /// Reply bytes buffered by all connections, bounded by `client-output-buffer-total-limit`.
    pub output_budget: OutputBudget,
    /// Set once shutdown begins: connections finish their current run and close.
    pub shutting_down: AtomicBool,
    /// This node in its cluster, in cluster mode.
    pub cluster: Option<Arc<ClusterNode>>,
}

impl ServerState {
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

pub type SharedState = Arc<ServerState>;

#[cfg(test)]
impl ServerState {
    /// Default settings on a fresh store in `dir`, without a server around it (unit tests).
    pub fn for_tests(dir: &std::path::Path) -> ServerState {
        ServerState::for_tests_with_clock(dir, quiver_store::Clock::system())
    }

    /// [`ServerState::for_tests`] with the store measuring key expiry on `clock`.
    pub fn for_tests_with_clock(dir: &std::path::Path, clock: quiver_store::Clock) -> ServerState {
        let config = Config {
            dir: dir.to_path_buf(),
            ..Config::default()
        };
        let options = quiver_store::Options {
            clock,
            ..config.store_options()
        };
        ServerState {
            store: Store::open(dir, options).unwrap(),
            output_budget: OutputBudget::new(0),
            config,
            stats: Stats::default(),
            watches: Watches::default(),
            clients: Clients::default(),
            run_id: String::new(),
            port: 0,
            coalescer: None,
            shutting_down: AtomicBool::new(false),
            cluster: None,
        }
    }
}
