//! What every connection shares: the store, the settings, the statistics and the registries.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quiver_store::Store;

use crate::clients::Clients;
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
}

impl ServerState {
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

pub type SharedState = Arc<ServerState>;
