//! Commands on keys as optimistic transactions: a single command, a pipeline's run of
//! read-modify-writes (`Vector::Txn`: HSET, HINCRBY, ...), and EXEC's queue, run by the same
//! code ([`run_txn`]).
//!
//! The keys the commands read are prefetched as one engine vector (several beyond
//! `max-multikey-width`), each command sees the writes of those before it, and all the writes
//! commit as one compound batch — all or nothing, and isolated, because every value read is a
//! precondition of the batch (a concurrent change makes the whole thing run again on fresh
//! values, at most `TXN_ATTEMPTS_MAX` times). For EXEC, a watched key is a precondition too,
//! with the value it had at WATCH time; a watched key written at all since WATCH (even with the
//! same value) makes EXEC answer nil, as in Redis.
//!
//! Commands in EXEC that are not about keys (PING, CLIENT, INFO, ...) run once, on the first
//! attempt; a retry reuses their replies, so their side effects never repeat. FLUSHDB /
//! FLUSHALL inside a transaction empty the transaction's view and flush the store at commit
//! (not atomically with the rest).

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use quiver_store::Entry;

use crate::cmd::common::{Limits, TxnCommand};
use crate::cmd::ctx::Ctx;
use crate::cmd::parsed::Command;
use crate::cmd::{self};
use crate::state::ServerState;
use crate::store_errors::store_error;
use crate::txn::{read_all, retry_on_conflict, valid_key, Attempt, Commit, Txn, TXN_ATTEMPTS_MAX};
use crate::watch::DbKey;
use quiver_service::cmd::connection;
use quiver_service::errors::{self, err};
use quiver_service::reply::Reply;
use quiver_service::table::{Cmd, CommandSpec, Flags, COMMANDS};

/// One command of a transaction.
enum Step<'a> {
    Keys {
        spec: &'static CommandSpec,
        args: &'a [Bytes],
        command: &'a dyn TxnCommand,
    },
    /// Not about keys: runs on the connection, once.
    Server {
        spec: &'static CommandSpec,
        args: &'a [Bytes],
    },
    /// Its reply is known without running it (a syntax error found when EXEC parsed it).
    Answered(Reply),
}

impl<'a> Step<'a> {
    /// The database a SELECT step chooses (when it succeeds).
    fn selects(&self, databases: u32) -> Option<u32> {
        match self {
            Step::Server { spec, args } if spec.cmd == Cmd::Select => {
                connection::select_index(&args[1], databases).ok()
            }
            _ => None,
        }
    }

    /// The keys the step reads, for the transaction's prefetch.
    fn reads(&self) -> impl Iterator<Item = &'a Bytes> {
        let keys = match self {
            Step::Keys { spec, args, .. } if !spec.flags.contains(Flags::BLIND_WRITE) => {
                Some(spec.keys(args))
            }
            _ => None,
        };
        keys.into_iter().flatten()
    }
}

/// Runs a command on keys as its own transaction, in database `db`.
pub fn run_command(
    state: &ServerState,
    db: u32,
    spec: &'static CommandSpec,
    args: &[Bytes],
    command: &dyn TxnCommand,
) -> Reply {
    let step = Step::Keys {
        spec,
        args,
        command,
    };
    match run_txn(
        state,
        db,
        std::slice::from_ref(&step),
        None,
        no_server_steps,
    ) {
        Ok(mut replies) => replies.pop().unwrap_or(Reply::Null),
        Err(reply) => reply,
    }
}

/// A command on keys needs nothing of the connection.
fn no_server_steps(_: &CommandSpec, _: &[Bytes]) -> Reply {
    err("ERR internal error: not a key command")
}

/// A command on keys of a pipeline's run: its row, arguments and parsed form.
pub type KeyCommand<'a> = (&'static CommandSpec, &'a [Bytes], Box<dyn TxnCommand + 'a>);

/// A pipeline's consecutive read-modify-writes of single keys (`Vector::Txn`) as one
/// transaction in database `db`: their keys read as one engine vector, each command applied
/// on what those before it wrote, all their writes committed as one compound batch (one
/// append per partition, one fdatasync group, one chain message). Redis promises a pipeline
/// no atomicity; this gives more. Each command's reply — an error for one that failed, the
/// others still applied, as in EXEC — or, for every one, the reply that replaced them all
/// (an engine error at commit, giving up after conflicts).
pub fn run_group(state: &ServerState, db: u32, commands: &[KeyCommand<'_>]) -> Vec<Reply> {
    let steps: Vec<Step<'_>> = commands
        .iter()
        .map(|(spec, args, command)| Step::Keys {
            spec,
            args,
            command: &**command,
        })
        .collect();
    match run_txn(state, db, &steps, None, no_server_steps) {
        Ok(replies) => replies,
        Err(reply) => vec![reply; commands.len()],
    }
}

/// EXEC: runs the commands queued since MULTI as one transaction.
pub fn exec(ctx: &mut Ctx<'_>) -> Reply {
    let Some(multi) = ctx.session.multi.take() else {
        return err(errors::EXEC_WITHOUT_MULTI);
    };
    ctx.session.set_multi(None);
    let reply = if multi.aborted {
        err(errors::EXEC_ABORTED)
    } else {
        exec_queued(ctx, &multi.queued)
    };
    ctx.conn.unwatch(ctx.session.id(), &ctx.state.watches);
    reply
}

fn exec_queued(ctx: &mut Ctx<'_>, queued: &[(usize, Vec<Bytes>)]) -> Reply {
    let state = ctx.state;
    let limits = Limits::of(state);
    // Every queued command is parsed once; a syntax error is that command's reply, as in
    // Redis (the others still run).
    let parsed: Vec<(&'static CommandSpec, &[Bytes], Result<Command<'_>, Reply>)> = queued
        .iter()
        .map(|(i, args)| {
            let spec = &COMMANDS[*i];
            (spec, &args[..], cmd::parse(spec, args, &limits))
        })
        .collect();
    let steps: Vec<Step<'_>> = parsed
        .iter()
        .map(|(spec, args, command)| match command {
            Ok(Command::Vector(op)) => Step::Keys {
                spec,
                args,
                command: op,
            },
            Ok(Command::Keys(c)) => Step::Keys {
                spec,
                args,
                command: &**c,
            },
            // MONITOR would turn the connection into a stream in the middle of EXEC's reply.
            Ok(Command::Server) if spec.cmd == Cmd::Monitor => {
                Step::Answered(err(errors::MONITOR_IN_EXEC))
            }
            Ok(Command::Server) => Step::Server { spec, args },
            // EXEC is never queued (NOT_QUEUED).
            Ok(Command::Exec) => Step::Answered(err("ERR EXEC inside MULTI is not allowed")),
            Err(reply) => Step::Answered(reply.clone()),
        })
        .collect();
    // Watched keys that cannot exist are no preconditions for the engine.
    let watched: Vec<(DbKey, Option<Entry>)> = ctx
        .conn
        .watched
        .iter()
        .filter(|((_, k), _)| valid_key(k))
        .cloned()
        .collect();
    let dirty = ctx.conn.watch_dirty.clone();
    let db = ctx.session.db;
    let run_server = |spec: &CommandSpec, args: &[Bytes]| cmd::run_server(ctx, spec.cmd, args);
    let replies = match run_txn(state, db, &steps, Some((&watched, &dirty)), run_server) {
        Ok(replies) => replies,
        Err(reply) => {
            // Nothing of the transaction happened: a SELECT among its commands neither.
            ctx.session.select(db);
            return reply;
        }
    };
    // The queued commands count once, for the attempt that was applied; an error among their
    // replies is a failed call and an error reply sent (inside EXEC's array).
    for ((i, _), r) in queued.iter().zip(&replies) {
        state.core.stats.command(*i, 1, 0);
        if let Reply::Error(text) = r {
            state.core.stats.failed(*i, 1);
            state.core.stats.error_reply(text);
        }
    }
    Reply::Array(replies)
}

/// EXEC's watched keys with their values at WATCH time, and the connection's mark that a
/// write to one of them sets.
type Watch<'w> = (&'w [(DbKey, Option<Entry>)], &'w AtomicBool);

/// Runs `steps` in one transaction, starting in database `db` (a SELECT step changes it for
/// the steps after it), again on fresh values while another client changed what
/// they read (at most `TXN_ATTEMPTS_MAX` times). `watch` (EXEC only): the keys watched with
/// their values at WATCH time, and the connection's mark set by a write to any of them.
/// `run_server` runs a step about the connection or the server; it is called once per such
/// step, on the first attempt. Returns each step's reply, or the reply that replaces them all
/// (EXEC's nil after a watched key changed, an engine error, giving up after conflicts).
fn run_txn(
    state: &ServerState,
    db: u32,
    steps: &[Step<'_>],
    watch: Option<Watch<'_>>,
    mut run_server: impl FnMut(&'static CommandSpec, &[Bytes]) -> Reply,
) -> Result<Vec<Reply>, Reply> {
    let databases = state.core.config.databases;
    // The keys each step reads, in the database it addresses (ordered by database, for one
    // prefetch per database).
    let mut reads: Vec<(u32, &Bytes)> = Vec::new();
    let mut step_db = db;
    for step in steps {
        step_db = step.selects(databases).unwrap_or(step_db);
        reads.extend(step.reads().map(|k| (step_db, k)));
    }
    reads.sort_by_key(|(db, _)| *db);
    // Replies of the steps not about keys, from the first attempt.
    let mut once: Vec<Option<Reply>> = vec![None; steps.len()];
    let (what, watched) = match watch {
        Some((watched, _)) => ("transaction", watched),
        None => ("command", &[][..]),
    };
    let result = retry_on_conflict(&state.core.stats, TXN_ATTEMPTS_MAX, what, || {
        if watch.is_some_and(|(_, dirty)| dirty.load(Ordering::SeqCst)) {
            return Attempt::Done(Err(Reply::NullArray));
        }
        let mut txn = Txn::new(state, db);
        // One key is read when its command asks; several at once, as vectors.
        if reads.len() > 1 {
            for group in reads.chunk_by(|a, b| a.0 == b.0) {
                if let Err(e) = txn.prefetch(group[0].0, group.iter().map(|(_, k)| *k)) {
                    return Attempt::Done(Err(store_error(&e)));
                }
            }
        }
        let mut replies = Vec::with_capacity(steps.len());
        for (s, step) in steps.iter().enumerate() {
            let reply = match step {
                Step::Keys { command, .. } => match command.apply(&mut txn) {
                    Ok(reply) => reply,
                    // A single command fails whole; in EXEC (or a pipeline's group) the error
                    // is that command's reply.
                    Err(e) if watch.is_none() && steps.len() == 1 => {
                        return Attempt::Done(Err(store_error(&e)))
                    }
                    Err(e) => store_error(&e),
                },
                Step::Server { spec, args } => {
                    let reply = once[s]
                        .get_or_insert_with(|| run_server(spec, args))
                        .clone();
                    if let (Some(n), Reply::Simple(_)) = (step.selects(databases), &reply) {
                        txn.select(n);
                    }
                    reply
                }
                Step::Answered(reply) => reply.clone(),
            };
            replies.push(reply);
        }
        match txn.commit(watched) {
            Ok(Commit::Applied) => Attempt::Done(Ok(replies)),
            // Either a watched key changed (its mark is set, or about to be: the writer marks
            // after its write) or a value read did: run again on fresh values.
            Ok(Commit::Conflict) if changed_since_watch(state, watched) => {
                Attempt::Done(Err(Reply::NullArray))
            }
            Ok(Commit::Conflict) => Attempt::Conflict,
            Ok(Commit::Refused(text)) => Attempt::Done(Err(Reply::error(text))),
            Err(e) => Attempt::Done(Err(store_error(&e))),
        }
    });
    result.and_then(|r| r)
}

/// Whether a watched key no longer has its WATCH-time value (read directly, so EXEC does
/// not wait for the writer to set the mark).
fn changed_since_watch(state: &ServerState, watched: &[(DbKey, Option<Entry>)]) -> bool {
    let mut dbs: Vec<u32> = watched.iter().map(|((db, _), _)| *db).collect();
    dbs.sort_unstable();
    dbs.dedup();
    dbs.into_iter().any(|db| {
        let (keys, seen): (Vec<&Bytes>, Vec<&Option<Entry>>) = watched
            .iter()
            .filter(|((d, _), _)| *d == db)
            .map(|((_, k), w)| (k, w))
            .unzip();
        match read_all(&state.store, db, &keys, state.live.max_multikey_width()) {
            Ok(now) => now.iter().zip(seen).any(|(n, w)| n != w),
            // Let the next attempt report the failure.
            Err(_) => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Reads `counter` and writes it + 1; on its first `rivals` runs another client's write
    /// lands between its read and the commit, so the attempt conflicts.
    struct ContendedIncr<'s> {
        store: &'s quiver_store::Store,
        runs: AtomicUsize,
        rivals: usize,
    }

    impl TxnCommand for ContendedIncr<'_> {
        fn apply(&self, txn: &mut Txn<'_>) -> quiver_store::Result<Reply> {
            let key = Bytes::from_static(b"counter");
            let n: i64 = txn
                .get(&key)?
                .map_or(0, |v| String::from_utf8_lossy(&v).parse().unwrap());
            let run = self.runs.fetch_add(1, Ordering::SeqCst);
            if run < self.rivals {
                self.store
                    .put(b"counter", format!("{}", 100 * (run + 1)).as_bytes())?;
            }
            txn.put(key, Bytes::from((n + 1).to_string()));
            Ok(Reply::Integer(n + 1))
        }
    }

    /// A transaction retried after conflicts runs its steps about the connection (CLIENT,
    /// HELLO, AUTH, ...) once, on the first attempt, and answers with that attempt's reply.
    #[test]
    fn retries_never_repeat_steps_about_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        let incr = ContendedIncr {
            store: &state.store,
            runs: AtomicUsize::new(0),
            rivals: 3,
        };
        let ping: Vec<Bytes> = vec![Bytes::from_static(b"PING")];
        let incr_args: Vec<Bytes> = vec!["INCR".into(), "counter".into()];
        let steps = [
            Step::Server {
                spec: Cmd::Ping.spec(),
                args: &ping,
            },
            Step::Keys {
                spec: Cmd::Incr.spec(),
                args: &incr_args,
                command: &incr,
            },
        ];
        let mut server_runs = 0;
        let dirty = AtomicBool::new(false);
        let replies = run_txn(&state, 0, &steps, Some((&[], &dirty)), |spec, _| {
            server_runs += 1;
            Reply::simple(spec.name.to_uppercase())
        })
        .unwrap();
        assert_eq!(
            incr.runs.load(Ordering::SeqCst),
            4,
            "three conflicts, then applied"
        );
        assert_eq!(server_runs, 1);
        assert_eq!(replies, [Reply::simple("PING"), Reply::Integer(301)]);
        assert_eq!(
            state.store.get(b"counter").unwrap().as_deref(),
            Some(&b"301"[..])
        );
    }
}
