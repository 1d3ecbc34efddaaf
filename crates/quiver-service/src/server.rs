//! Serving any RESP service: bind the listeners, accept connections (up to `maxclients`), and
//! on shutdown stop accepting and let connections finish the run they are executing. A node's
//! start and stop around it (its store, its cluster agent) are `node`'s.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::acl::Users;
use crate::config::{Config, ConfigError};
use crate::conn;
use crate::ratelog::LogLimiter;
use crate::service::{Core, Service};
use crate::serving::Serving;
use crate::tls;

/// How long shutdown waits for connections to finish their current run.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// File descriptors kept for the store and listeners beyond one per client.
const RESERVED_FDS: u64 = 128;
/// A refused connection's error reply is written within this, or the connection is dropped.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a RESP service could not start, or did not stop cleanly. Each variant names the operation
/// that failed (no `From` conversions: every `?` says which one it is).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("configuration: {0}")]
    Config(#[source] ConfigError),
    /// The TLS settings' files could not be used (unreadable, not PEM, key and certificate
    /// not a pair); the message names the setting and the file.
    #[error("TLS: {0}")]
    Tls(String),
    /// The ACL file could not be read or has a bad line (the message names both).
    #[error("aclfile {0}")]
    Acl(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{op}: {source}")]
    Io {
        /// What was being done, e.g. "cannot start the runtime".
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Maps an I/O error to [`ServerError::Io`] naming `op`.
pub fn io_error(op: &'static str) -> impl FnOnce(std::io::Error) -> ServerError {
    move |source| ServerError::Io { op, source }
}

/// Stops a running server from another thread (or from a test).
#[derive(Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    pub fn new(sender: Arc<watch::Sender<bool>>) -> ShutdownHandle {
        ShutdownHandle(sender)
    }

    pub fn shutdown(&self) {
        let _ = self.0.send(true);
    }
}

/// A RESP service ready to serve: its sockets bound, its runtime started, its shutdown signal —
/// what a node's `Server` and the router's `RouterServer` hold alike.
pub struct Bound {
    pub runtime: tokio::runtime::Runtime,
    pub listeners: Listeners,
    pub shutdown: Arc<watch::Sender<bool>>,
}

impl Bound {
    /// Reads the ACL users, binds `config`'s sockets and starts the runtime: the service's
    /// `Core` (on the port bound) and what it serves on. `config` is validated by the caller.
    pub fn start(config: Config) -> Result<(Core, Bound), ServerError> {
        let users = Users::at_start(config.requirepass.as_deref(), config.aclfile.as_deref())
            .map_err(ServerError::Acl)?;
        let listeners = Listeners::bind(&config)?;
        let runtime = runtime(&config)?;
        let port = listeners.local_addr().port();
        let (shutdown, _) = watch::channel(false);
        let bound = Bound {
            runtime,
            listeners,
            shutdown: Arc::new(shutdown),
        };
        Ok((Core::new(config, port, users), bound))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listeners.local_addr()
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listeners.metrics_addr()
    }

    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.listeners.tls_addr()
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle::new(self.shutdown.clone())
    }

    /// Where `who` listens, one line per socket, on `out` (`quiver serve` and `quiver router`
    /// print it on stdout: a caller that asked for `--port 0` learns the port there).
    pub fn announce(&self, who: &str, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "{who} listening on {}", self.local_addr())?;
        if let Some(t) = self.tls_addr() {
            writeln!(out, "{who} TLS listening on {t}")?;
        }
        if let Some(m) = self.metrics_addr() {
            writeln!(out, "{who} metrics on http://{m}/metrics")?;
        }
        out.flush()
    }
}

/// The sockets a RESP server listens on: TCP, optionally a Unix socket and the metrics port.
pub struct Listeners {
    tcp: std::net::TcpListener,
    unix: Option<(std::os::unix::net::UnixListener, PathBuf)>,
    metrics: Option<std::net::TcpListener>,
    /// `tls-port`'s listener and the acceptor its handshakes go through.
    tls: Option<(std::net::TcpListener, TlsAcceptor)>,
}

impl Listeners {
    /// Binds what `config` names (and raises the open-files limit for `maxclients`).
    pub fn bind(config: &Config) -> Result<Listeners, ServerError> {
        raise_fd_limit(config.maxclients as u64 + RESERVED_FDS);
        // The certificate files are read before any port is bound: a bad one stops the start.
        let acceptor = config.tls().acceptor().map_err(ServerError::Tls)?;
        let tcp = bind_tcp(
            SocketAddr::new(config.bind, config.port),
            "cannot configure the listening socket",
        )?;
        let unix = match &config.unixsocket {
            Some(path) => {
                // A socket file left by a previous run would make bind fail (Redis unlinks it too).
                if std::fs::symlink_metadata(path)
                    .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
                {
                    let _ = std::fs::remove_file(path);
                }
                let l = std::os::unix::net::UnixListener::bind(path).map_err(|e| {
                    ServerError::Bind {
                        addr: path.display().to_string(),
                        source: e,
                    }
                })?;
                l.set_nonblocking(true)
                    .map_err(io_error("cannot configure the Unix socket"))?;
                Some((l, path.clone()))
            }
            None => None,
        };
        let tls = match acceptor {
            Some(acceptor) => {
                let addr = SocketAddr::new(config.bind, config.tls_port.unwrap_or_default());
                Some((bind_tcp(addr, "cannot configure the TLS socket")?, acceptor))
            }
            None => None,
        };
        let metrics = match config.metrics_addr {
            Some(addr) => Some(bind_tcp(addr, "cannot configure the metrics socket")?),
            None => None,
        };
        Ok(Listeners {
            tcp,
            unix,
            metrics,
            tls,
        })
    }

    // A listening socket bound by `bind` has an address; `getsockname` fails only for a
    // descriptor that is not a socket.
    #[allow(clippy::expect_used)]
    pub fn local_addr(&self) -> SocketAddr {
        self.tcp
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The TLS port's address, if `tls-port` is set.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }
}

/// A non-blocking TCP listener on `addr`; `configure` names the step that can fail after the
/// bind.
fn bind_tcp(
    addr: SocketAddr,
    configure: &'static str,
) -> Result<std::net::TcpListener, ServerError> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| ServerError::Bind {
        addr: addr.to_string(),
        source: e,
    })?;
    l.set_nonblocking(true).map_err(io_error(configure))?;
    Ok(l)
}

/// The runtime a RESP server's connections run on: `threads` workers.
pub fn runtime(config: &Config) -> Result<tokio::runtime::Runtime, ServerError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads())
        .thread_name("quiver-worker")
        .enable_all()
        .build()
        .map_err(io_error("cannot start the runtime"))
}

/// Accepts connections on `listeners` for `service` (and serves its metrics) until `shutdown`
/// fires or, with `handle_signals`, SIGINT / SIGTERM; then lets connections finish the run
/// they are executing (bounded by [`SHUTDOWN_GRACE`]). `background` tasks are aborted then.
pub async fn serve_clients<S: Service>(
    service: Arc<S>,
    serving: Arc<Serving>,
    listeners: Listeners,
    shutdown: Arc<watch::Sender<bool>>,
    handle_signals: bool,
    background: Vec<tokio::task::JoinHandle<()>>,
) -> Result<(), ServerError> {
    // The handlers exist before the first connection is accepted: a SIGTERM sent once a client
    // was served must find them (on a busy machine, clients ran commands and sent SIGTERM
    // before this task got to install them, and the default action killed the server).
    let signals = if handle_signals {
        use tokio::signal::unix::{signal, SignalKind};
        let int = signal(SignalKind::interrupt()).map_err(io_error("cannot handle SIGINT"))?;
        let term = signal(SignalKind::terminate()).map_err(io_error("cannot handle SIGTERM"))?;
        Some((int, term))
    } else {
        None
    };
    let Listeners {
        tcp,
        unix,
        metrics,
        tls,
    } = listeners;
    let tcp = TcpListener::from_std(tcp).map_err(io_error("cannot register the listener"))?;
    let addr = tcp
        .local_addr()
        .map_err(io_error("cannot read the listening address"))?;
    let mut tasks = background;
    tasks.push(tokio::spawn(accept_tcp(
        tcp,
        service.clone(),
        serving.clone(),
        shutdown.subscribe(),
    )));
    let mut unix_path = None;
    if let Some((l, path)) = unix {
        tasks.push(tokio::spawn(accept_unix(
            UnixListener::from_std(l).map_err(io_error("cannot register the Unix socket"))?,
            service.clone(),
            serving.clone(),
            shutdown.subscribe(),
        )));
        unix_path = Some(path);
    }
    let mut tls_addr = None;
    if let Some((l, acceptor)) = tls {
        let l = TcpListener::from_std(l).map_err(io_error("cannot register the TLS socket"))?;
        tls_addr = l.local_addr().ok();
        tasks.push(tokio::spawn(accept_tls(
            l,
            acceptor,
            service.clone(),
            serving.clone(),
            shutdown.subscribe(),
        )));
    }
    if let Some(l) = metrics {
        tasks.push(tokio::spawn(crate::metrics::serve(
            TcpListener::from_std(l).map_err(io_error("cannot register the metrics socket"))?,
            service.clone(),
        )));
    }
    tracing::info!(%addr, unixsocket = ?unix_path, tls = ?tls_addr, "ready to accept connections");
    let core = service.core();
    if protected_mode_refuses(core, Some(addr.ip())) {
        tracing::warn!(
            %addr,
            "protected mode: the default user has no password, so clients from other hosts \
             are refused until it has one (requirepass, the aclfile or ACL SETUSER), or \
             protected-mode is no"
        );
    }

    let mut rx = shutdown.subscribe();
    if let Some((mut int, mut term)) = signals {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received: shutting down"),
            _ = term.recv() => tracing::info!("SIGTERM received: shutting down"),
            _ = rx.wait_for(|&s| s) => tracing::info!("shutdown requested"),
        }
    } else {
        let _ = rx.wait_for(|&s| s).await;
        tracing::info!("shutdown requested");
    }
    let core = service.core();
    core.shutting_down.store(true, Ordering::SeqCst);
    let _ = shutdown.send(true);
    for t in &tasks {
        t.abort();
    }
    // Connections finish the run they are executing, write its replies, and close.
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while core.stats.connected_clients.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if let Some(path) = unix_path {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

async fn accept_tcp<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    serving: Arc<Serving>,
    shutdown: watch::Receiver<bool>,
) {
    let laddr = local_addr_text(&listener);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                if let Ok(stream) = stream.into_std() {
                    let to_serve = Accepted {
                        addr: peer.to_string(),
                        peer: Some(peer.ip()),
                        laddr: laddr.clone(),
                    };
                    to_serve.hand_over(&serving, &service, &shutdown, stream, TcpStream::from_std);
                }
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// The TLS port: each accepted connection's handshake runs on the thread that will serve it
/// (at most [`tls::HANDSHAKES_MAX`] at once, each within [`tls::HANDSHAKE_TIMEOUT`]); a
/// connection whose handshake succeeds is admitted like a plain one, the others are closed and
/// logged.
async fn accept_tls<S: Service>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    service: Arc<S>,
    serving: Arc<Serving>,
    shutdown: watch::Receiver<bool>,
) {
    let laddr = local_addr_text(&listener);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(tls::HANDSHAKES_MAX));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                accept_failed(e).await;
                continue;
            }
        };
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "too many TLS handshakes in progress: connection closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let (acceptor, service, shutdown, laddr) = (
            acceptor.clone(),
            service.clone(),
            shutdown.clone(),
            laddr.clone(),
        );
        serving.spawn(async move {
            let stream = match TcpStream::from_std(stream) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "cannot register a connection");
                    return;
                }
            };
            let handshake = tokio::time::timeout(tls::HANDSHAKE_TIMEOUT, acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(stream)) => {
                    drop(permit);
                    let addr = peer.to_string();
                    admit(&service, stream, addr, Some(peer.ip()), laddr, &shutdown).await;
                }
                Ok(Err(e)) => match tls::handshake_hint(&e) {
                    Some(hint) => tracing::warn!(%peer, error = %e, hint, "TLS handshake failed"),
                    None => tracing::info!(%peer, error = %e, "TLS handshake failed"),
                },
                Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

async fn accept_unix<S: Service>(
    listener: UnixListener,
    service: Arc<S>,
    serving: Arc<Serving>,
    shutdown: watch::Receiver<bool>,
) {
    let laddr = service
        .core()
        .config
        .unixsocket
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if let Ok(stream) = stream.into_std() {
                    let to_serve = Accepted {
                        addr: format!("{laddr}:0"),
                        peer: None,
                        laddr: laddr.clone(),
                    };
                    to_serve.hand_over(&serving, &service, &shutdown, stream, UnixStream::from_std);
                }
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// An accepted plain connection, not yet registered with the runtime that will serve it.
struct Accepted {
    /// The client's address as CLIENT LIST shows it (`addr=`), its IP (`None` on the Unix
    /// socket), and the listener's (`laddr=`).
    addr: String,
    peer: Option<IpAddr>,
    laddr: String,
}

impl Accepted {
    /// Hands `stream` (a socket taken out of the accepting runtime) to a serving thread,
    /// which registers it with its own runtime (`register`: `from_std`) and admits it.
    fn hand_over<S, Std, T>(
        self,
        serving: &Serving,
        service: &Arc<S>,
        shutdown: &watch::Receiver<bool>,
        stream: Std,
        register: fn(Std) -> std::io::Result<T>,
    ) where
        S: Service,
        Std: Send + 'static,
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (service, shutdown) = (service.clone(), shutdown.clone());
        serving.spawn(async move {
            match register(stream) {
                Ok(s) => admit(&service, s, self.addr, self.peer, self.laddr, &shutdown).await,
                Err(e) => {
                    tracing::warn!(addr = %self.addr, error = %e, "cannot register a connection")
                }
            }
        });
    }
}

/// A listener's address as CLIENT LIST shows it (`laddr=`).
fn local_addr_text(listener: &TcpListener) -> String {
    listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default()
}

/// Out of file descriptors or similar: log, back off briefly, keep serving the others.
async fn accept_failed(e: std::io::Error) {
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// The refusal of protected mode (Redis 7's, naming Quiver's ways out).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Quiver is running in protected mode because \
protected mode is enabled and no password is set for the default user. In this mode \
connections are only accepted from the loopback interface. If you want to connect from \
external computers to Quiver you may adopt one of the following solutions: 1) Set up an \
authentication password for the default user: requirepass in the configuration file, or \
'ACL SETUSER default on >password' from the loopback interface (ACL SAVE keeps it in the \
aclfile). 2) Disable protected mode by setting protected-mode to 'no' in the configuration \
file (or starting the server with '--protected-mode no'), and then restarting the server; \
MAKE SURE Quiver is not publicly accessible from internet if you do so. NOTE: You only need \
to do one of the above things in order for the server to start accepting connections from \
the outside.\r\n";
/// Interval between two log lines of connections refused by protected mode.
const PROTECTED_MODE_LOG_INTERVAL: Duration = Duration::from_secs(60);
static PROTECTED_MODE_REFUSALS: LogLimiter = LogLimiter::new(PROTECTED_MODE_LOG_INTERVAL);

/// Protected mode, decided per connection as Redis 7 does: while it is on and the `default`
/// user has no password (`nopass`: by `requirepass` unset, the aclfile, or ACL SETUSER at
/// run time), only clients on a loopback address or the Unix socket (`peer` `None`) are
/// served.
fn protected_mode_refuses(core: &Core, peer: Option<IpAddr>) -> bool {
    let local = peer.is_none_or(|ip| match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    });
    core.config.protected_mode && !local && core.users.default_user().nopass
}

/// Serves an accepted connection (on the thread that serves it) until it ends, or refuses it
/// at `maxclients` or by protected mode (`peer`: the client's address, `None` on the Unix
/// socket) like Redis does.
async fn admit<S, T>(
    service: &Arc<S>,
    stream: T,
    addr: String,
    peer: Option<IpAddr>,
    laddr: String,
    shutdown: &watch::Receiver<bool>,
) where
    S: Service,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let core = service.core();
    let stats = &core.stats;
    stats.connections_received.fetch_add(1, Ordering::Relaxed);
    if stats.connected_clients.fetch_add(1, Ordering::SeqCst) >= core.live.maxclients() {
        stats.connected_clients.fetch_sub(1, Ordering::SeqCst);
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%addr, "maxclients reached: connection refused");
        refuse(stream, b"-ERR max number of clients reached\r\n").await;
        return;
    }
    if protected_mode_refuses(core, peer) {
        stats.connected_clients.fetch_sub(1, Ordering::SeqCst);
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = PROTECTED_MODE_REFUSALS.event(Instant::now()) {
            tracing::warn!(
                %addr,
                since_last_line = n,
                "protected mode: a connection from a non-loopback address refused (the \
                 default user has no password)"
            );
        }
        refuse(stream, PROTECTED_MODE_DENIED).await;
        return;
    }
    let info = core.clients.register(addr, laddr);
    conn::serve(service.clone(), stream, info, shutdown.clone()).await;
}

/// Answers a refused connection with `reply` and closes it (bounded by
/// `REFUSAL_WRITE_TIMEOUT`: a client that reads nothing holds nothing).
async fn refuse<T>(mut stream: T, reply: &'static [u8])
where
    T: tokio::io::AsyncWrite + Unpin,
{
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
        let _ = stream.write_all(reply).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Raises the open-files limit towards `wanted` (as Redis does for maxclients).
fn raise_fd_limit(wanted: u64) {
    if raise_fd_limit_to(wanted) < wanted {
        tracing::warn!(wanted, "could not raise the open-files limit");
    }
}

/// Raises the open-files limit towards `wanted` (as far as the hard limit lets); returns the
/// limit now.
fn raise_fd_limit_to(wanted: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur >= wanted {
            return lim.rlim_cur;
        }
        let current = lim.rlim_cur;
        lim.rlim_cur = wanted.min(lim.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            return current;
        }
        lim.rlim_cur
    }
}

/// Makes room for `clients` connections (CONFIG SET maxclients): raises the open-files limit
/// if it must; `Err` with the most clients the process can serve if it cannot.
pub fn make_room_for_clients(clients: usize) -> Result<(), u64> {
    let wanted = clients as u64 + RESERVED_FDS;
    let now = raise_fd_limit_to(wanted);
    if now >= wanted {
        Ok(())
    } else {
        Err(now.saturating_sub(RESERVED_FDS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_operation_that_failed() {
        let io = io_error("cannot start the runtime")(std::io::Error::other("no threads"));
        assert_eq!(io.to_string(), "cannot start the runtime: no threads");
    }
}
