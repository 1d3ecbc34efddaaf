//! Commands the router sends to every node: DBSIZE, FLUSHALL, FLUSHDB, KEYS, SCAN,
//! RANDOMKEY. Their replies are parsed (they are few and small) and combined.
//!
//! With replicas every key is on each member of its chain, and a node may still hold a copy of
//! a range it is joining or has handed away: KEYS and SCAN ask the nodes that answer for some
//! key (the chains' tails) and keep of each node's keys those it answers for
//! (`SlotTable::answers_for`), so each key comes once; DBSIZE asks each of them for the count
//! of the ranges it answers for (`CLUSTER COUNTKEYSINRANGES`, O(1) per slot on the node);
//! RANDOMKEY keeps a key from a member of its chain; FLUSHALL and FLUSHDB go to the heads,
//! each of which flushes its chains on every member (`SlotTable::flushing`).

use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use quiver_client::{Parser, Value};

use super::plan;
use super::table::SlotTable;
use super::Router;
use quiver_service::errors::err;
use quiver_service::reply::Reply;
use quiver_service::table::Cmd;

/// The commands the router answers from every node.
pub fn spans_every_node(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::DbSize | Cmd::FlushAll | Cmd::FlushDb | Cmd::Keys | Cmd::Scan | Cmd::RandomKey
    )
}

/// Low bits of a router SCAN cursor that name the node being scanned (at most 1024 nodes,
/// more than `quiver_cluster::topology::NODES_MAX`); the node's own cursor is above them.
const SCAN_NODE_BITS: u32 = 10;

/// DBSIZE, FLUSHALL, FLUSHDB, KEYS, SCAN and RANDOMKEY over every node.
pub async fn every_node(router: &Router, cmd: Cmd, args: &[Bytes]) -> Reply {
    let table = router.tables.current();
    if table.epoch == 0 || table.addrs.is_empty() {
        return err(plan::NO_TOPOLOGY);
    }
    match cmd {
        Cmd::Scan => return scan(router, &table, args).await,
        Cmd::DbSize => return dbsize(router, &table).await,
        _ => {}
    }
    let nodes: Vec<usize> = match cmd {
        Cmd::Keys => table.answering(),
        Cmd::FlushAll | Cmd::FlushDb => table.flushing(),
        _ => (0..table.addrs.len()).collect(),
    };
    let values = match ask_all(router, &table, &nodes, args).await {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    match cmd {
        Cmd::Keys => Reply::Array(
            nodes
                .into_iter()
                .zip(values)
                .flat_map(|(node, v)| answered(&table, node, v))
                .map(to_reply)
                .collect(),
        ),
        Cmd::RandomKey => {
            // Some node's random key, starting from a different node each time.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let start = nanos as usize % values.len();
            let mut found: Vec<(usize, Value)> = nodes.into_iter().zip(values).collect();
            found.rotate_left(start);
            found
                .into_iter()
                .find(|(node, v)| match v {
                    Value::Bulk(key) => table.is_member_for(*node, key),
                    _ => false,
                })
                .map_or(Reply::Null, |(_, v)| to_reply(v))
        }
        // FLUSHALL, FLUSHDB: every node asked said OK.
        _ => Reply::OK,
    }
}

/// The keys of a node's KEYS or SCAN page that it answers for (see the module
/// documentation).
fn answered(table: &SlotTable, node: usize, keys: Value) -> Vec<Value> {
    let Value::Array(keys) = keys else {
        return Vec::new();
    };
    keys.into_iter()
        .filter(|k| match k {
            Value::Bulk(key) => table.answers_for(node, key),
            _ => true,
        })
        .collect()
}

/// DBSIZE: the sum of each answering node's count of the ranges it answers for.
async fn dbsize(router: &Router, table: &SlotTable) -> Reply {
    let ranges = table.answered_ranges();
    let requests: Vec<(usize, Vec<Bytes>)> = ranges
        .into_iter()
        .map(|(node, ranges)| {
            let mut args = vec![
                Bytes::from_static(b"CLUSTER"),
                Bytes::from_static(b"COUNTKEYSINRANGES"),
            ];
            for r in ranges {
                args.push(Bytes::from(r.lo.to_string()));
                args.push(Bytes::from(r.hi.to_string()));
            }
            (node, args)
        })
        .collect();
    match ask_each(router, table, &requests).await {
        Ok(values) => values
            .iter()
            .map(|v| match v {
                Value::Integer(n) => Some(*n),
                _ => None,
            })
            .sum::<Option<i64>>()
            .map_or_else(
                || err("ERR router: a node's key count is no integer"),
                Reply::Integer,
            ),
        Err(reply) => reply,
    }
}

/// Sends `args` to every node of `nodes`; their replies, or the first error as the reply.
async fn ask_all(
    router: &Router,
    table: &SlotTable,
    nodes: &[usize],
    args: &[Bytes],
) -> Result<Vec<Value>, Reply> {
    let requests: Vec<(usize, Vec<Bytes>)> = nodes.iter().map(|&n| (n, args.to_vec())).collect();
    ask_each(router, table, &requests).await
}

/// Sends each node its request (`(node, args)`), all at once; their replies in order, or the
/// first error as the reply.
async fn ask_each(
    router: &Router,
    table: &SlotTable,
    requests: &[(usize, Vec<Bytes>)],
) -> Result<Vec<Value>, Reply> {
    let encoded: Vec<BytesMut> = requests
        .iter()
        .map(|(_, args)| {
            let mut request = BytesMut::new();
            quiver_resp::request::put_header(&mut request, b'*', args.len());
            for a in args {
                quiver_resp::request::put_bulk(&mut request, a);
            }
            request
        })
        .collect();
    let sends = requests
        .iter()
        .zip(&encoded)
        .map(|((n, _), request)| router.send(&table.addrs[*n], false, request, 1));
    let results = join_all(sends).await;
    router
        .stats
        .backend_requests
        .fetch_add(requests.len() as u64, Relaxed);
    results
        .into_iter()
        .map(|r| match r {
            Ok(replies) => match parse(replies.bytes(0)) {
                Some(Value::Error(e)) => Err(Reply::error(e)),
                Some(v) => Ok(v),
                None => Err(err("ERR router: a node's reply could not be parsed")),
            },
            Err(e) => Err(router.failed(&e)),
        })
        .collect()
}

/// SCAN over the nodes that answer for some key ([`SlotTable::answering`]) one after the
/// other: the router's cursor is the node's cursor with the node's place among them in its
/// low [`SCAN_NODE_BITS`] bits. A key present for the whole scan is returned at least once,
/// as long as the nodes stay the same.
async fn scan(router: &Router, table: &SlotTable, args: &[Bytes]) -> Reply {
    let Some(cursor) = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return err("ERR invalid cursor");
    };
    let answering = table.answering();
    let place = (cursor & ((1 << SCAN_NODE_BITS) - 1)) as usize;
    let Some(&node) = answering.get(place) else {
        return scan_reply(0, Vec::new());
    };
    let mut node_args = args.to_vec();
    node_args[1] = Bytes::from((cursor >> SCAN_NODE_BITS).to_string());
    let value = match ask_all(router, table, &[node], &node_args).await {
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
        if place + 1 < answering.len() {
            (place + 1) as u64
        } else {
            0
        }
    } else if next >> (64 - SCAN_NODE_BITS) != 0 {
        return err("ERR router: a node's SCAN cursor is too large to carry");
    } else {
        next << SCAN_NODE_BITS | place as u64
    };
    let keys = answered(table, node, Value::Array(keys));
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
