//! What one thread drives: a cluster client, which routes each multiget itself (one request per
//! node it touches), or one plain connection to a `quiver router`, which receives the whole
//! multiget and splits it per back-end.

use std::ops::Deref;

use quiver_client::{ClientOptions, ClusterClient, ClusterStats, Connection};

use crate::cluster::REQUEST_TIMEOUT;

/// A thread's client.
#[derive(Debug)]
pub enum BenchClient {
    Cluster(ClusterClient),
    /// A connection to a router, and the requests written on it (one per call: the router's
    /// requests to the back-ends are its INFO's, see [`router_counts`]).
    Router {
        conn: Connection,
        requests: u64,
    },
}

impl BenchClient {
    /// One connection to the router at `addr`, its waits bounded by [`REQUEST_TIMEOUT`] and
    /// without reconnection (a broken connection fails the run).
    pub fn router(addr: &str) -> quiver_client::Result<BenchClient> {
        Ok(BenchClient::Router {
            conn: router_connection(addr)?,
            requests: 0,
        })
    }

    /// The values of `keys`, in order (`None`: no such key).
    pub fn multi_get<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
    ) -> quiver_client::Result<Vec<Option<impl Deref<Target = [u8]>>>> {
        match self {
            BenchClient::Cluster(c) => c.multi_get(keys),
            BenchClient::Router { conn, requests } => {
                *requests += 1;
                conn.multi_get(keys)
            }
        }
    }

    pub fn multi_set<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        pairs: &[(K, V)],
    ) -> quiver_client::Result<()> {
        match self {
            BenchClient::Cluster(c) => c.multi_set(pairs),
            BenchClient::Router { conn, requests } => {
                *requests += 1;
                conn.multi_set(pairs)
            }
        }
    }

    /// The cluster client's counters; through a router, the requests written to it (it
    /// follows redirects itself: the other counters stay zero).
    pub fn stats(&self) -> ClusterStats {
        match self {
            BenchClient::Cluster(c) => c.stats(),
            BenchClient::Router { requests, .. } => ClusterStats {
                requests: *requests,
                ..ClusterStats::default()
            },
        }
    }
}

/// A connection to a router: bounded waits, no reconnection.
pub fn router_connection(addr: &str) -> quiver_client::Result<Connection> {
    let mut options = ClientOptions::new(addr.to_string());
    options.reconnect = false;
    options.read_timeout = Some(REQUEST_TIMEOUT);
    options.write_timeout = Some(REQUEST_TIMEOUT);
    Connection::connect_with(options)
}

/// A router's counters of its traffic to the back-ends (`INFO router`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterCounts {
    /// `router_backend_requests`: pipelined batches sent, one per back-end per batch.
    pub backend_requests: u64,
    /// `router_backend_commands`: commands sent (a multiget's share of one back-end is one).
    pub backend_commands: u64,
}

/// The router's counters now, from `INFO router` on `conn`; `None` when its INFO lacks them.
pub fn router_counts(conn: &mut Connection) -> quiver_client::Result<Option<RouterCounts>> {
    let info = conn.info(Some("router"))?;
    Ok(parse_router_counts(&info))
}

/// `router_backend_requests` and `router_backend_commands` of an INFO text.
pub fn parse_router_counts(info: &str) -> Option<RouterCounts> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.parse().ok())
    };
    Some(RouterCounts {
        backend_requests: field("router_backend_requests")?,
        backend_commands: field("router_backend_commands")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_counts_are_read_from_info() {
        let info = "# Router\r\nrouter_epoch:7\r\nrouter_backends:3\r\n\
                    router_backend_requests:120\r\nrouter_backend_commands:345\r\n";
        assert_eq!(
            parse_router_counts(info),
            Some(RouterCounts {
                backend_requests: 120,
                backend_commands: 345
            })
        );
        assert_eq!(parse_router_counts("# Router\r\nrouter_epoch:7\r\n"), None);
        // A field whose name another extends is not mistaken for it.
        let info = "router_backend_requests_x:1\nrouter_backend_requests:2\n\
                    router_backend_commands:3\n";
        assert_eq!(
            parse_router_counts(info).map(|c| c.backend_requests),
            Some(2)
        );
    }
}
