//! Cluster mode's check of a request before it runs or is queued (Redis's
//! `getNodeByQuery`): where its keys are served (`cluster::ClusterNode::route`), whether it
//! must wait for a range's hand-over, and what cluster mode forbids (another database than
//! 0). EXEC is checked over every queued command's keys, since the topology may have changed
//! while they were queued.

use bytes::Bytes;

use crate::cluster::{ClusterNode, Route, CROSSSLOT};
use crate::state::NodeConn;
use quiver_service::admission::{forbidden_in_cluster, keys_of};
use quiver_service::errors::err;
use quiver_service::reply::Reply;
use quiver_service::session::Session;
use quiver_service::table::{Cmd, CommandSpec, Flags, COMMANDS};

pub const FLUSH_IN_MULTI_REPLICATED: &str =
    "ERR FLUSHALL and FLUSHDB are not supported inside MULTI on a cluster with replicas";

/// What the check decided.
pub enum Check {
    Run,
    /// FLUSHALL or FLUSHDB on a member of replicated chains: it empties the chains the node
    /// heads, each down its chain (`cmd::topology::flush_chains`), not the whole store.
    FlushChains,
    /// The reply that replaces running (or queueing) the request.
    Refuse(Reply),
    /// A write to a range frozen for its hand-over: wait for the thaw and check again.
    Wait,
}

/// Checks a request (see the module documentation). On a member of replicated chains the
/// keys of a request that runs are kept in the connection's `NodeConn`: the run's replies wait for the
/// commit of what it read or wrote of them (`chain`).
pub fn check(
    node: &ClusterNode,
    session: &Session,
    conn: &mut NodeConn,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Check {
    if let Some(text) = forbidden_in_cluster(spec.cmd, args) {
        return Check::Refuse(err(text));
    }
    let replicated = node.chains.is_replicated();
    if matches!(spec.cmd, Cmd::FlushAll | Cmd::FlushDb) && replicated {
        // A flush of the chains the node heads, each as one message down its chain
        // (`Chains::flush`), not a write of the transaction's.
        if session.multi.is_some() {
            return Check::Refuse(err(FLUSH_IN_MULTI_REPLICATED));
        }
        return Check::FlushChains;
    }
    let write = spec.flags.contains(Flags::WRITE);
    let route = match spec.cmd {
        Cmd::Exec | Cmd::Batch => {
            let (keys, write) = match &session.multi {
                Some(multi) if spec.cmd == Cmd::Exec => {
                    let specs = multi.queued.iter().map(|(i, a)| (&COMMANDS[*i], a));
                    let write = specs.clone().any(|(s, _)| s.flags.contains(Flags::WRITE));
                    let keys: Vec<Bytes> = specs.flat_map(|(s, a)| keys_of(s, a)).collect();
                    (keys, write)
                }
                None if spec.cmd == Cmd::Exec => return Check::Run,
                _ => (keys_of(spec, args), write),
            };
            let read = session.readonly && !write;
            let route = route_keys(node, keys.iter().map(|k| &k[..]), write, read);
            if replicated && route == Route::Local {
                if let Some(key) = keys.first().filter(|_| write) {
                    conn.last_write_key = Some(key.clone());
                }
                conn.chain_keys.extend(keys);
            }
            route
        }
        _ => {
            let read = session.readonly && !write;
            let route = route_keys(node, spec.keys(args).map(|k| &k[..]), write, read);
            if replicated && route == Route::Local {
                if let Some(key) = spec.keys(args).next().filter(|_| write) {
                    conn.last_write_key = Some(key.clone());
                }
                conn.chain_keys.extend(spec.keys(args).cloned());
            }
            route
        }
    };
    match route {
        Route::Local => Check::Run,
        Route::Frozen { .. } => Check::Wait,
        Route::Moved { slot, addr } => Check::Refuse(Reply::error(format!("MOVED {slot} {addr}"))),
        Route::CrossSlot => Check::Refuse(err(CROSSSLOT)),
        Route::Down(text) => Check::Refuse(err(text)),
    }
}

/// A request without keys is served whatever the topology (PING, INFO, DBSIZE, ...).
fn route_keys<'k>(
    node: &ClusterNode,
    keys: impl Iterator<Item = &'k [u8]>,
    write: bool,
    replica_read: bool,
) -> Route {
    let mut keys = keys.peekable();
    if keys.peek().is_none() {
        return Route::Local;
    }
    node.route(keys, write, replica_read)
}
