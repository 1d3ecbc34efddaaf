//! `quiver serve`, `quiver router` and `quiver manager`: settings from --config, overridden by flags; logs to
//! stderr; the bound address on stdout (so `--port 0` callers learn the port); serves until
//! SIGINT / SIGTERM.

use std::io::Write;
use std::path::PathBuf;

use quiver_node::node_config::ServeConfig;
use quiver_node::Server;
use quiver_router::RouterServer;
use quiver_service::config::{Config, LogFormat};
use quiver_service::logging::LogLevel;

use crate::cli::{ListenArgs, ManagerArgs, RouterArgs, ServeArgs};
use crate::error::CliError;

pub fn serve(dir: Option<PathBuf>, a: &ServeArgs) -> Result<(), CliError> {
    let mut serve = match &a.listen.config {
        Some(path) => ServeConfig::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?,
        None => ServeConfig::default(),
    };
    listen_flags(&a.listen, &mut serve.service);
    if let Some(n) = a.databases {
        serve.service.databases = n;
    }
    let config = &mut serve.node;
    if let Some(d) = dir {
        config.dir = d;
    }
    macro_rules! flag {
        ($($field:ident),*) => { $( if let Some(v) = a.$field.clone() { config.$field = v.into(); } )* };
    }
    flag!(durability, backend, max_vector_width, coalesce);
    if a.cluster {
        config.cluster_enabled = true;
    }
    if let Some(e) = &a.etcd {
        config.cluster_etcd = Some(e.clone());
    }
    if let Some(p) = &a.etcd_prefix {
        config.cluster_etcd_prefix = p.clone();
    }
    if let Some(id) = &a.node_id {
        config.cluster_node_id = Some(id.clone());
    }
    if let Some(addr) = &a.advertise {
        config.cluster_announce = Some(addr.clone());
    }
    if let Some(ms) = a.node_timeout {
        config.cluster_node_timeout = ms;
    }
    init_logging(serve.service.log_format, serve.service.loglevel);
    let server = Server::bind(serve).map_err(CliError::Node)?;
    server.bound().announce("quiver", &mut std::io::stdout())?;
    server.run(true).map_err(CliError::Node)
}

/// The router's default port: beside a node's default (7379) on the same host.
pub const ROUTER_DEFAULT_PORT: u16 = 7380;

pub fn router(a: &RouterArgs) -> Result<(), CliError> {
    let mut config = match &a.listen.config {
        Some(path) => Config::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?,
        None => Config {
            port: ROUTER_DEFAULT_PORT,
            ..Config::default()
        },
    };
    listen_flags(&a.listen, &mut config);
    let etcd = quiver_cluster::meta::EtcdSettings {
        endpoints: a.etcd.clone(),
        prefix: a
            .etcd_prefix
            .clone()
            .unwrap_or_else(|| quiver_cluster::meta::DEFAULT_PREFIX.to_string()),
    };
    init_logging(config.log_format, config.loglevel);
    let router = RouterServer::bind(config, etcd).map_err(CliError::Server)?;
    router
        .bound()
        .announce("quiver router", &mut std::io::stdout())?;
    router.run(true).map_err(CliError::Server)
}

/// Overrides the service's settings with the flags of any RESP server.
fn listen_flags(a: &ListenArgs, config: &mut Config) {
    macro_rules! flag {
        ($($field:ident),*) => { $( if let Some(v) = a.$field.clone() { config.$field = v.into(); } )* };
    }
    flag!(bind, port, threads, log_format, protected_mode);
    if let Some(p) = &a.unixsocket {
        config.unixsocket = Some(p.clone());
    }
    if let Some(p) = &a.requirepass {
        config.requirepass = Some(p.clone());
    }
    if let Some(m) = a.metrics_addr {
        config.metrics_addr = Some(m);
    }
}

/// Structured logs on stderr, filtered by `RUST_LOG` when it is set, else by `level`;
/// CONFIG SET loglevel replaces the filter while serving (`quiver_service::logging`).
pub fn init_logging(format: LogFormat, level: LogLevel) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level.filter()));
    let (filter, reload) = reload::Layer::new(filter);
    quiver_service::logging::install(Box::new(move |f| {
        let _ = reload.reload(EnvFilter::new(f));
    }));
    let lines = fmt::layer()
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr on a full disk, a closed pipe) is dropped:
        // reporting that failure on stderr again would panic the process (`eprintln!`), and a
        // node must not die of its logs.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let logger = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Json => logger.with(lines.json()).init(),
        LogFormat::Text => logger.with(lines).init(),
    }
}

/// `quiver manager`: the chains' repairs (`quiver_cluster::manager`) until SIGINT / SIGTERM.
pub fn manager(a: &ManagerArgs) -> Result<(), CliError> {
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("manager-{}", std::process::id()));
    if !quiver_cluster::topology::valid_node_id(&name) {
        return Err(CliError::Usage(format!(
            "--name {name:?}: 1 to 40 of [0-9A-Za-z_-]"
        )));
    }
    init_logging(LogFormat::Text, LogLevel::Notice);
    let settings = quiver_cluster::manager::Settings {
        etcd: quiver_cluster::meta::EtcdSettings {
            endpoints: a.etcd.etcd.clone(),
            prefix: a.etcd.etcd_prefix.clone(),
        },
        name: name.clone(),
        lease_ttl: std::time::Duration::from_millis(a.lease_ms),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(CliError::Output)?;
        let shutdown = async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        let mut out = std::io::stdout();
        writeln!(out, "quiver manager {name} running")?;
        out.flush()?;
        quiver_cluster::manager::run(settings, shutdown).await;
        Ok(())
    })
}
