//! Multi-key calls (`MGET`, `MSET`, `DEL`, `EXISTS`) over the cluster: the keys grouped by
//! node, one request per node written to every node before any reply is read (so the nodes
//! work at the same time even on blocking sockets), the replies put back in the caller's
//! order.
//!
//! Quiver accepts a multi-key command whenever the node owns every key, whatever their slots;
//! Redis Cluster refuses keys of different slots with `CROSSSLOT`. A node that answers
//! `CROSSSLOT` is remembered (`Node::per_slot`) and gets one request per slot from then on,
//! still pipelined: full width against Quiver, correct against Redis.
//!
//! With [`ClusterOptions::read_from_replicas`](crate::cluster::ClusterOptions) a multiget's
//! key may be read from its slot's master or any of its replicas. Which node serves each key
//! is a minimum set cover — the fewest nodes holding every key, so each is sent the widest
//! vector — that `quiver_plan::Planner` solves; the keys' order of preference is the master
//! first, then the replicas as `CLUSTER SLOTS` lists them. A node that refused a request or
//! could not be reached is not asked for a replica read again in the call (it may have left
//! the chain before the tables say so), so a refusing replica cannot spend the call's rounds;
//! masters are always candidates.
//!
//! A request refused as a whole (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `CROSSSLOT`, an
//! unreachable node) puts its keys back for the next round, grouped again after the table is
//! refreshed; at most [`REDIRECTS_MAX`] rounds. Across nodes a call is not atomic: when it
//! fails, the nodes that answered may have applied their share.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use quiver_resp::key_slot;

use crate::cluster::options::{NODE_FAILURES_MAX, REDIRECTS_MAX};
use crate::cluster::router::{exhausted, is_unreachable, sent_back, Router};
use crate::conn::{count, expect_ok, optional_bulk, unexpected};
use crate::error::{Error, Result};
use crate::resp::{encode_command, Value};
use quiver_resp::redirect::Redirect;

/// The command of a multi-key call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MultiKind {
    /// `MGET key...`: values in key order.
    Get,
    /// `MSET key value ...`: `+OK`.
    Set,
    /// `DEL key...`: how many existed.
    Delete,
    /// `EXISTS key...`: how many exist (a key named twice counts twice).
    Exists,
}

impl MultiKind {
    fn name(self) -> &'static [u8] {
        match self {
            MultiKind::Get => b"MGET",
            MultiKind::Set => b"MSET",
            MultiKind::Delete => b"DEL",
            MultiKind::Exists => b"EXISTS",
        }
    }
}

/// What a multi-key call returns: values by key position (`MGET`) and the sum of the counts
/// (`DEL`, `EXISTS`).
#[derive(Debug, Default)]
pub(crate) struct MultiOutput {
    pub(crate) values: Vec<Option<Bytes>>,
    pub(crate) count: u64,
}

/// A key still to be sent.
#[derive(Clone, Debug)]
struct Pending {
    /// Its position in the caller's keys.
    pos: usize,
    /// The node an `ASK` redirect named for it (by address: the node list may be rebuilt
    /// before the next round); its request goes there after `ASKING`.
    ask: Option<String>,
}

/// One command of a round: the positions of its keys, and whether `ASKING` precedes it.
struct Request {
    positions: Vec<usize>,
    asking: bool,
}

/// A node's share of a round.
struct NodePlan {
    node: usize,
    requests: Vec<Request>,
}

/// The call's state across rounds.
struct Call<'a> {
    kind: MultiKind,
    /// The planner's turn for this call's rounds.
    turn: usize,
    keys: &'a [&'a [u8]],
    /// For `Set`: the value of each key.
    values: &'a [&'a [u8]],
    slots: Vec<u16>,
    out: MultiOutput,
}

/// Runs a multi-key call of `kind` over `keys` (and, for `Set`, `values`, one per key).
pub(crate) fn run(
    router: &mut Router,
    kind: MultiKind,
    keys: &[&[u8]],
    values: &[&[u8]],
) -> Result<MultiOutput> {
    router.turn = router.turn.wrapping_add(1);
    let mut call = Call {
        kind,
        turn: router.turn,
        keys,
        values,
        slots: keys.iter().map(|k| key_slot(k)).collect(),
        out: MultiOutput {
            values: if kind == MultiKind::Get {
                vec![None; keys.len()]
            } else {
                Vec::new()
            },
            count: 0,
        },
    };
    let mut pending: Vec<Pending> = (0..keys.len())
        .map(|pos| Pending { pos, ask: None })
        .collect();
    if kind == MultiKind::Get {
        router.stats.multiget_keys += keys.len() as u64;
    }
    let mut node_failures = 0;
    let mut moved_from = Vec::new();
    // Nodes not to read from as replicas for the rest of the call, by address.
    let mut no_replica_reads: Vec<String> = Vec::new();
    let mut last = String::new();
    for _ in 0..REDIRECTS_MAX {
        if pending.is_empty() {
            return Ok(call.out);
        }
        router.refresh_if_stale();
        let plans = group(router, &call, &pending, &no_replica_reads)?;
        let round = send_and_receive(router, &mut call, plans);
        if let Some(error) = round.error {
            return Err(error);
        }
        if let Some(addr) = round.unreachable.first() {
            node_failures += round.unreachable.len();
            if node_failures > NODE_FAILURES_MAX {
                return Err(round.unreachable_error.unwrap_or(Error::NotConnected));
            }
            last = format!("{addr} unreachable");
        }
        if let Some(text) = round.last_redirect {
            last = text;
        }
        no_replica_reads.extend(round.unreachable.iter().cloned());
        no_replica_reads.extend(round.refused_by.iter().cloned());
        // Between rounds no node index is held: refreshes may renumber the nodes.
        for addr in &round.unreachable {
            router.node_failed(addr);
        }
        for (slot, _, addr) in &round.moved {
            router.moved(*slot, addr);
        }
        // A node answering one request per slot may redirect several in a round: once.
        let mut redirected_by: Vec<String> = round.moved.into_iter().map(|(_, f, _)| f).collect();
        redirected_by.sort();
        redirected_by.dedup();
        if sent_back(&mut moved_from, redirected_by) || round.pause {
            router.pause();
        }
        pending = round.retry;
        pending.sort_by_key(|p| p.pos);
    }
    if pending.is_empty() {
        return Ok(call.out);
    }
    Err(exhausted(last))
}

/// The round's requests, node by node: keys with an `ASK` target go there, one request per
/// slot after `ASKING`; the others to their slot's node (see [`targets`]), one request per
/// node (or per slot, for a node that answered `CROSSSLOT`), keys in the caller's order.
fn group(
    router: &mut Router,
    call: &Call<'_>,
    pending: &[Pending],
    no_replica_reads: &[String],
) -> Result<Vec<NodePlan>> {
    if pending
        .iter()
        .any(|p| p.ask.is_none() && router.table.owner(call.slots[p.pos]).is_none())
    {
        // A slot without a node: one refresh (before any index is taken), then it is an error.
        router.refresh(None, None)?;
    }
    let targets = targets(router, call, pending, no_replica_reads)?;
    let mut plans: Vec<NodePlan> = Vec::new();
    // (node, the slot of a one-slot request or `None` for a whole node's, asking) → (plan,
    // request): asked and unasked keys of one node never share a request.
    let mut requests: HashMap<(usize, Option<u16>, bool), (usize, usize)> = HashMap::new();
    let mut plan_of_node: HashMap<usize, usize> = HashMap::new();
    for (p, node) in pending.iter().zip(targets) {
        let slot = call.slots[p.pos];
        let asking = p.ask.is_some();
        let per_slot = asking || router.nodes[node].per_slot;
        let key = (node, per_slot.then_some(slot), asking);
        let (plan, request) = *requests.entry(key).or_insert_with(|| {
            let plan = *plan_of_node.entry(node).or_insert_with(|| {
                plans.push(NodePlan {
                    node,
                    requests: Vec::new(),
                });
                plans.len() - 1
            });
            plans[plan].requests.push(Request {
                positions: Vec::new(),
                asking,
            });
            (plan, plans[plan].requests.len() - 1)
        });
        plans[plan].requests[request].positions.push(p.pos);
    }
    Ok(plans)
}

/// Per pending key, the node its request goes to: its `ASK` target, or its slot's master —
/// or, for a multiget reading from replicas, the master or a replica (not one of
/// `no_replica_reads`), chosen so that the fewest nodes are contacted. Indices into the node
/// list as it stands (no refresh).
fn targets(
    router: &mut Router,
    call: &Call<'_>,
    pending: &[Pending],
    no_replica_reads: &[String],
) -> Result<Vec<usize>> {
    let first = |router: &mut Router, p: &Pending| match &p.ask {
        Some(addr) => Ok(router.node_index(addr)),
        None => router.owner(call.slots[p.pos]),
    };
    if !(call.kind == MultiKind::Get && router.options.read_from_replicas) {
        return pending.iter().map(|p| first(router, p)).collect();
    }
    // Per key its candidates, the preferred first: the master (or the ASK target, alone),
    // then the replicas. Keys of a slot range share their list, so the planner is given
    // each distinct list once — the same cover as the keys', exact up to 64 distinct lists
    // however many keys there are — and `list_of` says which list is a key's.
    let mut lists: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut list_of = Vec::with_capacity(pending.len());
    for p in pending {
        let mut list = vec![first(router, p)?];
        if p.ask.is_none() {
            let replicas = router.table.replicas(call.slots[p.pos]);
            let readable = |&&n: &&usize| !no_replica_reads.contains(&router.nodes[n].addr);
            list.extend(replicas.iter().filter(readable));
        }
        let i = *index.entry(list).or_insert_with_key(|list| {
            lists.push(list.clone());
            lists.len() - 1
        });
        list_of.push(i);
    }
    // Every list holds a node (the master or the ASK target): the planner refuses only an
    // empty one, so this error is not expected.
    let plan = router
        .planner
        .plan_turned(&lists, call.turn)
        .map_err(|e| Error::ClusterDown(format!("no node to read a multiget's key from: {e}")))?;
    Ok(list_of.into_iter().map(|i| plan.assignment[i]).collect())
}

/// What a round left to do.
#[derive(Default)]
struct Round {
    /// Keys to send again next round.
    retry: Vec<Pending>,
    /// `MOVED` redirects to apply (slot, the redirecting node's address, the address it
    /// names) before the next round.
    moved: Vec<(u16, String, String)>,
    /// Nodes that could not be reached (nothing sent to them).
    unreachable: Vec<String>,
    /// Nodes that refused a request with `MOVED`, `TRYAGAIN` or `CLUSTERDOWN`.
    refused_by: Vec<String>,
    unreachable_error: Option<Error>,
    /// A `TRYAGAIN` or `CLUSTERDOWN` was answered: pause before the next round.
    pause: bool,
    /// The text of the last redirect or retry reply.
    last_redirect: Option<String>,
    /// The call failed (an error reply, or a connection failure after sending): returned once
    /// every node's replies have been read.
    error: Option<Error>,
}

/// Writes every node's requests, then reads every node's replies and handles them.
fn send_and_receive(router: &mut Router, call: &mut Call<'_>, plans: Vec<NodePlan>) -> Round {
    let mut round = Round::default();
    let mut sent = Vec::with_capacity(plans.len());
    let mut buf = BytesMut::new();
    let mut args: Vec<&[u8]> = Vec::new();
    for plan in plans {
        buf.clear();
        let mut replies = 0;
        for request in &plan.requests {
            if request.asking {
                encode_command(&mut buf, &[b"ASKING"]);
                replies += 1;
            }
            args.clear();
            args.push(call.kind.name());
            for &pos in &request.positions {
                args.push(call.keys[pos]);
                if call.kind == MultiKind::Set {
                    args.push(call.values[pos]);
                }
            }
            encode_command(&mut buf, &args);
            replies += 1;
        }
        match router.send(plan.node, &buf) {
            Ok(()) => {
                router.stats.requests += plan.requests.len() as u64;
                if call.kind == MultiKind::Get {
                    router.stats.multiget_requests += plan.requests.len() as u64;
                }
                sent.push((plan, replies));
            }
            Err(failure) if is_unreachable(&failure) => {
                round.unreachable.push(router.nodes[plan.node].addr.clone());
                round.unreachable_error.get_or_insert(failure.error);
                let keys = plan.requests.into_iter().flat_map(|r| r.positions);
                round
                    .retry
                    .extend(keys.map(|pos| Pending { pos, ask: None }));
            }
            Err(failure) => {
                round.error.get_or_insert(failure.error);
            }
        }
    }
    for (plan, replies) in sent {
        match router.receive(plan.node, replies) {
            Ok(replies) => handle_replies(router, call, &plan, replies, &mut round),
            Err(error) => {
                round.error.get_or_insert(error);
            }
        }
    }
    round
}

/// A node's replies, one per request (after its `ASKING` reply, which is skipped).
fn handle_replies(
    router: &mut Router,
    call: &mut Call<'_>,
    plan: &NodePlan,
    replies: Vec<Value>,
    round: &mut Round,
) {
    let mut replies = replies.into_iter();
    for request in &plan.requests {
        if request.asking {
            replies.next();
        }
        let Some(reply) = replies.next() else {
            let e = Error::Protocol("fewer replies than requests".into());
            round.error.get_or_insert(e);
            return;
        };
        let Value::Error(text) = reply else {
            if let Err(e) = absorb(call, &request.positions, reply) {
                round.error.get_or_insert(e);
            }
            continue;
        };
        let retry = |ask: Option<String>| {
            request.positions.iter().map(move |&pos| Pending {
                pos,
                ask: ask.clone(),
            })
        };
        match Redirect::parse(&text) {
            Some(Redirect::Moved { slot, host, port }) => {
                let addr = router.redirect_addr(plan.node, &host, port);
                let from = router.nodes[plan.node].addr.clone();
                round.refused_by.push(from.clone());
                round.moved.push((slot, from, addr));
                round.retry.extend(retry(None));
            }
            Some(Redirect::Ask { slot, host, port }) => {
                router.stats.asked += 1;
                let addr = router.redirect_addr(plan.node, &host, port);
                // The node refused the whole request for this one slot: the slot's keys go
                // to the target once, the others come back here.
                for &pos in &request.positions {
                    let ask = (call.slots[pos] == slot).then(|| addr.clone());
                    round.retry.push(Pending { pos, ask });
                }
            }
            Some(Redirect::TryAgain | Redirect::ClusterDown) => {
                router.stats.retries += 1;
                round.refused_by.push(router.nodes[plan.node].addr.clone());
                round.pause = true;
                round.retry.extend(retry(None));
            }
            Some(Redirect::CrossSlot) if !request.asking && !router.nodes[plan.node].per_slot => {
                router.stats.cross_slot += 1;
                router.nodes[plan.node].per_slot = true;
                round.retry.extend(retry(None));
            }
            Some(Redirect::CrossSlot) | None => {
                round.error.get_or_insert(Error::from_reply(text));
                continue;
            }
        }
        round.last_redirect = Some(text);
    }
}

/// A successful reply to a request holding the keys at `positions`.
fn absorb(call: &mut Call<'_>, positions: &[usize], reply: Value) -> Result<()> {
    match call.kind {
        MultiKind::Get => match reply {
            Value::Array(items) if items.len() == positions.len() => {
                for (&pos, item) in positions.iter().zip(items) {
                    call.out.values[pos] = optional_bulk("MGET", item)?;
                }
                Ok(())
            }
            other => Err(unexpected(
                "MGET",
                "an array with one entry per key",
                &other,
            )),
        },
        MultiKind::Set => expect_ok("MSET", reply),
        MultiKind::Delete | MultiKind::Exists => {
            let name = if call.kind == MultiKind::Delete {
                "DEL"
            } else {
                "EXISTS"
            };
            call.out.count += count(name, reply)?;
            Ok(())
        }
    }
}
