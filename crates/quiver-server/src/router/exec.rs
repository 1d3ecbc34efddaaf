//! Executing a client's pipelined run through the router.
//!
//! Each request is checked as a node checks it (`exec::check`: known, arity, AUTH; queued
//! inside MULTI). Consecutive commands on keys form a *segment*: every part of every command
//! of the segment goes into its node's batch ([`plan`]), each node gets its batch as one
//! write, all nodes at once, and the replies are put back in the caller's order — pipelined
//! GETs over three nodes are three back-end requests, and so is one MGET of keys on three
//! nodes. A node that answers MOVED, ASK or CROSSSLOT (its topology is newer than the
//! router's) gets the part again by the newer table, or at the address it named (bounded by
//! [`REROUTES_MAX`]): the client sees no redirect. That re-sending keeps each key's commands
//! in order because a node that no longer owns a key answers every later command on it with
//! a redirect too (a node's ownership only changes forward); TRYAGAIN (a hand-over stuck for
//! longer than a node waits) is passed on, since a later command may have run after the thaw.
//!
//! Everything else runs on the router: the connection commands (the node's own code), INFO,
//! commands sent to every node (DBSIZE, FLUSHALL, KEYS, SCAN, RANDOMKEY), and transactions:
//! MULTI queues here, EXEC sends MULTI ... EXEC to the one node that owns every queued key,
//! WATCH pins a connection to the node owning the watched keys until EXEC / DISCARD /
//! UNWATCH / RESET.

use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::join_all;
use quiver_client::{Parser, Value};

use super::backend::{BackendConn, Replies};
use super::plan::{self, one_node, Forward, Shape};
use super::table::SlotTable;
use super::Router;
use crate::cmd::common::Limits;
use crate::cmd::ctx::ConnCtx;
use crate::cmd::{client, command, config, connection, info};
use crate::errors::{self, err};
use crate::exec::{self, cluster::keys_of, RunEnd};
use crate::output::Output;
use crate::reply::Reply;
use crate::session::{Multi, Session};
use crate::table::{Cmd, CommandSpec, Flags, COMMANDS};

/// Times one command is routed again after a redirect before the node's error goes to the
/// client.
pub const REROUTES_MAX: u32 = 5;
/// Longest wait for a newer topology once a node has said the router's is old.
const TOPOLOGY_WAIT: Duration = Duration::from_millis(1000);
/// Low bits of a router SCAN cursor that name the node being scanned (at most 1024 nodes,
/// more than `quiver_cluster::topology::NODES_MAX`); the node's own cursor is above them.
const SCAN_NODE_BITS: u32 = 10;

const CROSS_NODE_TXN: &str =
    "CROSSSLOT the keys of a transaction (WATCH, MULTI ... EXEC) must live on one node";
const NOT_FOR_ROUTER: &str = "ERR this command is for cluster nodes, not the router";
const CLUSTER_SUBCOMMANDS: &str = "ERR the router answers CLUSTER KEYSLOT, COUNTKEYSINSLOT and \
     GETKEYSINSLOT; ask a node (or `quiver cluster status`) for the rest";

/// A connection's state that only the router keeps.
#[derive(Default)]
pub struct RouterConn {
    /// After WATCH: the connection to the node that holds the watched keys.
    pinned: Option<BackendConn>,
    /// Inside MULTI: the node the queued commands' keys live on, once one named a key.
    multi_node: Option<Arc<str>>,
}

enum Prepared<'a> {
    /// Answered without running (refused, queued).
    Answered(Reply),
    Forward(Forward<'a>),
    /// Runs on the router.
    Local(&'static CommandSpec, &'a [Bytes]),
}

/// A reply on its way to the client: its bytes (a node's, or the router's own) and, for an
/// array of scalars, each element's bytes.
struct Assembled {
    bytes: Bytes,
    elements: Vec<Range<usize>>,
}

impl Assembled {
    fn of(replies: &Replies, i: usize) -> Assembled {
        let range = replies.replies[i].range.clone();
        let elements = replies.element_ranges(i).map_or_else(Vec::new, |e| {
            e.iter()
                .map(|r| r.start - range.start..r.end - range.start)
                .collect()
        });
        Assembled {
            bytes: replies.buf.slice(range),
            elements,
        }
    }

    fn reply(reply: &Reply, resp3: bool) -> Assembled {
        Assembled {
            bytes: reply.to_bytes(resp3),
            elements: Vec::new(),
        }
    }

    fn error(&self) -> Option<&[u8]> {
        let b = &self.bytes;
        (b.first() == Some(&b'-')).then(|| &b[1..b.len() - 2])
    }

    fn integer(&self) -> Option<i64> {
        let b = &self.bytes;
        (b.first() == Some(&b':')).then(|| quiver_resp::parse_integer(&b[1..b.len() - 2]))?
    }
}

/// What the router learns from a node's error about where a part must go.
enum Redirect {
    /// MOVED: the node at this address owns the keys now.
    Moved(Arc<str>),
    /// ASK: this one request goes to the address, after ASKING.
    Ask(Arc<str>),
    /// CROSSSLOT: the keys are no longer on one node: split them again.
    Replan,
}

fn redirect(error: &[u8]) -> Option<Redirect> {
    let addr = |e: &[u8]| {
        let text = std::str::from_utf8(e).ok()?;
        text.split(' ').nth(2).map(Arc::from)
    };
    if error.starts_with(b"MOVED ") {
        addr(error).map(Redirect::Moved)
    } else if error.starts_with(b"ASK ") {
        addr(error).map(Redirect::Ask)
    } else if error.starts_with(b"CROSSSLOT") {
        Some(Redirect::Replan)
    } else {
        None
    }
}

/// Executes `requests` in order, appending each reply to `out` (see the module
/// documentation).
pub async fn execute_run(
    router: &Router,
    session: &mut Session,
    conn: &mut RouterConn,
    requests: &[Vec<Bytes>],
    out: &mut Output<'_>,
) -> RunEnd {
    let core = &router.core;
    let limit = core.config.client_output_buffer_limit;
    let run_started = Instant::now();
    let mut next: Option<Prepared<'_>> = None;
    let mut i = 0;
    while i < requests.len() && !session.closing {
        let table = router.tables.current();
        let prepared = match next.take() {
            Some(p) => p,
            None => prepare(router, session, conn, &table, &requests[i]),
        };
        let n = match prepared {
            Prepared::Answered(reply) => {
                out.reply(&reply, session.resp3);
                1
            }
            Prepared::Local(spec, args) => {
                let started = Instant::now();
                let answer = run_local(router, session, conn, spec, args).await;
                count(router, session, spec, started, answer.error().is_some());
                out.raw(&answer.bytes, session.resp3);
                1
            }
            Prepared::Forward(first) => {
                // Requests prepared here cannot change the session (only a local command can,
                // and it ends the segment), so preparing ahead is safe.
                let mut segment = vec![first];
                let mut j = i + 1;
                while j < requests.len() {
                    match prepare(router, session, conn, &table, &requests[j]) {
                        Prepared::Forward(f) => {
                            segment.push(f);
                            j += 1;
                        }
                        other => {
                            next = Some(other);
                            break;
                        }
                    }
                }
                let started = Instant::now();
                let replies = execute(router, session.resp3, &segment, table.epoch, 0).await;
                for (f, a) in segment.iter().zip(&replies) {
                    count(router, session, f.spec, started, a.error().is_some());
                    out.raw(&a.bytes, session.resp3);
                }
                j - i
            }
        };
        core.stats
            .latency_us
            .record_n(run_started.elapsed().as_micros() as u64, n as u64);
        i += n;
        if out.len() > limit {
            return RunEnd::OutputLimit;
        }
    }
    RunEnd::Complete
}

/// Counts a command the router answered.
fn count(router: &Router, session: &Session, spec: &CommandSpec, started: Instant, failed: bool) {
    let index = spec.cmd.index();
    session.info.touch(index);
    let stats = &router.core.stats;
    stats.command(index, 1, started.elapsed().as_micros() as u64);
    if failed {
        stats.failed(index, 1);
    }
}

/// The limits the router checks BATCH's arguments against (it stores nothing itself).
fn limits() -> Limits {
    Limits {
        value_len_max: quiver_store::Options::default().value_len_max,
        databases: 1,
    }
}

fn prepare<'a>(
    router: &Router,
    session: &mut Session,
    conn: &mut RouterConn,
    table: &SlotTable,
    args: &'a [Bytes],
) -> Prepared<'a> {
    let spec = match exec::check(&router.core, session, args) {
        Ok(spec) => spec,
        Err(refused) => {
            if refused.discard {
                conn.pinned = None;
                conn.multi_node = None;
            }
            return Prepared::Answered(refused.reply);
        }
    };
    let refusal = match spec.cmd {
        Cmd::RangeImport => Some(NOT_FOR_ROUTER),
        other => exec::cluster::forbidden(other, args),
    };
    if let Some(text) = refusal {
        exec::flag_transaction(session);
        router.core.stats.rejected(spec.cmd.index());
        return Prepared::Answered(err(text));
    }
    if session.multi.is_some() && !spec.flags.contains(Flags::NOT_QUEUED) {
        // Every queued command must live on the transaction's node: refused now, as Redis
        // Cluster refuses a command on another slot.
        let keys = keys_of(spec, args, &limits());
        match one_node(table, keys.iter().map(|k| &k[..])) {
            Ok(None) => {}
            Ok(Some(n)) => {
                let addr = &table.addrs[n];
                match &conn.multi_node {
                    Some(a) if a != addr => {
                        exec::flag_transaction(session);
                        return Prepared::Answered(err(CROSS_NODE_TXN));
                    }
                    _ => conn.multi_node = Some(addr.clone()),
                }
            }
            Err(e) => {
                exec::flag_transaction(session);
                return Prepared::Answered(e);
            }
        }
    }
    if let Some(reply) = exec::queue(session, spec, args) {
        return Prepared::Answered(reply);
    }
    if runs_on_router(spec.cmd) {
        return Prepared::Local(spec, args);
    }
    match plan::plan(spec, args, table, &limits()) {
        Ok(f) => Prepared::Forward(f),
        Err(reply) => {
            router.core.stats.rejected(spec.cmd.index());
            Prepared::Answered(reply)
        }
    }
}

/// Commands the router answers itself, or by asking every node.
fn runs_on_router(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Ping
            | Cmd::Echo
            | Cmd::Hello
            | Cmd::Auth
            | Cmd::Select
            | Cmd::Quit
            | Cmd::Reset
            | Cmd::Client
            | Cmd::Command
            | Cmd::Config
            | Cmd::Info
            | Cmd::Asking
            | Cmd::ReadOnly
            | Cmd::ReadWrite
            | Cmd::Cluster
            | Cmd::Multi
            | Cmd::Exec
            | Cmd::Discard
            | Cmd::Watch
            | Cmd::Unwatch
            | Cmd::DbSize
            | Cmd::FlushAll
            | Cmd::FlushDb
            | Cmd::Keys
            | Cmd::Scan
            | Cmd::RandomKey
    )
}

/// Sends `items` (planned with the table of `epoch`) and assembles their replies, routing
/// redirected parts again (`depth` times so far).
async fn execute(
    router: &Router,
    resp3: bool,
    items: &[Forward<'_>],
    epoch: u64,
    depth: u32,
) -> Vec<Assembled> {
    // One batch per node address: its commands, and where each part's reply is in it.
    struct Batch {
        addr: Arc<str>,
        bytes: BytesMut,
        replies: usize,
        keys: u64,
    }
    let mut batches: Vec<Batch> = Vec::new();
    let mut place: Vec<(usize, usize)> = Vec::new();
    for item in items {
        for part in &item.parts {
            let b = match batches.iter().position(|b| b.addr == part.addr) {
                Some(b) => b,
                None => {
                    batches.push(Batch {
                        addr: part.addr.clone(),
                        bytes: BytesMut::new(),
                        replies: 0,
                        keys: 0,
                    });
                    batches.len() - 1
                }
            };
            let batch = &mut batches[b];
            part.encode(&mut batch.bytes, item.pairs());
            batch.replies += part.replies();
            batch.keys += part.keys.as_ref().map_or(1, |k| k.len() as u64);
            place.push((b, batch.replies - 1));
        }
    }
    let results = join_all(
        batches
            .iter()
            .map(|b| router.send(&b.addr, resp3, &b.bytes, b.replies)),
    )
    .await;
    let stats = &router.stats;
    stats
        .backend_requests
        .fetch_add(batches.len() as u64, Relaxed);
    stats
        .backend_commands
        .fetch_add(place.len() as u64, Relaxed);
    for b in &batches {
        router.core.stats.vector_widths.record(b.keys);
    }

    // Each part's reply; the redirected ones are routed again below.
    let mut parts: Vec<Vec<Assembled>> = Vec::with_capacity(items.len());
    let mut again: Vec<(usize, usize, Redirect)> = Vec::new();
    let mut at = place.iter();
    for (i, item) in items.iter().enumerate() {
        let mut replies = Vec::with_capacity(item.parts.len());
        for p in 0..item.parts.len() {
            let Some(&(b, r)) = at.next() else { break };
            let a = match &results[b] {
                Ok(replies) => Assembled::of(replies, r),
                Err(e) => Assembled::reply(&Reply::error(format!("ERR router: {e}")), resp3),
            };
            if depth < REROUTES_MAX {
                if let Some(to) = a.error().and_then(redirect) {
                    again.push((i, p, to));
                }
            }
            replies.push(a);
        }
        parts.push(replies);
    }
    if !again.is_empty() {
        stats.redirects.fetch_add(again.len() as u64, Relaxed);
        let table = if again.iter().all(|(_, _, r)| matches!(r, Redirect::Ask(_))) {
            router.tables.current()
        } else {
            router.tables.newer_than(epoch, TOPOLOGY_WAIT).await
        };
        let args: Vec<Vec<Bytes>> = again
            .iter()
            .map(|&(i, p, _)| items[i].parts[p].to_args(items[i].pairs()))
            .collect();
        let mut subs = Vec::with_capacity(again.len());
        let mut sent = Vec::with_capacity(again.len());
        for ((i, p, to), args) in again.iter().zip(&args) {
            let spec = items[*i].spec;
            let routed = match to {
                Redirect::Ask(addr) => Ok(Forward::to(spec, args, addr.clone(), true)),
                // The node knows better than the table the router has: follow it.
                Redirect::Moved(addr) if table.epoch <= epoch => {
                    Ok(Forward::to(spec, args, addr.clone(), false))
                }
                _ => plan::plan(spec, args, &table, &limits()),
            };
            match routed {
                Ok(f) => {
                    subs.push(f);
                    sent.push((*i, *p));
                }
                Err(reply) => parts[*i][*p] = Assembled::reply(&reply, resp3),
            }
        }
        let replies = Box::pin(execute(router, resp3, &subs, table.epoch, depth + 1)).await;
        for ((i, p), a) in sent.into_iter().zip(replies) {
            parts[i][p] = a;
        }
    }
    items
        .iter()
        .zip(parts)
        .map(|(item, parts)| assemble(&item.shape, parts, resp3))
        .collect()
}

/// A command's reply from its parts' (see [`Shape`]). An error of any part is the reply.
fn assemble(shape: &Shape, mut parts: Vec<Assembled>, resp3: bool) -> Assembled {
    if let Some(p) = parts.iter().position(|a| a.error().is_some()) {
        return parts.swap_remove(p);
    }
    let unexpected = || {
        Assembled::reply(
            &err("ERR router: a node's reply does not have the expected shape"),
            resp3,
        )
    };
    match shape {
        Shape::Whole => parts.swap_remove(0),
        Shape::Values(order) => {
            let len: usize = parts.iter().map(|a| a.bytes.len()).sum();
            let mut bytes = BytesMut::with_capacity(len + 16);
            quiver_resp::request::put_header(&mut bytes, b'*', order.len());
            let mut elements = Vec::with_capacity(order.len());
            for &(p, e) in order {
                let Some(r) = parts[p as usize].elements.get(e as usize) else {
                    return unexpected();
                };
                let start = bytes.len();
                bytes.put_slice(&parts[p as usize].bytes[r.clone()]);
                elements.push(start..bytes.len());
            }
            Assembled {
                bytes: bytes.freeze(),
                elements,
            }
        }
        Shape::Sum => match parts.iter().map(Assembled::integer).sum::<Option<i64>>() {
            Some(n) => Assembled::reply(&Reply::Integer(n), resp3),
            None => unexpected(),
        },
        Shape::AllOk => Assembled::reply(&Reply::OK, resp3),
    }
}

/// Runs a command the router answers itself.
async fn run_local(
    router: &Router,
    session: &mut Session,
    conn: &mut RouterConn,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Assembled {
    let resp3 = session.resp3;
    let core = &router.core;
    let reply = match spec.cmd {
        Cmd::Info => Reply::Verbatim {
            format: *b"txt",
            text: Bytes::from(info::report(
                core,
                None,
                vec![router.info_section()],
                &info::asked_sections(args),
            )),
        },
        Cmd::Client => client::run(&mut ConnCtx { core, session }, args),
        Cmd::Command => command::run(args),
        Cmd::Config => config::run(core, args),
        Cmd::Asking | Cmd::ReadWrite => Reply::OK,
        Cmd::ReadOnly => {
            session.readonly = true;
            Reply::OK
        }
        Cmd::Cluster => return cluster(router, resp3, args).await,
        Cmd::Multi => {
            if session.multi.is_some() {
                err(errors::MULTI_NESTED)
            } else {
                session.set_multi(Some(Multi::default()));
                conn.multi_node = conn.pinned.as_ref().map(|p| p.addr.clone());
                Reply::OK
            }
        }
        Cmd::Discard => {
            if session.multi.is_none() {
                err(errors::DISCARD_WITHOUT_MULTI)
            } else {
                session.set_multi(None);
                conn.multi_node = None;
                // Closing the pinned connection makes its node forget the watched keys.
                conn.pinned = None;
                Reply::OK
            }
        }
        Cmd::Unwatch => {
            unwatch(router, conn).await;
            Reply::OK
        }
        Cmd::Watch => return watch(router, session, conn, args).await,
        Cmd::Exec => return exec(router, session, conn).await,
        Cmd::DbSize | Cmd::FlushAll | Cmd::FlushDb | Cmd::Keys | Cmd::Scan | Cmd::RandomKey => {
            every_node(router, spec.cmd, args).await
        }
        Cmd::Reset => {
            conn.pinned = None;
            conn.multi_node = None;
            connection::run(&mut ConnCtx { core, session }, spec.cmd, args)
        }
        _ => connection::run(&mut ConnCtx { core, session }, spec.cmd, args),
    };
    // After HELLO: in the protocol it chose.
    Assembled::reply(&reply, session.resp3)
}

/// CLUSTER on the router: KEYSLOT here, COUNTKEYSINSLOT / GETKEYSINSLOT at the slot's node.
async fn cluster(router: &Router, resp3: bool, args: &[Bytes]) -> Assembled {
    let sub = &args[1];
    if sub.eq_ignore_ascii_case(b"keyslot") && args.len() == 3 {
        let slot = quiver_resp::slot::key_slot(&args[2]);
        return Assembled::reply(&Reply::Integer(i64::from(slot)), resp3);
    }
    if !(sub.eq_ignore_ascii_case(b"countkeysinslot") || sub.eq_ignore_ascii_case(b"getkeysinslot"))
        || args.len() < 3
    {
        return Assembled::reply(&err(CLUSTER_SUBCOMMANDS), resp3);
    }
    let table = router.tables.current();
    let slot = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|&s| u32::from(s) < quiver_resp::SLOTS);
    let node = slot.and_then(|s| table.node_of_slot(s));
    let Some(node) = node else {
        // The node gives Redis's own error for a bad slot; an unserved one has none.
        let reply = if slot.is_none() {
            err("ERR Invalid slot")
        } else {
            err(plan::UNSERVED)
        };
        return Assembled::reply(&reply, resp3);
    };
    let spec = &COMMANDS[Cmd::Cluster.index()];
    let f = Forward::to(spec, args, table.addrs[node].clone(), false);
    let mut replies = execute(router, resp3, &[f], table.epoch, 0).await;
    replies.swap_remove(0)
}

/// WATCH: the keys must live on one node; a connection to it is pinned until the transaction
/// ends.
async fn watch(
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
        let addr = match one_node(&table, args[1..].iter().map(|k| &k[..])) {
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
                Err(e) => {
                    return Assembled::reply(&Reply::error(format!("ERR router: {e}")), resp3)
                }
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
                return Assembled::reply(&Reply::error(format!("ERR router: {e}")), resp3);
            }
        };
        let a = Assembled::of(&replies, 0);
        match a.error().and_then(redirect) {
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
async fn unwatch(router: &Router, conn: &mut RouterConn) {
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
async fn exec(router: &Router, session: &mut Session, conn: &mut RouterConn) -> Assembled {
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
    let keys: Vec<Bytes> = queued
        .iter()
        .flat_map(|(s, a)| keys_of(s, a, &limits()))
        .collect();
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
        let node = match one_node(&table, keys.iter().map(|k| &k[..])) {
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
                    return Assembled::reply(&Reply::error(format!("ERR router: {e}")), resp3);
                }
            },
        };
        router.stats.backend_requests.fetch_add(1, Relaxed);
        router.stats.backend_commands.fetch_add(n as u64, Relaxed);
        let replies = match backend.send(&request, n).await {
            Ok(r) => r,
            Err(e) => {
                router.stats.backend_errors.fetch_add(1, Relaxed);
                return Assembled::reply(&Reply::error(format!("ERR router: {e}")), resp3);
            }
        };
        // The node answered EXECABORT when it refused a queued command as not its own.
        let moved = (1..n - 1).any(|i| replies.error(i).and_then(redirect).is_some());
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

/// DBSIZE, FLUSHALL, FLUSHDB, KEYS, SCAN and RANDOMKEY over every node.
async fn every_node(router: &Router, cmd: Cmd, args: &[Bytes]) -> Reply {
    let table = router.tables.current();
    if table.epoch == 0 || table.addrs.is_empty() {
        return err(plan::NO_TOPOLOGY);
    }
    if cmd == Cmd::Scan {
        return scan(router, &table, args).await;
    }
    let values = match ask_all(router, &table.addrs, args).await {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    match cmd {
        Cmd::DbSize => values
            .iter()
            .map(|v| match v {
                Value::Integer(n) => Some(*n),
                _ => None,
            })
            .sum::<Option<i64>>()
            .map_or_else(
                || err("ERR router: DBSIZE of a node is no integer"),
                Reply::Integer,
            ),
        Cmd::Keys => Reply::Array(
            values
                .into_iter()
                .flat_map(|v| match v {
                    Value::Array(keys) => keys,
                    _ => Vec::new(),
                })
                .map(to_reply)
                .collect(),
        ),
        Cmd::RandomKey => {
            // Some node's random key, starting from a different node each time.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let start = nanos as usize % values.len();
            let mut values = values;
            values.rotate_left(start);
            values
                .into_iter()
                .find(|v| !matches!(v, Value::Null))
                .map_or(Reply::Null, to_reply)
        }
        // FLUSHALL, FLUSHDB: every node said OK.
        _ => Reply::OK,
    }
}

/// Sends `args` to every node at `addrs`; their replies, or the first error as the reply.
async fn ask_all(router: &Router, addrs: &[Arc<str>], args: &[Bytes]) -> Result<Vec<Value>, Reply> {
    let mut request = BytesMut::new();
    quiver_resp::request::put_header(&mut request, b'*', args.len());
    for a in args {
        quiver_resp::request::put_bulk(&mut request, a);
    }
    let results = join_all(addrs.iter().map(|a| router.send(a, false, &request, 1))).await;
    router
        .stats
        .backend_requests
        .fetch_add(addrs.len() as u64, Relaxed);
    results
        .into_iter()
        .map(|r| match r {
            Ok(replies) => match parse(replies.bytes(0)) {
                Some(Value::Error(e)) => Err(Reply::error(e)),
                Some(v) => Ok(v),
                None => Err(err("ERR router: a node's reply could not be parsed")),
            },
            Err(e) => Err(Reply::error(format!("ERR router: {e}"))),
        })
        .collect()
}

/// SCAN over the nodes one after the other: the router's cursor is the node's cursor with
/// the node's index in its low [`SCAN_NODE_BITS`] bits. A key present for the whole scan is
/// returned at least once, as long as the nodes stay the same.
async fn scan(router: &Router, table: &SlotTable, args: &[Bytes]) -> Reply {
    let Some(cursor) = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return err("ERR invalid cursor");
    };
    let node = (cursor & ((1 << SCAN_NODE_BITS) - 1)) as usize;
    let Some(addr) = table.addrs.get(node) else {
        return scan_reply(0, Vec::new());
    };
    let mut node_args = args.to_vec();
    node_args[1] = Bytes::from((cursor >> SCAN_NODE_BITS).to_string());
    let value = match ask_all(router, std::slice::from_ref(addr), &node_args).await {
        Ok(mut v) => v.swap_remove(0),
        Err(reply) => return reply,
    };
    let Value::Array(mut page) = value else {
        return err("ERR router: a node's SCAN reply is no array");
    };
    let (Some(Value::Array(keys)), Some(Value::Bulk(next))) = (page.pop(), page.pop()) else {
        return err("ERR router: a node's SCAN reply has no cursor and keys");
    };
    let Some(next) = std::str::from_utf8(&next)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return err("ERR router: a node's SCAN cursor is no number");
    };
    let cursor = if next == 0 {
        if node + 1 < table.addrs.len() {
            (node + 1) as u64
        } else {
            0
        }
    } else if next >> (64 - SCAN_NODE_BITS) != 0 {
        return err("ERR router: a node's SCAN cursor is too large to carry");
    } else {
        next << SCAN_NODE_BITS | node as u64
    };
    scan_reply(cursor, keys.into_iter().map(to_reply).collect())
}

fn scan_reply(cursor: u64, keys: Vec<Reply>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(cursor.to_string())),
        Reply::Array(keys),
    ])
}

/// One complete reply's bytes as a value.
fn parse(bytes: &[u8]) -> Option<Value> {
    let mut buf = BytesMut::from(bytes);
    Parser::new().parse(&mut buf).ok().flatten()
}

/// A node's reply as the router's (for what KEYS, SCAN and RANDOMKEY return: strings).
fn to_reply(v: Value) -> Reply {
    match v {
        Value::Bulk(b) => Reply::Bulk(b),
        Value::Simple(s) => Reply::simple(s),
        Value::Error(e) => Reply::error(e),
        Value::Integer(n) => Reply::Integer(n),
        Value::Null => Reply::Null,
        Value::Array(a) => Reply::Array(a.into_iter().map(to_reply).collect()),
        other => Reply::error(format!(
            "ERR router: unexpected {} from a node",
            other.kind()
        )),
    }
}
