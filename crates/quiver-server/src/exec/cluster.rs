//! Cluster mode's check of a request before it runs or is queued (Redis's
//! `getNodeByQuery`): where its keys are served (`cluster::ClusterNode::route`) and what cluster
//! mode forbids (another database than 0). EXEC is checked over every queued command's keys,
//! since the topology may have changed while they were queued.

use bytes::Bytes;

use crate::cluster::{ClusterNode, Route, CROSSSLOT};
use crate::cmd::batch;
use crate::cmd::common::Limits;
use crate::errors::err;
use crate::reply::Reply;
use crate::session::Session;
use crate::table::{Cmd, CommandSpec, COMMANDS};

/// The reply that replaces running (or queueing) the request, if any.
pub fn refusal(
    node: &ClusterNode,
    session: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
    limits: &Limits,
) -> Option<Reply> {
    if let Some(text) = forbidden(spec.cmd, args) {
        return Some(err(text));
    }
    let route = match spec.cmd {
        Cmd::Exec => {
            let queued = session.multi.as_ref()?;
            let keys: Vec<Bytes> = queued
                .queued
                .iter()
                .flat_map(|(i, a)| keys_of(&COMMANDS[*i], a, limits))
                .collect();
            route_keys(node, keys.iter().map(|k| &k[..]))
        }
        Cmd::Batch => {
            let keys = batch::keys(args, limits);
            route_keys(node, keys.iter().map(|k| &k[..]))
        }
        _ => route_keys(node, spec.keys(args).map(|k| &k[..])),
    };
    match route {
        Route::Local => None,
        Route::Moved { slot, addr } => Some(Reply::error(format!("MOVED {slot} {addr}"))),
        Route::CrossSlot => Some(err(CROSSSLOT)),
        Route::Down(text) => Some(err(text)),
    }
}

/// A request without keys is served whatever the topology (PING, INFO, DBSIZE, ...).
fn route_keys<'k>(node: &ClusterNode, keys: impl Iterator<Item = &'k [u8]>) -> Route {
    let mut keys = keys.peekable();
    if keys.peek().is_none() {
        return Route::Local;
    }
    node.route(keys)
}

/// The keys of a queued request (owned: EXEC gathers them from several).
fn keys_of(spec: &CommandSpec, args: &[Bytes], limits: &Limits) -> Vec<Bytes> {
    match spec.cmd {
        Cmd::Batch => batch::keys(args, limits),
        _ => spec.keys(args).cloned().collect(),
    }
}

/// Redis Cluster has one database: what addresses another is refused, with Redis's texts.
fn forbidden(cmd: Cmd, args: &[Bytes]) -> Option<&'static str> {
    match cmd {
        Cmd::Select if &args[1][..] != b"0" => Some("ERR SELECT is not allowed in cluster mode"),
        Cmd::Move => Some("ERR MOVE is not allowed in cluster mode"),
        Cmd::SwapDb => Some("ERR SWAPDB is not allowed in cluster mode"),
        Cmd::Copy if args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"db")) => {
            Some("ERR Copying to another database is not allowed in cluster mode")
        }
        _ => None,
    }
}
