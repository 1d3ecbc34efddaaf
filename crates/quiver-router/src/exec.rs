//! Executing a client's pipelined run through the router.
//!
//! Each request is checked as a node checks it (`admission::check`: known, arity, AUTH; queued
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

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::join_all;

use super::plan::{self, one_node, Forward, Shape, REROUTES_MAX, TOPOLOGY_WAIT};
use super::reply::{reroute, Assembled, Reroute};
use super::table::SlotTable;
use super::txn::{RouterConn, CROSS_NODE_TXN};
use super::Router;
use super::{broadcast, txn};
use quiver_service::admission;
use quiver_service::admission::{forbidden_in_cluster, keys_of};
use quiver_service::cmd::ConnCtx;
use quiver_service::cmd::{client, command, config, connection, info, server};
use quiver_service::errors::{self, err};
use quiver_service::output::Output;
use quiver_service::reply::Reply;
use quiver_service::service::RunEnd;
use quiver_service::session::{Multi, Session};
use quiver_service::table::{Cmd, CommandSpec, Flags, COMMANDS};

enum Prepared<'a> {
    /// Answered without running (refused, queued).
    Answered(Reply),
    Forward(Forward<'a>),
    /// Runs on the router.
    Local(&'static CommandSpec, &'a [Bytes]),
}

/// Pub/Sub on the router.
const PUBSUB_AT_NODES: &str = "ERR Pub/Sub is not available through the router: connect to a node";
/// CLIENT TRACKING on the router.
const TRACKING_AT_NODES: &str = "ERR CLIENT TRACKING is not available through the router: \
     connect to the nodes (their writes send the invalidations)";
const NOT_FOR_ROUTER: &str = "ERR this command is for cluster nodes, not the router";
const NOT_FOR_NODELESS: &str = "ERR the router stores nothing: send SAVE, BGSAVE, LASTSAVE, \
     SHUTDOWN, MEMORY and DEBUG to each node";
const CLUSTER_SUBCOMMANDS: &str = "ERR the router answers CLUSTER KEYSLOT, COUNTKEYSINSLOT and \
     GETKEYSINSLOT; ask a node (or `quiver cluster status`) for the rest";

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
    let limit = core.live.client_output_buffer_limit();
    let run_started = Instant::now();
    let mut next: Option<Prepared<'_>> = None;
    let mut i = 0;
    while i < requests.len() && !session.closing {
        // CLIENT PAUSE: as on a node, the request waits its turn, and nothing is grouped
        // ahead of its wait.
        let paused = core.pause.is_active();
        if paused {
            let renames = &core.config.rename_command;
            core.pause.wait(renames, session, &requests[i]).await;
        }
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
                let usec = started.elapsed().as_micros() as u64;
                count(
                    router,
                    session,
                    (spec, args),
                    usec,
                    answer.error().is_some(),
                );
                if let Some(mode) = session.reply_change.take() {
                    out.switch(mode);
                }
                out.raw(&answer.bytes, session.resp3);
                1
            }
            Prepared::Forward(first) => {
                // Requests prepared here cannot change the session (only a local command can,
                // and it ends the segment), so preparing ahead is safe.
                let mut segment = vec![first];
                let mut j = i + 1;
                while j < requests.len() && !paused {
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
                // The segment's time is shared out by its commands, as a node shares a vector's.
                let usec = started.elapsed().as_micros() as u64 / segment.len() as u64;
                for ((f, a), args) in segment.iter().zip(&replies).zip(&requests[i..j]) {
                    count(router, session, (f.spec, args), usec, a.error().is_some());
                    out.raw(&a.bytes, session.resp3);
                }
                j - i
            }
        };
        core.stats
            .latency(run_started.elapsed().as_micros() as u64, n as u64);
        i += n;
        if out.len() > limit {
            return RunEnd::OutputLimit;
        }
    }
    RunEnd::Complete
}

/// Counts a command (its spec and arguments) the router answered in `usec`, and offers it to
/// the slow log (EXEC aside, as Redis).
fn count(
    router: &Router,
    session: &Session,
    (spec, args): (&CommandSpec, &[Bytes]),
    usec: u64,
    failed: bool,
) {
    let index = spec.cmd.index();
    session.info.touch(index);
    let stats = &router.core.stats;
    stats.command(index, 1, usec);
    if failed {
        stats.failed(index, 1);
    }
    router.core.step_took(usec);
    if !spec.flags.contains(Flags::SKIP_SLOWLOG) {
        router
            .core
            .command_done(args, usec, session.db, &session.info);
    }
}

fn prepare<'a>(
    router: &Router,
    session: &mut Session,
    conn: &mut RouterConn,
    table: &SlotTable,
    args: &'a [Bytes],
) -> Prepared<'a> {
    let spec = match admission::check(&router.core, session, args) {
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
        Cmd::RangeImport | Cmd::Chain => Some(NOT_FOR_ROUTER),
        // A router stores nothing: saves are each node's (and a router stops on SIGTERM).
        Cmd::Save | Cmd::BgSave | Cmd::LastSave | Cmd::Shutdown | Cmd::Memory | Cmd::Debug => {
            Some(NOT_FOR_NODELESS)
        }
        other => forbidden_in_cluster(other, args),
    };
    if let Some(text) = refusal {
        admission::flag_transaction(session);
        router.core.stats.rejected(spec.cmd.index());
        return Prepared::Answered(err(text));
    }
    if session.multi.is_some() && !spec.flags.contains(Flags::NOT_QUEUED) {
        // A transaction runs on one node: what the router answers from every node would
        // answer for one only (a FLUSHALL that flushes a third of the keys).
        if broadcast::spans_every_node(spec.cmd) {
            admission::flag_transaction(session);
            return Prepared::Answered(Reply::error(format!(
                "ERR {} inside MULTI is not supported by the router: it spans every node",
                spec.name.to_ascii_uppercase()
            )));
        }
        // Every queued command must live on the transaction's node: refused now, as Redis
        // Cluster refuses a command on another slot.
        let keys = keys_of(spec, args);
        let write = spec.flags.contains(Flags::WRITE);
        match one_node(table, keys.iter().map(|k| &k[..]), write) {
            Ok(None) => {}
            Ok(Some(n)) => {
                let addr = &table.addrs[n];
                match &conn.multi_node {
                    Some(a) if a != addr => {
                        admission::flag_transaction(session);
                        return Prepared::Answered(err(CROSS_NODE_TXN));
                    }
                    _ => conn.multi_node = Some(addr.clone()),
                }
            }
            Err(e) => {
                admission::flag_transaction(session);
                return Prepared::Answered(e);
            }
        }
    }
    if let Some(reply) = admission::queue(session, spec, args) {
        return Prepared::Answered(reply);
    }
    if runs_on_router(spec.cmd) {
        return Prepared::Local(spec, args);
    }
    match plan::plan(spec, args, table) {
        Ok(f) => {
            if spec.cmd == Cmd::MGet {
                router
                    .stats
                    .mget_keys
                    .fetch_add(args.len() as u64 - 1, Relaxed);
                router
                    .stats
                    .mget_parts
                    .fetch_add(f.parts.len() as u64, Relaxed);
            }
            Prepared::Forward(f)
        }
        Err(reply) => {
            router.core.stats.rejected(spec.cmd.index());
            Prepared::Answered(reply)
        }
    }
}

/// Commands the router answers itself (a node's server commands, EXEC, CLUSTER), or by asking
/// every node.
fn runs_on_router(cmd: Cmd) -> bool {
    quiver_service::table::is_server_command(cmd)
        || matches!(cmd, Cmd::Exec | Cmd::Cluster)
        || broadcast::spans_every_node(cmd)
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
        router.core.stats.vector_width(b.keys);
    }

    // Each part's reply; the redirected ones are routed again below.
    let mut parts: Vec<Vec<Assembled>> = Vec::with_capacity(items.len());
    let mut again: Vec<(usize, usize, Reroute)> = Vec::new();
    let mut at = place.iter();
    for (i, item) in items.iter().enumerate() {
        let mut replies = Vec::with_capacity(item.parts.len());
        for p in 0..item.parts.len() {
            let Some(&(b, r)) = at.next() else { break };
            let a = match &results[b] {
                Ok(replies) => Assembled::of(replies, r),
                Err(e) => Assembled::reply(&router.failed(e), resp3),
            };
            if depth < REROUTES_MAX {
                if let Some(to) = a.error().and_then(reroute) {
                    again.push((i, p, to));
                }
            }
            replies.push(a);
        }
        parts.push(replies);
    }
    if !again.is_empty() {
        stats.redirects.fetch_add(again.len() as u64, Relaxed);
        let table = if again.iter().all(|(_, _, r)| matches!(r, Reroute::Ask(_))) {
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
                Reroute::Ask(addr) => Ok(Forward::to(spec, args, addr.clone(), true)),
                // The node knows better than the table the router has: follow it.
                Reroute::Moved(addr) if table.epoch <= epoch => {
                    Ok(Forward::to(spec, args, addr.clone(), false))
                }
                _ => plan::plan(spec, args, &table),
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
        Cmd::Info => info::run(router, args),
        // A node's PUBLISH reaches that node's subscribers: Pub/Sub is the nodes'.
        Cmd::Subscribe
        | Cmd::Unsubscribe
        | Cmd::PSubscribe
        | Cmd::PUnsubscribe
        | Cmd::Publish
        | Cmd::PubSub => err(PUBSUB_AT_NODES),
        // Invalidations come from the nodes' writes, which the router does not see.
        Cmd::Client if args.len() > 2 && args[1].eq_ignore_ascii_case(b"tracking") => {
            err(TRACKING_AT_NODES)
        }
        Cmd::Client => {
            let reply = client::run(&mut ConnCtx { core, session }, args);
            core.clients.wait_gone(&mut session.killed).await;
            reply
        }
        Cmd::Command => command::run(&core.config.rename_command, args),
        Cmd::Config => config::run(core, None, args),
        Cmd::SlowLog => server::slowlog(core, args),
        Cmd::Latency => server::latency(core, args),
        Cmd::Time => server::time(),
        Cmd::Acl => quiver_service::cmd::acl::run(&mut ConnCtx { core, session }, args),
        Cmd::Asking | Cmd::ReadWrite => Reply::OK,
        Cmd::ReadOnly => {
            session.readonly = true;
            Reply::OK
        }
        Cmd::Cluster => return cluster(router, resp3, args).await,
        // Every write the router acknowledged is on each member of its chain.
        Cmd::Wait => quiver_service::cmd::replication::wait(args, || {
            router.tables.current().copies_min().saturating_sub(1) as i64
        }),
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
            txn::unwatch(router, conn).await;
            Reply::OK
        }
        Cmd::Watch => return txn::watch(router, session, conn, args).await,
        Cmd::Exec => return txn::exec(router, session, conn).await,
        cmd if broadcast::spans_every_node(cmd) => broadcast::every_node(router, cmd, args).await,
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
