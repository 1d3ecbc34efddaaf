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

use crate::frame::{RequestParser, Run, RunSize};
use crate::output::Output;
use crate::ratelog::LogLimiter;
use crate::reply::Reply;
use crate::service::{RunEnd, Service};
use crate::session::Session;

/// What a connection executes in one turn at most before its thread turns to its other
/// connections (one run, or several when its requests arrive in several reads); the rest
/// stays buffered for its next turn. Requests bound the turns of small commands (a pipeline
/// of GETs), arguments those of wide ones (a backlog of 256-pair MSETs: 16 of them to a turn,
/// a few milliseconds of work), bytes those of large values.
pub const TURN_BOUND: RunSize = RunSize {
    requests: 1024,
    args: 8192,
    bytes: 4 << 20,
};
/// Before it authenticates, a client's requests run one at a time.
const TURN_BOUND_UNAUTHENTICATED: RunSize = RunSize::requests(1);
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
    let polls = Polls::default();
    let served = serve_loop(
        &*service,
        &mut stream,
        &mut session,
        &mut conn,
        shutdown,
        &polls,
    );
    let end = crate::tracking::as_client(info.id, polls.counting(served)).await;
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
    core.tracking.disable(&info);
    crate::cmd::pubsub::unsubscribe_all(&mut crate::cmd::ConnCtx {
        core,
        session: &mut session,
    });
    core.clients.unregister(info.id);
    core.stats.connected_clients.fetch_sub(1, Relaxed);
}

/// How many times a connection's task has been polled. Each poll after the first resumes it
/// after it gave its thread up — it waited for its client, for an fdatasync, for the MSETs of
/// the thread's other connections, or yielded — so a new turn starts there: `TURN_BOUND`
/// bounds the work between two, not the work of a connection's life. (Counted across the
/// turns instead, a client that pipelines four MSET-32s and waits for their replies had
/// every 32nd group cut in two, and in `fsync` mode each half synced on its own: 15% of its
/// throughput, BENCHMARKS §45.)
#[derive(Default)]
struct Polls(std::sync::atomic::AtomicU64);

impl Polls {
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Runs `fut`, counting its polls.
    async fn counting<F: std::future::Future>(&self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            self.0.fetch_add(1, Relaxed);
            fut.as_mut().poll(cx)
        })
        .await
    }
}

/// What a connection has run in its turn: since its task last gave its thread up.
struct Turn<'p> {
    polls: &'p Polls,
    /// The task's polls when the turn started.
    at: u64,
    ran: RunSize,
}

impl<'p> Turn<'p> {
    fn new(polls: &'p Polls) -> Turn<'p> {
        Turn {
            polls,
            at: polls.get(),
            ran: RunSize::default(),
        }
    }

    /// What the turn has run so far (nothing, if the task has waited since the last call).
    fn ran(&mut self) -> RunSize {
        if self.polls.get() != self.at {
            *self = Turn::new(self.polls);
        }
        self.ran
    }

    fn add(&mut self, size: RunSize) {
        self.ran = self.ran.plus(size);
    }
}

/// What woke a connection waiting for its client.
enum Woke {
    /// Its read: `None` when the idle timeout passed.
    Read(Option<std::io::Result<usize>>),
    /// A MONITOR line (`None`: the monitor was cut off).
    Line(Option<bytes::Bytes>),
}

/// The next line of a monitor's queue (`None`: it was cut off).
async fn next_line(
    monitor: &mut Option<tokio::sync::mpsc::Receiver<bytes::Bytes>>,
) -> Option<bytes::Bytes> {
    match monitor {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Requests of a connection in MONITOR mode, answered as Redis answers them: PING and QUIT
/// run, RESET ends the monitoring (`true`: the caller stops streaming); anything else is
/// refused.
fn monitoring(requests: &[Vec<bytes::Bytes>], session: &mut Session, out: &mut Output<'_>) -> bool {
    for (i, r) in requests.iter().enumerate() {
        let name = r
            .first()
            .map(|n| n.to_ascii_lowercase())
            .unwrap_or_default();
        let reply = match &name[..] {
            b"ping" => Reply::simple("PONG"),
            b"quit" => {
                session.closing = true;
                Reply::OK
            }
            // What follows it runs as usual, on the next turn of the loop.
            b"reset" if i + 1 == requests.len() => {
                out.reply(&Reply::simple("RESET"), session.resp3);
                return true;
            }
            _ => Reply::error("ERR Replica can't interact with the keyspace"),
        };
        out.reply(&reply, session.resp3);
        if session.closing {
            break;
        }
    }
    false
}

async fn serve_loop<V: Service, S: AsyncRead + AsyncWrite + Unpin>(
    service: &V,
    stream: &mut S,
    session: &mut Session,
    conn: &mut V::Conn,
    mut shutdown: watch::Receiver<bool>,
    polls: &Polls,
) -> End {
    let core = service.core();
    let config = &core.config;
    let mut parser = RequestParser::new(config.limits());
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK_MIN);
    // Counted in the server-wide budget until written; its Drop gives back what is left
    // however this loop ends.
    let mut out = Output::new(&core.output_budget, &core.stats);
    let info = session.info.clone();
    let mut settings = core.live.subscribe();
    // MONITOR: the commands of every client, streamed between this one's replies.
    let mut monitor: Option<tokio::sync::mpsc::Receiver<bytes::Bytes>> = None;
    let mut turn = Turn::new(polls);
    loop {
        // Until the client authenticates, one request at a time under Redis's tighter limits:
        // an AUTH early in a pipeline lifts them for what follows it.
        let bound = if session.authenticated {
            TURN_BOUND
        } else {
            TURN_BOUND_UNAUTHENTICATED
        };
        parser.set_unauthenticated(!session.authenticated);
        parser.set_proto_max_bulk_len(core.live.proto_max_bulk_len());
        let Run {
            mut requests,
            size,
            error,
            bounded,
        } = parser.parse_run(&mut inbuf, bound.less(turn.ran()));
        turn.add(size);
        // What comes before an HTTP line runs, as it would have one by one; nothing after.
        let http = requests.iter().position(|r| is_http_line(r));
        if let Some(at) = http {
            requests.truncate(at);
        }
        if monitor.is_some() {
            if monitoring(&requests, session, &mut out) {
                monitor = None;
            }
        } else if !requests.is_empty() {
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
        if let Some(rx) = session.monitor.take() {
            monitor = Some(rx);
        }
        info.pushes.deliver(&mut out, session.receiver());
        if !out.is_empty() {
            // The other connections that are ready run their requests before this one writes:
            // the replies of a wake go out together, as Redis writes its clients' replies
            // before it waits again (BENCHMARKS §57).
            BackOfQueue(false).await;
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
        if bounded {
            // The turn is over: the rest of the backlog waits for the connections that are
            // ready now. (Reads of data already arrived do not yield, so without this one
            // client's backlog would hold the thread until it is used up.)
            tokio::task::yield_now().await;
            continue;
        }
        if inbuf.len() >= core.live.client_query_buffer_limit() {
            tracing::warn!(
                client = info.id,
                bytes = inbuf.len(),
                "client-query-buffer-limit exceeded"
            );
            return End::QueryBufferLimit;
        }
        inbuf.reserve(inbuf.len().clamp(READ_CHUNK_MIN, READ_CHUNK_MAX));
        // Read at every wait: CONFIG SET timeout applies to open connections.
        let timeout = core.live.timeout();
        let idle = (timeout > 0).then(|| Duration::from_secs(timeout));
        let read = async {
            match idle {
                Some(d) => tokio::time::timeout(d, stream.read_buf(&mut inbuf))
                    .await
                    .ok(),
                None => Some(stream.read_buf(&mut inbuf).await),
            }
        };
        let woke = tokio::select! {
            r = read => Woke::Read(r),
            _ = shutdown.wait_for(|&s| s) => return End::Shutdown,
            _ = info.kill_notify.notified() => return End::Killed,
            // A setting changed (CONFIG SET timeout): wait again under the new ones.
            Ok(()) = settings.changed() => continue,
            // A message to write (CLIENT TRACKING): the loop's next turn writes it.
            _ = info.pushes.notify.notified() => continue,
            line = next_line(&mut monitor), if monitor.is_some() => Woke::Line(line),
        };
        let n = match woke {
            Woke::Read(n) => n,
            // Cut off: its queue filled (a slow monitor), as Redis cuts one off.
            Woke::Line(None) => return End::OutputBufferLimit,
            Woke::Line(Some(line)) => {
                if let Err(e) = stream.write_all(&line).await {
                    return End::Io(e);
                }
                continue;
            }
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

/// Puts the task at the back of its thread's run queue once, without polling for I/O first
/// (`tokio::task::yield_now` defers the task past a poll of the I/O driver: an `epoll_wait`
/// more per connection's turn). A reply written at once, connection after connection with
/// a run's work between them, found the client's thread gone back to sleep each time: a
/// wake-up of another core per reply (10-12% of the serving thread against Redis's 5%).
struct BackOfQueue(bool);

impl std::future::Future for BackOfQueue {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Whether a request is the first line (`POST ...`) or a header line (`Host: ...`) of an HTTP
/// request, as Redis's `securityWarningCommand` takes them: by the first word alone.
fn is_http_line(args: &[bytes::Bytes]) -> bool {
    args.first().is_some_and(|name| {
        name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::acl::Users;
    use crate::config::Config;
    use crate::output::Output;
    use crate::service::{Core, RunEnd};

    /// A service that answers OK to everything and logs each run: (client id, requests).
    struct Logger {
        core: Core,
        runs: Mutex<Vec<(u64, usize)>>,
    }

    impl Service for Logger {
        type Conn = ();

        fn core(&self) -> &Core {
            &self.core
        }

        async fn execute_run(
            &self,
            session: &mut Session,
            _conn: &mut (),
            requests: &[Vec<bytes::Bytes>],
            out: &mut Output<'_>,
        ) -> RunEnd {
            self.runs
                .lock()
                .unwrap()
                .push((session.info.id, requests.len()));
            for _ in requests {
                out.reply(&Reply::OK, false);
            }
            RunEnd::Complete
        }

        fn disconnected(&self, _session: &mut Session, _conn: ()) {}

        fn render_metrics(&self) -> String {
            String::new()
        }

        fn info_parts(&self) -> crate::service::InfoParts {
            crate::service::InfoParts::default()
        }
    }

    /// A `Logger` service, and a single-threaded runtime (one serving thread's).
    fn logger() -> (Arc<Logger>, tokio::runtime::Runtime) {
        let users = Users::at_start(None, None).unwrap();
        let service = Arc::new(Logger {
            core: Core::new(Config::default(), 0, users),
            runs: Mutex::default(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (service, runtime)
    }

    /// `n` MSETs of `pairs` pairs each (keys `m:p`), encoded back to back.
    fn msets(n: usize, pairs: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        for m in 0..n {
            let keys: Vec<String> = (0..pairs).map(|p| format!("{m}:{p}")).collect();
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for key in &keys {
                args.extend([key.as_bytes(), b"v"]);
            }
            quiver_resp::encode_command(&mut bytes, &args);
        }
        bytes
    }

    /// A client that pipelines a few MSETs and waits for their replies before the next ones
    /// has each group run whole: every wait for the client starts a new turn, so the turn's
    /// bound never falls inside a group however many groups came before.
    #[test]
    fn a_client_that_waits_for_its_replies_starts_a_new_turn_each_time() {
        // Groups of 4 pipelined MSETs of 32 pairs: 65 arguments a request, past
        // `TURN_BOUND.args` within 32 groups.
        const GROUPS: usize = 100;
        const DEPTH: usize = 4;
        const PAIRS: usize = 32;
        let group = msets(DEPTH, PAIRS);
        const _: () = assert!(GROUPS * DEPTH * (1 + 2 * PAIRS) > 2 * TURN_BOUND.args);
        let (service, runtime) = logger();
        runtime.block_on(async {
            let (_stop, shutdown) = watch::channel(false);
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let info = service.core.clients.register("test".into(), "test".into());
            tokio::spawn(serve(service.clone(), server, info, shutdown));
            let mut replies = vec![0; DEPTH * b"+OK\r\n".len()];
            for _ in 0..GROUPS {
                client.write_all(&group).await.unwrap();
                client.read_exact(&mut replies).await.unwrap();
            }
        });
        let runs = service.runs.lock().unwrap().clone();
        assert_eq!(runs.len(), GROUPS, "a group was cut: {runs:?}");
        assert!(runs.iter().all(|r| r.1 == DEPTH), "{runs:?}");
    }

    /// One connection's backlog of wide MSETs, already received in full, runs a bounded run
    /// at a time, and a connection of the same thread that is ready too runs between two of
    /// them — not after the whole backlog.
    #[test]
    fn a_backlog_runs_in_bounded_turns_with_the_threads_other_connections() {
        const MSETS: usize = 100;
        const PAIRS: usize = 256;
        let backlog = msets(MSETS, PAIRS);
        let (service, runtime) = logger();
        let (busy, other) = runtime.block_on(async {
            let (_stop, shutdown) = watch::channel(false);
            let mut ends = Vec::new();
            let mut ids = Vec::new();
            for input in [&backlog[..], b"PING\r\n"] {
                let (mut client, server) = tokio::io::duplex(backlog.len() * 2);
                client.write_all(input).await.unwrap();
                let info = service.core.clients.register("test".into(), "test".into());
                ids.push(info.id);
                tokio::spawn(serve(service.clone(), server, info, shutdown.clone()));
                ends.push(client);
            }
            // Both connections are served until the backlog is answered.
            let mut replies = vec![0; MSETS * b"+OK\r\n".len()];
            ends[0].read_exact(&mut replies).await.unwrap();
            (ids[0], ids[1])
        });
        let runs = service.runs.lock().unwrap().clone();
        let busy_runs: Vec<usize> = runs.iter().filter(|r| r.0 == busy).map(|r| r.1).collect();
        assert_eq!(busy_runs.iter().sum::<usize>(), MSETS);
        // A run stops at the request that reaches its bound on arguments.
        let per_run = TURN_BOUND.args.div_ceil(1 + 2 * PAIRS);
        assert!(busy_runs.iter().all(|&n| n <= per_run), "{runs:?}");
        let other_at = runs.iter().position(|r| r.0 == other);
        let busy_last = runs.iter().rposition(|r| r.0 == busy).unwrap();
        assert!(
            other_at.is_some_and(|at| at < busy_last),
            "the other connection ran after the whole backlog: {runs:?}"
        );
    }
}
