//! Cluster mode's check of a request before it runs or is queued (Redis's
//! `getNodeByQuery`): where its keys are served (`cluster::ClusterNode::route`), whether it
//! must wait for a range's hand-over, and what cluster mode forbids (another database than
//! 0). EXEC is checked over every queued command's keys, since the topology may have changed
//! while they were queued.

use bytes::Bytes;

use crate::cluster::{ClusterNode, Route, CROSSSLOT};
use crate::cmd::batch;
use crate::cmd::common::Limits;
use crate::errors::err;
use crate::reply::Reply;
use crate::session::Session;
use crate::table::{Cmd, CommandSpec, Flags, COMMANDS};

/// What the check decided.
pub enum Check {
    Run,
    /// The reply that replaces running (or queueing) the request.
    Refuse(Reply),
    /// A write to a range frozen for its hand-over: wait for the thaw and check again.
    Wait,
}

/// Checks a request (see the module documentation).
pub fn check(
    node: &ClusterNode,
    session: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
    limits: &Limits,
) -> Check {
    if let Some(text) = forbidden(spec.cmd, args) {
        return Check::Refuse(err(text));
    }
    let write = spec.flags.contains(Flags::WRITE);
    let route = match spec.cmd {
        Cmd::Exec => {
            let Some(multi) = session.multi.as_ref() else {
                return Check::Run;
            };
            let specs = multi.queued.iter().map(|(i, a)| (&COMMANDS[*i], a));
            let write = specs.clone().any(|(s, _)| s.flags.contains(Flags::WRITE));
            let keys: Vec<Bytes> = specs.flat_map(|(s, a)| keys_of(s, a, limits)).collect();
            route_keys(node, keys.iter().map(|k| &k[..]), write)
        }
        Cmd::Batch => {
            let keys = batch::keys(args, limits);
            route_keys(node, keys.iter().map(|k| &k[..]), write)
        }
        _ => route_keys(node, spec.keys(args).map(|k| &k[..]), write),
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
fn route_keys<'k>(node: &ClusterNode, keys: impl Iterator<Item = &'k [u8]>, write: bool) -> Route {
    let mut keys = keys.peekable();
    if keys.peek().is_none() {
        return Route::Local;
    }
    node.route(keys, write)
}

/// The keys of a queued request (owned: EXEC gathers them from several).
pub fn keys_of(spec: &CommandSpec, args: &[Bytes], limits: &Limits) -> Vec<Bytes> {
    match spec.cmd {
        Cmd::Batch => batch::keys(args, limits),
        _ => spec.keys(args).cloned().collect(),
    }
}

/// Redis Cluster has one database: what addresses another is refused, with Redis's texts.
pub fn forbidden(cmd: Cmd, args: &[Bytes]) -> Option<&'static str> {
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
