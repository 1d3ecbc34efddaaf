//! `quiver-router`: `quiver router`, FAWN-KV's front-end for clients that know nothing of
//! clusters.
//!
//! A RESP service like a node (the same connection loop, limits, AUTH, INFO and metrics:
//! `quiver_service`) that stores nothing and knows nothing of the node's code: it routes every
//! command by hash slot to the node owning it, by the topology in etcd ([`table`]), over the
//! peer transport's pooled connections (`quiver_peer`).
//! Multi-key commands are split into one command per node and pipelined commands grouped
//! into one batch per node ([`plan`], [`exec`]); redirects during moves are followed here.

pub mod broadcast;
pub mod exec;
pub mod plan;
pub mod reply;
pub mod table;
pub mod txn;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use quiver_cluster::meta::EtcdSettings;
use quiver_peer::{PeerError, Pool, Replies};
use quiver_service::config::Config;
use quiver_service::figures::{self, counter, Figure, Value};
use quiver_service::output::Output;
use quiver_service::reply::Reply;
use quiver_service::server::{self, Bound, ServerError};
use quiver_service::service::{line, InfoParts, Section};
use quiver_service::service::{Core, RunEnd, Service};
use quiver_service::serving::Serving;
use quiver_service::session::Session;
use table::Tables;
use txn::RouterConn;

/// What the router counts beyond a RESP server's statistics (INFO `# Router`).
#[derive(Default)]
pub struct RouterStats {
    /// Batches sent to nodes: one per node per segment of a run.
    pub backend_requests: AtomicU64,
    /// Commands in them (a split command counts once per node).
    pub backend_commands: AtomicU64,
    /// Parts routed again after MOVED, ASK or CROSSSLOT.
    pub redirects: AtomicU64,
    /// Batches that failed: a node unreachable, closed or too slow.
    pub backend_errors: AtomicU64,
    /// MGETs' keys, and the parts they were split into as first routed (one per node asked):
    /// keys / parts is the width of the vector each node gets.
    pub mget_keys: AtomicU64,
    pub mget_parts: AtomicU64,
}

/// [`RouterStats`]' counters, in INFO's order (`# Router`): what INFO and the metrics show.
const COUNTERS: &[Figure<RouterStats>] = &[
    Figure {
        info: Some("router_backend_requests"),
        metric: counter(
            "quiver_router_backend_requests_total",
            "Batches sent to nodes.",
        ),
        read: |s| Value::Count(s.backend_requests.load(Relaxed)),
    },
    Figure {
        info: Some("router_backend_commands"),
        metric: counter(
            "quiver_router_backend_commands_total",
            "Commands sent to nodes.",
        ),
        read: |s| Value::Count(s.backend_commands.load(Relaxed)),
    },
    Figure {
        info: Some("router_redirects"),
        metric: counter(
            "quiver_router_redirects_total",
            "Commands routed again after a redirect.",
        ),
        read: |s| Value::Count(s.redirects.load(Relaxed)),
    },
    Figure {
        info: Some("router_backend_errors"),
        metric: counter("quiver_router_backend_errors_total", "Batches that failed."),
        read: |s| Value::Count(s.backend_errors.load(Relaxed)),
    },
    Figure {
        info: Some("router_mget_keys"),
        metric: counter("quiver_router_mget_keys_total", "Keys of MGETs."),
        read: |s| Value::Count(s.mget_keys.load(Relaxed)),
    },
    Figure {
        info: Some("router_mget_parts"),
        metric: counter(
            "quiver_router_mget_parts_total",
            "Parts MGETs were split into (one per node asked).",
        ),
        read: |s| Value::Count(s.mget_parts.load(Relaxed)),
    },
];

pub struct Router {
    pub core: Core,
    pub tables: Arc<Tables>,
    pub pool: Arc<Pool>,
    pub stats: RouterStats,
}

impl Router {
    /// Sends `n` encoded commands to the node at `addr` on a pooled connection.
    pub async fn send(
        &self,
        addr: &Arc<str>,
        resp3: bool,
        request: &[u8],
        n: usize,
    ) -> Result<Replies, PeerError> {
        let result = async {
            let mut conn = self.pool.get(addr, resp3).await?;
            let replies = conn.send(request, n).await?;
            self.pool.put(conn);
            Ok(replies)
        }
        .await;
        if let Err(e) = &result {
            self.stats.backend_errors.fetch_add(1, Relaxed);
            tracing::debug!(error = %e, "router: a batch to a node failed");
        }
        result
    }

    /// The reply for a command whose node failed (`e`), and a reading of etcd at once (a
    /// failover may have given the node's ranges to another member). Nothing reached the
    /// node: TRYAGAIN, which clients send again — or CLUSTERDOWN when the node's ranges have
    /// no other member to take them over. Something may have: the error naming the node (a
    /// write among it may or may not have been applied, as when a client loses its own
    /// connection).
    pub fn failed(&self, e: &PeerError) -> Reply {
        self.tables.refresh.notify_one();
        if !e.before_request() {
            return Reply::error(format!("ERR router: {e}"));
        }
        let table = self.tables.current();
        let node = table.addrs.iter().position(|a| a == e.addr());
        match node {
            Some(n) if !table.has_others(n) => Reply::error(format!(
                "CLUSTERDOWN router: the node's ranges have no other member: {e}"
            )),
            _ => Reply::error(format!("TRYAGAIN router: {e}")),
        }
    }

    /// INFO's `# Router` section.
    fn info_section(&self) -> Section {
        let table = self.tables.current();
        let mut fields = vec![
            line("router_epoch", table.epoch.to_string()),
            line("router_backends", table.addrs.len().to_string()),
        ];
        fields.extend(figures::info_lines(&self.stats, COUNTERS));
        ("router", "Router", fields)
    }
}

impl Service for Router {
    type Conn = RouterConn;

    fn core(&self) -> &Core {
        &self.core
    }

    fn execute_run<'a>(
        &'a self,
        session: &'a mut Session,
        conn: &'a mut RouterConn,
        requests: &'a [Vec<Bytes>],
        out: &'a mut Output<'_>,
    ) -> impl Future<Output = RunEnd> + Send + 'a {
        exec::execute_run(self, session, conn, requests, out)
    }

    fn disconnected(&self, _session: &mut Session, _conn: RouterConn) {
        // A pinned connection is dropped with `conn`: its node forgets the watched keys.
    }

    fn render_metrics(&self) -> String {
        let mut o = String::new();
        figures::render(&mut o, &self.stats, COUNTERS.iter());
        figures::write_metric(
            &mut o,
            "quiver_router_epoch",
            "Epoch of the topology the router routes by.",
            "gauge",
            self.tables.current().epoch.to_string(),
        );
        quiver_service::metrics::render_core(&self.core, &mut o);
        o
    }

    fn info_parts(&self) -> InfoParts {
        InfoParts {
            sections: vec![self.info_section()],
            replication: quiver_service::cmd::replication::info_lines(
                &quiver_service::cmd::replication::Replication::alone(),
                "quiver-router",
            ),
            ..InfoParts::default()
        }
    }
}

/// A router whose sockets are bound; [`RouterServer::run`] serves.
pub struct RouterServer {
    router: Arc<Router>,
    etcd: EtcdSettings,
    bound: Bound,
}

impl RouterServer {
    /// Validates `config` and binds the sockets; the topology is read from etcd once serving.
    pub fn bind(config: Config, etcd: EtcdSettings) -> Result<RouterServer, ServerError> {
        config.validate().map_err(ServerError::Config)?;
        let (core, bound) = Bound::start(config)?;
        let router = Arc::new(Router {
            core,
            tables: Arc::default(),
            pool: Arc::default(),
            stats: RouterStats::default(),
        });
        Ok(RouterServer {
            router,
            etcd,
            bound,
        })
    }

    /// Its sockets, runtime and shutdown signal.
    pub fn bound(&self) -> &Bound {
        &self.bound
    }

    /// Serves until the shutdown handle fires (or, with `handle_signals`, SIGINT / SIGTERM).
    pub fn run(self, handle_signals: bool) -> Result<(), ServerError> {
        let RouterServer {
            router,
            etcd,
            bound:
                Bound {
                    runtime,
                    listeners,
                    shutdown,
                },
        } = self;
        let result = runtime.block_on(async {
            let pool = router.pool.clone();
            let follower = tokio::spawn(table::follow(
                router.tables.clone(),
                etcd,
                move |t| pool.retain(&t.addrs),
                shutdown.subscribe(),
            ));
            // The router's connections wait on its backends' pooled connections, registered
            // with this runtime: they are served on it too.
            let serving = Arc::new(Serving::Shared(tokio::runtime::Handle::current()));
            server::serve_clients(
                router.clone(),
                serving,
                listeners,
                shutdown,
                handle_signals,
                vec![follower],
            )
            .await
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
        tracing::info!("router stopped");
        result
    }
}
