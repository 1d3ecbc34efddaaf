//! What every connection shares: the store, the settings, the statistics and the registries.

use std::sync::Arc;

use quiver_store::Store;

use crate::cluster::ClusterNode;
use crate::service::Core;
use crate::watch::Watches;

pub struct ServerState {
    /// What every RESP server has: settings, statistics, clients, output budget.
    pub core: Core,
    pub store: Store,
    pub watches: Watches,
    /// The intermediate queue, when `coalesce = "adaptive"`.
    pub coalescer: Option<crate::coalesce::Coalescer>,
    /// This node in its cluster, in cluster mode.
    pub cluster: Option<Arc<ClusterNode>>,
}

impl ServerState {
    pub fn is_shutting_down(&self) -> bool {
        self.core.is_shutting_down()
    }

    /// Whether engine calls may wait on the disk (fsync, O_DIRECT reads): they must then not
    /// hold a worker thread that other connections' tasks need.
    pub fn blocking(&self) -> bool {
        let config = &self.core.config;
        config.durability == quiver_store::Durability::Fsync
            || config.backend == quiver_store::BackendKind::Uring
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
        let config = crate::config::Config {
            dir: dir.to_path_buf(),
            ..crate::config::Config::default()
        };
        let options = quiver_store::Options {
            clock,
            ..config.store_options()
        };
        let users = crate::acl::Users::new(config.requirepass.as_deref());
        let mut core = Core::new(config, 0, users);
        core.output_budget = crate::output::OutputBudget::new(0);
        ServerState {
            store: Store::open(dir, options).unwrap(),
            core,
            watches: Watches::default(),
            coalescer: None,
            cluster: None,
        }
    }
}
