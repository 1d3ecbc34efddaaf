//! Transactions through the router: MULTI queues on the router (`exec::prepare` checks each
//! queued command's node), EXEC sends MULTI ... EXEC to the one node owning every queued key,
//! WATCH pins a connection to the watched keys' node until the transaction ends.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::plan::{self, one_node, REROUTES_MAX, TOPOLOGY_WAIT};
use super::reply::{reroute, Assembled};
use super::Router;
use quiver_peer::PeerConn;
use quiver_service::admission::keys_of;
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;
use quiver_service::session::Session;
use quiver_service::table::{CommandSpec, Flags, COMMANDS};

pub const CROSS_NODE_TXN: &str =
    "CROSSSLOT the keys of a transaction (WATCH, MULTI ... EXEC) must live on one node";
/// A connection's state that only the router keeps.
#[derive(Default)]
pub struct RouterConn {
    /// After WATCH: the connection to the node that holds the watched keys.
    pub pinned: Option<PeerConn>,
    /// Inside MULTI: the node the queued commands' keys live on, once one named a key.
    pub multi_node: Option<Arc<str>>,
}

/// WATCH: the keys must live on one node; a connection to it is pinned until the transaction
/// ends.
pub async fn watch(
    router: &Router,
    session: &mut Session,
    conn: &mut RouterConn,
    args: &[Bytes],
) -> Assembled {
    let resp3 = session.resp3;
    if session.multi.is_some() {
        return Assembled::reply(&err(errors::WATCH_INSIDE_MULTI), resp3);
    }
    let mut epoch = 0;
    for _ in 0..=REROUTES_MAX {
        let table = router.tables.newer_than(epoch, Duration::ZERO).await;
        epoch = table.epoch;
        let addr = match one_node(&table, args[1..].iter().map(|k| &k[..]), false) {
            Ok(Some(n)) => table.addrs[n].clone(),
            Ok(None) => return Assembled::reply(&err(plan::NO_TOPOLOGY), resp3),
            Err(e) => return Assembled::reply(&e, resp3),
        };
        let had_pin = conn.pinned.is_some();
        let mut pinned = match conn.pinned.take() {
            Some(p) if p.addr != addr => {
                conn.pinned = Some(p);
                return Assembled::reply(&err(CROSS_NODE_TXN), resp3);
            }
            Some(p) => p,
            None => match router.pool.get(&addr, resp3).await {
                Ok(c) => c,
                Err(e) => return Assembled::reply(&router.failed(&e), resp3),
            },
        };
        let mut request = BytesMut::new();
        quiver_resp::request::put_header(&mut request, b'*', args.len());
        for a in args {
            quiver_resp::request::put_bulk(&mut request, a);
        }
        let replies = match pinned.send(&request, 1).await {
            Ok(r) => r,
            Err(e) => {
                router.stats.backend_errors.fetch_add(1, Relaxed);
                return Assembled::reply(&router.failed(&e), resp3);
            }
        };
        let a = Assembled::of(&replies, 0);
        match a.error().and_then(reroute) {
            // The keys moved: a new pin follows them; keys watched before stay where they are.
            Some(_) if !had_pin => {
                router.stats.redirects.fetch_add(1, Relaxed);
                router.pool.put(pinned);
                router.tables.newer_than(epoch, TOPOLOGY_WAIT).await;
            }
            Some(_) => {
                conn.pinned = Some(pinned);
                return Assembled::reply(&err(CROSS_NODE_TXN), resp3);
            }
            None => {
                conn.pinned = Some(pinned);
                return a;
            }
        }
    }
    Assembled::reply(&err(CROSS_NODE_TXN), resp3)
}

/// UNWATCH: the pinned connection forgets its keys and goes back to the pool.
pub async fn unwatch(router: &Router, conn: &mut RouterConn) {
    if let Some(mut pinned) = conn.pinned.take() {
        let mut request = BytesMut::new();
        quiver_resp::request::encode_command(&mut request, &[b"UNWATCH"]);
        if pinned.send(&request, 1).await.is_ok() {
            router.pool.put(pinned);
        }
    }
}

/// EXEC: MULTI, the queued commands and EXEC to the node that owns all their keys, in one
/// write; EXEC's reply is the client's.
pub async fn exec(router: &Router, session: &mut Session, conn: &mut RouterConn) -> Assembled {
    let resp3 = session.resp3;
    let Some(multi) = session.multi.take() else {
        return Assembled::reply(&err(errors::EXEC_WITHOUT_MULTI), resp3);
    };
    session.set_multi(None);
    conn.multi_node = None;
    let pinned = conn.pinned.take();
    if multi.aborted {
        return Assembled::reply(&err(errors::EXEC_ABORTED), resp3);
    }
    let watched = pinned.is_some();
    let mut pinned = pinned;
    let queued: Vec<(&'static CommandSpec, &[Bytes])> = multi
        .queued
        .iter()
        .map(|(i, a)| (&COMMANDS[*i], &a[..]))
        .collect();
    let keys: Vec<Bytes> = queued.iter().flat_map(|(s, a)| keys_of(s, a)).collect();
    let writes = queued.iter().any(|(s, _)| s.flags.contains(Flags::WRITE));
    let mut request = BytesMut::new();
    quiver_resp::request::encode_command(&mut request, &[b"MULTI"]);
    for (_, args) in &queued {
        quiver_resp::request::put_header(&mut request, b'*', args.len());
        for a in args.iter() {
            quiver_resp::request::put_bulk(&mut request, a);
        }
    }
    quiver_resp::request::encode_command(&mut request, &[b"EXEC"]);
    let n = queued.len() + 2;
    let mut epoch = 0;
    for _ in 0..=REROUTES_MAX {
        let table = router.tables.newer_than(epoch, Duration::ZERO).await;
        epoch = table.epoch;
        let node = match one_node(&table, keys.iter().map(|k| &k[..]), writes) {
            Ok(node) => node,
            Err(e) => return Assembled::reply(&e, resp3),
        };
        let addr = match (node, &pinned) {
            (Some(n), _) => table.addrs[n].clone(),
            (None, Some(p)) => p.addr.clone(),
            (None, None) => match table.addrs.first() {
                Some(a) => a.clone(),
                None => return Assembled::reply(&err(plan::NO_TOPOLOGY), resp3),
            },
        };
        let mut backend = match pinned.take() {
            Some(p) if p.addr != addr => return Assembled::reply(&err(CROSS_NODE_TXN), resp3),
            Some(p) => p,
            None => match router.pool.get(&addr, resp3).await {
                Ok(c) => c,
                Err(e) => {
                    router.stats.backend_errors.fetch_add(1, Relaxed);
                    return Assembled::reply(&router.failed(&e), resp3);
                }
            },
        };
        router.stats.backend_requests.fetch_add(1, Relaxed);
        router.stats.backend_commands.fetch_add(n as u64, Relaxed);
        let replies = match backend.send(&request, n).await {
            Ok(r) => r,
            Err(e) => {
                router.stats.backend_errors.fetch_add(1, Relaxed);
                return Assembled::reply(&router.failed(&e), resp3);
            }
        };
        // The node answered EXECABORT when it refused a queued command as not its own.
        let moved = (1..n - 1).any(|i| replies.error(i).and_then(reroute).is_some());
        router.pool.put(backend);
        if !moved {
            return Assembled::of(&replies, n - 1);
        }
        router.stats.redirects.fetch_add(1, Relaxed);
        if watched {
            // The watched keys' node no longer owns them: the transaction fails as if they
            // had been written (a nil reply), and the client retries it.
            return Assembled::reply(&Reply::NullArray, resp3);
        }
        router.tables.newer_than(epoch, TOPOLOGY_WAIT).await;
    }
    Assembled::reply(&err(CROSS_NODE_TXN), resp3)
}
