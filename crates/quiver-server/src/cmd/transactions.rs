//! MULTI / EXEC / DISCARD / WATCH / UNWATCH with Redis's semantics.
//!
//! EXEC runs the queued commands in one [`Txn`]: their keys are prefetched as one vector, each
//! command sees the writes of those before it, and all the writes commit as one compound
//! batch — all or nothing, and isolated, because every value read is a precondition of the
//! batch (a concurrent change makes EXEC run again on fresh values). A watched key is a
//! precondition too, with the value it had at WATCH time; a watched key that was written at
//! all since WATCH (even with the same value) makes EXEC answer nil, as in Redis.
//!
//! Commands that are not about keys (PING, CLIENT, INFO, SCAN, DBSIZE, ...) run as they are
//! met during EXEC; FLUSHDB / FLUSHALL inside a transaction empty the transaction's view and
//! flush the store at commit (not atomically with the rest).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::{self, keyspace, Cmd, COMMANDS};
use crate::errors::{err, store_error};
use crate::exec::{self, Ctx};
use crate::reply::Reply;
use crate::session::Multi;
use crate::txn::{retry_on_conflict, valid_key, Attempt, Commit, Txn, TXN_ATTEMPTS_MAX};

pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Multi => {
            if ctx.session.multi.is_some() {
                return err("ERR MULTI calls can not be nested");
            }
            ctx.session.set_multi(Some(Multi::default()));
            Reply::OK
        }
        Cmd::Discard => {
            if ctx.session.multi.is_none() {
                return err("ERR DISCARD without MULTI");
            }
            ctx.session.set_multi(None);
            ctx.session.unwatch(ctx.state);
            Reply::OK
        }
        Cmd::Watch => {
            if ctx.session.multi.is_some() {
                return err("ERR WATCH inside MULTI is not allowed");
            }
            watch(ctx, &args[1..])
        }
        Cmd::Unwatch => {
            ctx.session.unwatch(ctx.state);
            Reply::OK
        }
        Cmd::Exec => exec(ctx),
        other => unreachable!("{other:?} is not a transaction command"),
    }
}

fn watch(ctx: &mut Ctx<'_>, keys: &[Bytes]) -> Reply {
    let new: Vec<&Bytes> = keys
        .iter()
        .filter(|k| !ctx.session.watched.iter().any(|(w, _)| w == *k))
        .collect();
    // Register first, then read: a write that lands in between marks the client, so the
    // value read can never be newer than the registration.
    for k in &new {
        ctx.state
            .watches
            .add(ctx.session.id(), (*k).clone(), &ctx.session.watch_dirty);
    }
    let readable: Vec<&Bytes> = new.iter().copied().filter(|k| valid_key(k)).collect();
    let values = match ctx.state.store.multi_get(&readable) {
        Ok(v) => v,
        Err(e) => return store_error(&e),
    };
    let mut values = values.into_iter();
    for k in new {
        let v = if valid_key(k) {
            values.next().flatten()
        } else {
            None
        };
        ctx.session.watched.push((k.clone(), v));
    }
    Reply::OK
}

fn exec(ctx: &mut Ctx<'_>) -> Reply {
    let Some(multi) = ctx.session.multi.take() else {
        return err("ERR EXEC without MULTI");
    };
    ctx.session.set_multi(None);
    let reply = if multi.aborted {
        err("EXECABORT Transaction discarded because of previous errors.")
    } else {
        exec_queued(ctx, &multi.queued)
    };
    ctx.session.unwatch(ctx.state);
    reply
}

fn exec_queued(ctx: &mut Ctx<'_>, queued: &[(usize, Vec<Bytes>)]) -> Reply {
    let state = ctx.state;
    // Watched keys that cannot exist are no preconditions for the engine.
    let watched: Vec<(Bytes, Option<Bytes>)> = ctx
        .session
        .watched
        .iter()
        .filter(|(k, _)| valid_key(k))
        .cloned()
        .collect();
    let reply = retry_on_conflict(&state.stats, TXN_ATTEMPTS_MAX, "transaction", || {
        if ctx.session.watch_dirty.load(Ordering::SeqCst) {
            return Attempt::Done(Reply::NullArray);
        }
        let mut txn = Txn::new(state);
        let all_keys = queued
            .iter()
            .filter(|(i, _)| COMMANDS[*i].cmd.on_keys())
            .flat_map(|(i, args)| COMMANDS[*i].keys(args));
        if let Err(e) = txn.prefetch(all_keys) {
            return Attempt::Done(store_error(&e));
        }
        let mut replies = Vec::with_capacity(queued.len());
        for (i, args) in queued {
            let spec = &COMMANDS[*i];
            let reply = match spec.cmd {
                c if c.on_keys() => cmd::strings::run(&mut txn, &state.stats, c, args),
                c @ (Cmd::FlushDb | Cmd::FlushAll | Cmd::DbSize | Cmd::Keys | Cmd::Scan) => {
                    keyspace::run_in_txn(&mut txn, c, args)
                }
                c => Ok(exec::run(ctx, c, args)),
            };
            replies.push(reply.unwrap_or_else(|e| store_error(&e)));
        }
        match txn.commit(&watched) {
            Ok(Commit::Applied) => Attempt::Done(Reply::Array(replies)),
            // Either a watched key changed (its mark is set, or about to be: the writer marks
            // after its write) or a value read did: run again on fresh values.
            Ok(Commit::Conflict) if changed_since_watch(ctx, &watched) => {
                Attempt::Done(Reply::NullArray)
            }
            Ok(Commit::Conflict) => Attempt::Conflict,
            Err(e) => Attempt::Done(store_error(&e)),
        }
    });
    // The queued commands count once, for the attempt that was applied; an error among their
    // replies is a failed call and an error reply sent (inside EXEC's array).
    if let Reply::Array(replies) = &reply {
        for ((i, _), r) in queued.iter().zip(replies) {
            state.stats.command(*i, 1, 0);
            if let Reply::Error(text) = r {
                state.stats.failed(*i, 1);
                state.stats.error_reply(text);
            }
        }
    }
    reply
}

/// Whether a watched key no longer has its WATCH-time value (read directly, so EXEC does
/// not wait for the writer to set the mark).
fn changed_since_watch(ctx: &Ctx<'_>, watched: &[(Bytes, Option<Bytes>)]) -> bool {
    if watched.is_empty() {
        return false;
    }
    let keys: Vec<&Bytes> = watched.iter().map(|(k, _)| k).collect();
    match ctx.state.store.multi_get(&keys) {
        Ok(now) => now.iter().zip(watched).any(|(n, (_, w))| n != w),
        // Let the next attempt report the failure.
        Err(_) => false,
    }
}
