//! MULTI / DISCARD / WATCH / UNWATCH with Redis's semantics. EXEC, which runs the queued
//! commands as one transaction, is the executor's (`exec::atomic`): it runs single commands
//! the same way.
//!
//! A watched key is remembered with the value and expiry time it had at WATCH time (a
//! precondition of EXEC's batch, so a key that expired since, or whose TTL changed, fails it);
//! a watched key that was written at all since WATCH (even with the same value) makes EXEC
//! answer nil, as in Redis.

use bytes::Bytes;

use crate::cmd::ctx::Ctx;
use crate::store_errors::store_error;
use crate::txn::{read_all, valid_key};
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;
use quiver_service::session::Multi;
use quiver_service::table::Cmd;

pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Multi => {
            if ctx.session.multi.is_some() {
                return err(errors::MULTI_NESTED);
            }
            ctx.session.set_multi(Some(Multi::default()));
            Reply::OK
        }
        Cmd::Discard => {
            if ctx.session.multi.is_none() {
                return err(errors::DISCARD_WITHOUT_MULTI);
            }
            ctx.session.set_multi(None);
            ctx.conn.unwatch(ctx.session.id(), &ctx.state.watches);
            Reply::OK
        }
        Cmd::Watch => {
            if ctx.session.multi.is_some() {
                return err(errors::WATCH_INSIDE_MULTI);
            }
            watch(ctx, &args[1..])
        }
        Cmd::Unwatch => {
            ctx.conn.unwatch(ctx.session.id(), &ctx.state.watches);
            Reply::OK
        }
        other => Reply::error(format!(
            "ERR internal error: {other:?} is not a transaction command"
        )),
    }
}

fn watch(ctx: &mut Ctx<'_>, keys: &[Bytes]) -> Reply {
    let db = ctx.session.db;
    let new: Vec<&Bytes> = keys
        .iter()
        .filter(|k| {
            !ctx.conn
                .watched
                .iter()
                .any(|((d, w), _)| *d == db && w == *k)
        })
        .collect();
    // Register first, then read: a write that lands in between marks the client, so the
    // value read can never be newer than the registration.
    for k in &new {
        ctx.state
            .watches
            .add(ctx.session.id(), (db, (*k).clone()), &ctx.conn.watch_dirty);
    }
    let readable: Vec<&Bytes> = new.iter().copied().filter(|k| valid_key(k)).collect();
    let width_max = ctx.state.live.max_multikey_width();
    let mut values = match read_all(&ctx.state.store, db, &readable, width_max) {
        Ok(v) => v.into_iter(),
        Err(e) => return store_error(&e),
    };
    for k in new {
        let v = if valid_key(k) {
            values.next().flatten()
        } else {
            None
        };
        ctx.conn.watched.push(((db, k.clone()), v));
    }
    Reply::OK
}
