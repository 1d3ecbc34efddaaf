//! One client connection: read what has arrived, parse it as a run of requests, execute the
//! run, write the replies, repeat.
//!
//! While replies are being written nothing more is read, so a client that pipelines without
//! reading its replies stalls itself only, and the output buffer holds at most one run's
//! replies (capped by `client-output-buffer-limit`, and all connections' together by
//! `client-output-buffer-total-limit`: see [`crate::output`]). The query buffer is capped by
//! `client-query-buffer-limit`; a protocol error is answered and the connection closed,
//! as Redis does.
//!
//! A request named `POST` or `Host:` is the start of an HTTP request, which a web page can
//! make a browser send to any local port (cross-protocol scripting: the request's body would
//! then run as commands). As Redis does since 3.2.7, the connection is closed at once without
//! a reply, nothing after it runs, and a warning is logged (at most once a minute).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::clients::ClientInfo;
use crate::exec::RunEnd;
use crate::frame::RequestParser;
use crate::output::Output;
use crate::ratelog::LogLimiter;
use crate::reply::Reply;
use crate::service::Service;
use crate::session::Session;

/// Requests executed as one run at most; more stay buffered for the next run.
pub const RUN_REQUESTS_MAX: usize = 1024;
/// Bytes read per call at least, and at most (a large value arrives in chunks this big).
const READ_CHUNK_MIN: usize = 16 * 1024;
const READ_CHUNK_MAX: usize = 1 << 20;

/// Interval between two warnings of requests that look like HTTP (`SECURITY_ATTACKS`).
const SECURITY_WARNING_INTERVAL: Duration = Duration::from_secs(60);
static SECURITY_ATTACKS: LogLimiter = LogLimiter::new(SECURITY_WARNING_INTERVAL);

/// Why a connection ended (for the log).
#[derive(Debug)]
enum End {
    ClientClosed,
    Quit,
    ProtocolError,
    /// A request that starts an HTTP request (see the module documentation).
    CrossProtocol,
    QueryBufferLimit,
    OutputBufferLimit,
    IdleTimeout,
    Killed,
    Shutdown,
    /// The run's writes (or the writes it read) were not seen committed: its replies are
    /// not sent, and the client learns the outcome is unknown as from any lost connection.
    Unresolved,
    Io(#[allow(dead_code, reason = "read through Debug, in the log")] std::io::Error),
}

/// Serves one connection until it ends, then unregisters it.
pub async fn serve<V: Service, S: AsyncRead + AsyncWrite + Unpin>(
    service: Arc<V>,
    mut stream: S,
    info: Arc<ClientInfo>,
    shutdown: watch::Receiver<bool>,
) {
    let core = service.core();
    let version = core.users.version();
    let mut session = Session::new(info.clone(), core.users.default_user(), version);
    let mut conn = V::Conn::default();
    let end = serve_loop(&*service, &mut stream, &mut session, &mut conn, shutdown).await;
    match &end {
        End::ClientClosed | End::Quit | End::Shutdown => {
            tracing::debug!(client = info.id, addr = %info.addr, reason = ?end, "connection closed")
        }
        _ => {
            tracing::info!(client = info.id, addr = %info.addr, reason = ?end, "connection closed")
        }
    }
    if matches!(
        end,
        End::QueryBufferLimit | End::OutputBufferLimit | End::IdleTimeout
    ) {
        core.stats.clients_closed_by_limit.fetch_add(1, Relaxed);
    }
    let _ = stream.shutdown().await;
    service.disconnected(&mut session, conn);
    core.clients.unregister(info.id);
    core.stats.connected_clients.fetch_sub(1, Relaxed);
}

async fn serve_loop<V: Service, S: AsyncRead + AsyncWrite + Unpin>(
    service: &V,
    stream: &mut S,
    session: &mut Session,
    conn: &mut V::Conn,
    mut shutdown: watch::Receiver<bool>,
) -> End {
    let core = service.core();
    let config = &core.config;
    let mut parser = RequestParser::new(config.limits());
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK_MIN);
    // Counted in the server-wide budget until written; its Drop gives back what is left
    // however this loop ends.
    let mut out = Output::new(&core.output_budget, &core.stats);
    let idle = (config.timeout > 0).then(|| Duration::from_secs(config.timeout));
    let info = session.info.clone();
    loop {
        // Until the client authenticates, one request at a time under Redis's tighter limits:
        // an AUTH early in a pipeline lifts them for what follows it.
        let run_max = if session.authenticated {
            RUN_REQUESTS_MAX
        } else {
            1
        };
        parser.set_unauthenticated(!session.authenticated);
        let (mut requests, error) = parser.parse_run(&mut inbuf, run_max);
        let full_run = requests.len() == run_max;
        // What comes before an HTTP line runs, as it would have one by one; nothing after.
        let http = requests.iter().position(|r| is_http_line(r));
        if let Some(at) = http {
            requests.truncate(at);
        }
        if !requests.is_empty() {
            let end = service
                .execute_run(session, conn, &requests, &mut out)
                .await;
            match end {
                RunEnd::Complete => {}
                RunEnd::OutputLimit => {
                    tracing::warn!(
                        client = info.id,
                        bytes = out.len(),
                        "client-output-buffer-limit exceeded"
                    );
                    return End::OutputBufferLimit;
                }
                RunEnd::Unresolved => return End::Unresolved,
            }
        }
        drop(requests);
        if http.is_some() {
            if let Some(n) = SECURITY_ATTACKS.event(std::time::Instant::now()) {
                tracing::warn!(
                    client = info.id,
                    addr = %info.addr,
                    since_last_warning = n,
                    "Possible SECURITY ATTACK detected. It looks like somebody is sending POST \
                     or Host: commands to Quiver. This is likely due to an attacker attempting \
                     to use Cross Protocol Scripting to compromise your Quiver instance. \
                     Connection aborted."
                );
            }
            return End::CrossProtocol;
        }
        if let Some(e) = &error {
            core.stats.protocol_errors.fetch_add(1, Relaxed);
            tracing::info!(client = info.id, error = %e, "protocol error");
            out.reply(&Reply::from(e.clone()), session.resp3);
        }
        if !out.is_empty() {
            // A client that does not read its replies must not hold up shutdown.
            let written = tokio::select! {
                r = stream.write_all(out.bytes()) => r,
                _ = shutdown.wait_for(|&s| s) => return End::Shutdown,
            };
            if let Err(e) = written {
                return End::Io(e);
            }
            core.stats.net_output(out.len() as u64);
            out.written();
        }
        if error.is_some() {
            return End::ProtocolError;
        }
        if session.closing {
            return End::Quit;
        }
        if info.killed.load(Relaxed) {
            return End::Killed;
        }
        if core.is_shutting_down() {
            return End::Shutdown;
        }
        if full_run {
            continue;
        }
        if inbuf.len() >= config.client_query_buffer_limit {
            tracing::warn!(
                client = info.id,
                bytes = inbuf.len(),
                "client-query-buffer-limit exceeded"
            );
            return End::QueryBufferLimit;
        }
        inbuf.reserve(inbuf.len().clamp(READ_CHUNK_MIN, READ_CHUNK_MAX));
        let read = async {
            match idle {
                Some(d) => tokio::time::timeout(d, stream.read_buf(&mut inbuf))
                    .await
                    .ok(),
                None => Some(stream.read_buf(&mut inbuf).await),
            }
        };
        let n = tokio::select! {
            r = read => r,
            _ = shutdown.wait_for(|&s| s) => return End::Shutdown,
            _ = info.kill_notify.notified() => return End::Killed,
        };
        match n {
            None => return End::IdleTimeout,
            Some(Ok(0)) => return End::ClientClosed,
            Some(Ok(n)) => {
                core.stats.net_input(n as u64);
            }
            Some(Err(e)) => return End::Io(e),
        }
    }
}

/// Whether a request is the first line (`POST ...`) or a header line (`Host: ...`) of an HTTP
/// request, as Redis's `securityWarningCommand` takes them: by the first word alone.
fn is_http_line(args: &[bytes::Bytes]) -> bool {
    args.first().is_some_and(|name| {
        name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
    })
}
