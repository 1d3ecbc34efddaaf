//! A data node's start and stop: open the store (recovering it if needed), bind the
//! listeners, serve (`server::serve_clients`) with the cluster agent beside it in cluster
//! mode, and on shutdown close the store (which checkpoints every partition) and return.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_store::{Clock, RecoveryReport, Store};

use crate::agent;
use crate::cluster::ClusterNode;
use crate::coalesce::Coalescer;
use crate::node_config::ServeConfig;
use crate::state::{ServerState, SharedState};
use crate::watch::Watches;
use quiver_service::server::{io_error, serve_clients, Bound, ServerError};
use quiver_service::serving::Serving;

/// Why a node could not start, or did not stop cleanly. Each variant names the operation
/// that failed (no `From` conversions: every `?` says which one it is).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Starting or running its RESP service: settings, TLS, the ACL file, sockets, threads.
    #[error(transparent)]
    Service(ServerError),
    #[error("cluster: {0}")]
    Cluster(#[source] crate::cluster::ClusterError),
    #[error("cannot open the store: {0}")]
    OpenStore(#[source] quiver_store::Error),
    /// At shutdown: flushing or checkpointing the store failed (a full disk, say).
    #[error("closing the store failed: {0}")]
    CloseStore(#[source] quiver_store::Error),
}

/// A server whose store is open and whose sockets are bound; [`Server::run`] serves.
pub struct Server {
    state: SharedState,
    bound: Bound,
}

impl Server {
    /// Validates `config`, opens the store (recovering it if needed) and binds the sockets.
    pub fn bind(config: ServeConfig) -> Result<Server, NodeError> {
        Server::bind_with_clock(config, Clock::system())
    }

    /// [`Server::bind`] with the store measuring key expiry on `clock` (tests move a manual
    /// clock by hand instead of waiting).
    pub fn bind_with_clock(config: ServeConfig, clock: Clock) -> Result<Server, NodeError> {
        config
            .validate()
            .map_err(|e| NodeError::Service(ServerError::Config(e)))?;
        let ServeConfig {
            service,
            node: node_config,
        } = config;
        let started = Instant::now();
        let options = quiver_store::Options {
            clock,
            ..node_config.store_options(&service)
        };
        let (core, bound) = Bound::start(service).map_err(NodeError::Service)?;
        let store = Store::open(&node_config.dir, options).map_err(NodeError::OpenStore)?;
        log_recovery(store.recovery_report());
        // CONFIG SET proto-max-bulk-len may lower it, and raise it back, but the store holds
        // no value longer than it was opened for.
        core.live
            .limit_proto_max_bulk_len(store.options().value_len_max);
        tracing::info!(
            dir = %node_config.dir.display(),
            keys = store.len(),
            seconds = started.elapsed().as_secs_f64(),
            "store open"
        );
        let cluster = if node_config.cluster_enabled {
            let addr = match &node_config.cluster_announce {
                Some(a) => a.clone(),
                None => SocketAddr::new(core.config.bind, core.port).to_string(),
            };
            let node = ClusterNode::open(
                &node_config.dir,
                node_config.cluster_node_id.as_deref(),
                addr,
            )
            .map_err(NodeError::Cluster)?;
            tracing::info!(id = %node.id, addr = %node.addr, epoch = node.view().epoch(), "cluster node");
            Some(Arc::new(node))
        } else {
            None
        };
        let state = Arc::new(ServerState {
            serving_threads: core.config.threads(),
            store,
            watches: Watches::new(core.tracking.clone()),
            core,
            coalescer: Coalescer::default(),
            live: crate::state::live::NodeLive::of(&node_config),
            config: node_config,
            cluster,
            saves: crate::state::saves::Saves::default(),
            shutdown: Some(bound.shutdown_handle()),
        });
        Ok(Server { state, bound })
    }

    /// Its sockets, runtime and shutdown signal.
    pub fn bound(&self) -> &Bound {
        &self.bound
    }

    /// Serves until the shutdown handle fires (or, with `handle_signals`, SIGINT / SIGTERM),
    /// then shuts down gracefully and closes the store.
    pub fn run(self, handle_signals: bool) -> Result<(), NodeError> {
        let Server {
            state,
            bound:
                Bound {
                    runtime,
                    listeners,
                    shutdown,
                },
        } = self;
        // The intermediate queue's thread runs whatever `coalesce` says now: CONFIG SET may
        // turn it on (it then waits on its queue; idle, it costs one sleeping thread).
        let storage = {
            let state = state.clone();
            std::thread::Builder::new()
                .name("quiver-storage".into())
                .spawn(move || {
                    state.coalescer.serve(&state.store, &state.core.stats, || {
                        state.live.max_vector_width()
                    });
                })
                .map_err(|e| NodeError::Service(io_error("cannot start the storage thread")(e)))?
        };
        let result = runtime.block_on(async {
            let mut background = Vec::new();
            background.push(tokio::spawn(crate::cmd::hash::reclaim::run(
                state.clone(),
                shutdown.subscribe(),
            )));
            background.push(tokio::spawn(crate::state::saves::run(
                state.clone(),
                shutdown.subscribe(),
            )));
            background.push(tokio::spawn(crate::state::expired::run(
                state.clone(),
                shutdown.subscribe(),
            )));
            if let (Some(_), Some(endpoints)) = (&state.cluster, &state.config.cluster_etcd) {
                let etcd = quiver_cluster::meta::EtcdSettings {
                    endpoints: endpoints.clone(),
                    prefix: state.config.cluster_etcd_prefix.clone(),
                };
                background.push(tokio::spawn(agent::run(
                    state.clone(),
                    etcd,
                    shutdown.subscribe(),
                )));
            }
            // Engine calls that may block on the disk need the shared runtime's
            // `block_in_place` (see `serving`).
            let serving = match state.blocking() {
                true => Serving::Shared(tokio::runtime::Handle::current()),
                false => Serving::start(
                    state.serving_threads,
                    &state.core.stats.stalls,
                    quiver_store::yielding_pass_running,
                )
                .map_err(io_error("cannot start the serving threads"))?,
            };
            let serving = Arc::new(serving);
            let served = serve_clients(
                state.clone(),
                serving.clone(),
                listeners,
                shutdown,
                handle_signals,
                background,
            )
            .await;
            serving.stop();
            served
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
        state.coalescer.close();
        let _ = storage.join();
        let close = match Arc::try_unwrap(state) {
            Ok(state) if state.saves.checkpoint_at_close() => state.store.close(),
            Ok(state) => state.store.close_without_checkpoint(),
            // A task outlived the runtime's shutdown: make the store durable without closing.
            Err(state) => state.store.flush().and_then(|()| state.store.checkpoint()),
        };
        match (result, close) {
            (Ok(()), Ok(())) => {
                tracing::info!("store closed; exiting");
                Ok(())
            }
            (Ok(()), Err(e)) => Err(NodeError::CloseStore(e)),
            (Err(e), close) => {
                // Serving failed first; the close failure would be lost with it.
                if let Err(c) = close {
                    tracing::error!(error = %c, "closing the store failed");
                }
                Err(NodeError::Service(e))
            }
        }
    }
}

/// Logs what recovery found when the store was opened: damage at ERROR (records were lost or
/// are unreadable), what was repaired or skipped at WARN, the counts at INFO.
fn log_recovery(report: &RecoveryReport) {
    for damage in &report.damage {
        tracing::error!(%damage, "recovery found damage in the store");
    }
    for tail in &report.torn_tails {
        tracing::warn!(%tail, "recovery truncated a torn log tail (an interrupted write)");
    }
    for reason in &report.checkpoints_ignored {
        tracing::warn!(%reason, "recovery ignored an index checkpoint and replayed the log");
    }
    tracing::info!(
        partitions_from_checkpoint = report.partitions_from_checkpoint,
        partitions_rebuilt = report.partitions_rebuilt,
        records_replayed = report.records_replayed,
        torn_tails = report.torn_tails.len(),
        damage = report.damage.len(),
        checkpoints_ignored = report.checkpoints_ignored.len(),
        batches_repaired = report.batches_repaired,
        batches_aborted = report.batches_aborted,
        "recovery"
    );
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A failed close at shutdown (SIGTERM on a full disk) must not read as a failed open.
    #[test]
    fn errors_name_the_operation_that_failed() {
        let no_space = || quiver_store::Error::NoSpace {
            path: PathBuf::from("/data/p0/00000001.seg"),
        };
        let close = NodeError::CloseStore(no_space()).to_string();
        assert!(close.starts_with("closing the store failed: "), "{close}");
        assert!(!close.contains("open"), "{close}");
        let open = NodeError::OpenStore(no_space()).to_string();
        assert!(open.starts_with("cannot open the store: "), "{open}");
    }
}
