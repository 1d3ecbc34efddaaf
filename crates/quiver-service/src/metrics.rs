//! The Prometheus text endpoint (`metrics-addr`): a minimal HTTP/1.1 server answering
//! `GET /metrics` with the exposition format, one request per connection. Bounded as the
//! RESP listener is: a request must arrive and its answer be written within
//! `REQUEST_TIMEOUT` (a client that sends half a request is closed), and at most
//! `CONNECTIONS_MAX` connections are served at once (more are closed at once, as the TLS
//! port does with handshakes past its bound).

use std::fmt::Write as _;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use std::sync::Arc;

use crate::ratelog::LogLimiter;
use crate::service::{Core, Service};
use crate::stats::Histogram;
use crate::table::COMMANDS;

/// Largest HTTP request head read from a scraper.
const REQUEST_HEAD_MAX: usize = 8 * 1024;
/// A request's head must arrive, and its answer be written, within this (Prometheus's own
/// scrape timeout is 10 s by default; a scrape of a healthy server takes milliseconds).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Metrics connections served at once.
pub const CONNECTIONS_MAX: usize = 16;
/// Connections closed past `CONNECTIONS_MAX`, logged at most once a minute.
static REFUSALS: LogLimiter = LogLimiter::new(Duration::from_secs(60));

/// Serves metrics until the task is dropped.
pub async fn serve<S: Service>(listener: TcpListener, service: Arc<S>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors or similar: back off instead of spinning.
                tracing::warn!(error = %e, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(n) = REFUSALS.event(std::time::Instant::now()) {
                tracing::warn!(since_last_line = n, "metrics: too many connections: closed");
            }
            continue;
        };
        let service = service.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let answer = async {
                let Some(head) = read_head(&mut stream).await else {
                    return;
                };
                if head.starts_with(b"GET /metrics ") {
                    respond(&mut stream, "200 OK", service.render_metrics()).await;
                } else {
                    respond(&mut stream, "404 Not Found", "try GET /metrics\n".into()).await;
                }
            };
            // Past the limit the connection is dropped, whatever it was doing.
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer).await;
        });
    }
}

/// Reads an HTTP request's head (up to its blank line, at most `REQUEST_HEAD_MAX` bytes);
/// `None` if the client closed first.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_HEAD_MAX {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(head)
}

async fn respond(stream: &mut tokio::net::TcpStream, status: &str, body: String) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

/// The metrics every RESP server has (connections, commands, replies, latency).
pub fn render_core(core: &Core, o: &mut String) {
    let stats = &core.stats;
    crate::figures::render(o, core, crate::figures::all());
    let _ = write!(
        o,
        "# HELP quiver_commands_total Commands executed, by name.\n# TYPE quiver_commands_total counter\n"
    );
    for (i, c) in COMMANDS.iter().enumerate() {
        let (calls, _) = stats.calls(i);
        if calls > 0 {
            let _ = writeln!(o, "quiver_commands_total{{command=\"{}\"}} {calls}", c.name);
        }
    }
    histogram(
        o,
        "quiver_vector_width",
        "Keys per engine vector.",
        &stats.vector_widths(),
        1.0,
    );
    histogram(
        o,
        "quiver_command_latency_seconds",
        "Time from the start of a pipelined run's execution to each command's reply.",
        &stats.latency_us(),
        1e-6,
    );
}

/// A Prometheus histogram from a power-of-two [`Histogram`], bounds multiplied by `scale`.
fn histogram(o: &mut String, name: &str, help: &str, h: &Histogram, scale: f64) {
    let _ = write!(o, "# HELP {name} {help}\n# TYPE {name} histogram\n");
    let mut cumulative = 0;
    for (bound, count) in h.buckets() {
        cumulative += count;
        if bound == u64::MAX {
            let _ = writeln!(o, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        } else {
            let _ = writeln!(
                o,
                "{name}_bucket{{le=\"{}\"}} {cumulative}",
                bound as f64 * scale
            );
        }
    }
    let _ = writeln!(o, "{name}_sum {}", h.sum() as f64 * scale);
    let _ = writeln!(o, "{name}_count {}", h.count());
}
