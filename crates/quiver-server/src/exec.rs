//! Executing a pipelined run of requests: the direct pattern.
//!
//! A connection hands over every complete request it has read as one run. Consecutive GETs in
//! the run become one engine `multi_get`, consecutive plain SETs one `multi_put`, consecutive
//! DEL / UNLINK one `multi_delete` and consecutive EXISTS one `multi_exists` — at most
//! `max-vector-width` keys each, and never across a command of another kind, so a read that
//! follows a write in the pipeline sees it and replies stay in request order. An MGET's keys
//! are one vector of their own; MSET's go as one compound batch through the general path.
//!
//! Everything else goes through [`dispatch`]: table lookup, arity, authentication, MULTI
//! queueing, then the command's module.

use std::time::Instant;

use bytes::Bytes;

use crate::cmd::{self, connection, introspection, keyspace, strings, transactions, Cmd};
use crate::errors::{self, store_error, Refusal};
use crate::output::Output;
use crate::reply::Reply;
use crate::session::Session;
use crate::state::ServerState;
use crate::txn::{retry_on_conflict, valid_key, Attempt, Commit, Txn, TXN_ATTEMPTS_MAX};

/// A command's view of the server and of its connection.
pub struct Ctx<'a> {
    pub state: &'a ServerState,
    pub session: &'a mut Session,
}

/// Why a run stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every request was executed.
    Complete,
    /// The replies exceed `client-output-buffer-limit`: close the connection.
    OutputLimit,
}

/// Executes `requests` in order, appending each reply to `out` (which refuses a reply that
/// would pass `client-output-buffer-total-limit`). Engine calls run on this thread (inside
/// `block_in_place` when `blocking`: they may wait on the disk); with coalescing on, GETs are
/// handed to the storage thread and awaited.
pub async fn execute_run(
    state: &ServerState,
    session: &mut Session,
    requests: &[Vec<Bytes>],
    out: &mut Output<'_>,
    blocking: bool,
) -> RunEnd {
    let limit = state.config.client_output_buffer_limit;
    let run_started = Instant::now();
    let mut i = 0;
    while i < requests.len() && !session.closing {
        let started = Instant::now();
        let n = match vector_kind(state, session, &requests[i]) {
            Some(kind) => {
                let n = group_len(state, session, kind, &requests[i..]);
                let group = &requests[i..i + n];
                match (&state.coalescer, kind) {
                    (Some(c), VectorKind::Get) => {
                        let keys = group.iter().map(|r| r[1].clone()).collect();
                        let result = c.get(keys).await;
                        encode_gets(state, result, n, out, session.resp3);
                        state.stats.command(
                            cmd::index_of(Cmd::Get),
                            n as u64,
                            started.elapsed().as_micros() as u64,
                        );
                    }
                    _ => on_thread(blocking, || run_vector(state, session, kind, group, out)),
                }
                n
            }
            None => {
                let reply = on_thread(blocking, || {
                    dispatch(&mut Ctx { state, session }, &requests[i])
                });
                out.reply(&reply, session.resp3);
                1
            }
        };
        // A command's latency inside the server includes the commands before it in its run.
        state
            .stats
            .latency_us
            .record_n(run_started.elapsed().as_micros() as u64, n as u64);
        i += n;
        if out.len() > limit {
            return RunEnd::OutputLimit;
        }
    }
    RunEnd::Complete
}

/// Runs `f`, telling the runtime first when it may block on the disk so that other
/// connections' tasks move to another thread.
fn on_thread<R>(blocking: bool, f: impl FnOnce() -> R) -> R {
    if blocking {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Single-key commands that are grouped into one engine vector when they follow each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VectorKind {
    Get,
    Set,
    Del,
    Exists,
    /// One MGET: its keys are the vector (never grouped with other commands, so its reply is
    /// one consistent state of the store, as Redis's MGET).
    MGet,
}

impl VectorKind {
    fn cmd(self) -> Cmd {
        match self {
            VectorKind::Get => Cmd::Get,
            VectorKind::Set => Cmd::Set,
            VectorKind::Del => Cmd::Del,
            VectorKind::Exists => Cmd::Exists,
            VectorKind::MGet => Cmd::MGet,
        }
    }
}

/// Whether `args` can join a vector: the right shape, keys and values the engine accepts,
/// and no MULTI or pending authentication (those take the general path).
fn vector_kind(state: &ServerState, session: &Session, args: &[Bytes]) -> Option<VectorKind> {
    if session.multi.is_some() || !session.authenticated || args.len() < 2 {
        return None;
    }
    let name = &args[0][..];
    let kind = match (name.len(), args.len()) {
        (3, 2) if name.eq_ignore_ascii_case(b"get") => VectorKind::Get,
        (3, 3) if name.eq_ignore_ascii_case(b"set") => VectorKind::Set,
        (3, _) if name.eq_ignore_ascii_case(b"del") => VectorKind::Del,
        (6, _) if name.eq_ignore_ascii_case(b"unlink") => VectorKind::Del,
        (6, _) if name.eq_ignore_ascii_case(b"exists") => VectorKind::Exists,
        (4, _) if name.eq_ignore_ascii_case(b"mget") => VectorKind::MGet,
        _ => return None,
    };
    let keys_ok = match kind {
        VectorKind::Set => {
            valid_key(&args[1]) && args[2].len() <= state.store.options().value_len_max
        }
        _ => args[1..].iter().all(|k| valid_key(k)),
    };
    keys_ok.then_some(kind)
}

/// How many requests from the front of `requests` (all of vector kind `kind`) form one
/// vector: at most `max-vector-width` keys, at least one command.
fn group_len(
    state: &ServerState,
    session: &Session,
    kind: VectorKind,
    requests: &[Vec<Bytes>],
) -> usize {
    let width_max = state.config.max_vector_width;
    let mut n = 0;
    let mut keys = 0;
    if kind == VectorKind::MGet {
        return 1;
    }
    for r in requests {
        if n > 0 && (vector_kind(state, session, r) != Some(kind) || keys + r.len() - 1 > width_max)
        {
            break;
        }
        keys += r.len() - 1;
        n += 1;
    }
    n
}

/// Runs a group of same-kind single-key commands as one engine call.
fn run_vector(
    state: &ServerState,
    session: &mut Session,
    kind: VectorKind,
    group: &[Vec<Bytes>],
    out: &mut Output<'_>,
) {
    let n = group.len();
    let keys: usize = group.iter().map(|r| r.len() - 1).sum();
    let started = Instant::now();
    let store = &state.store;
    let resp3 = session.resp3;
    let index = cmd::index_of(kind.cmd());
    state.stats.vector_widths.record(keys as u64);
    // An engine error fails every command of the vector.
    let failed = |error: &Reply, out: &mut Output<'_>| {
        state.stats.failed(index, n as u64);
        out.reply_n(error, n, resp3);
    };
    match kind {
        VectorKind::Get => {
            let keys: Vec<&Bytes> = group.iter().map(|r| &r[1]).collect();
            let result = store.multi_get(&keys).map_err(|e| store_error(&e));
            encode_gets(state, result, n, out, resp3);
        }
        VectorKind::Set => {
            let pairs: Vec<(&Bytes, &Bytes)> = group.iter().map(|r| (&r[1], &r[2])).collect();
            let keys: Vec<&Bytes> = pairs.iter().map(|p| p.0).collect();
            let result = store.multi_put(&pairs).map(|()| vec![true; n]);
            write_replies(state, out, resp3, index, group, &keys, result, |_| {
                Reply::OK
            });
        }
        VectorKind::Del => {
            let keys: Vec<&Bytes> = group.iter().flat_map(|r| &r[1..]).collect();
            let result = store.multi_delete(&keys);
            write_replies(state, out, resp3, index, group, &keys, result, |existed| {
                Reply::Integer(existed.iter().filter(|&&e| e).count() as i64)
            });
        }
        VectorKind::MGet => {
            let keys = &group[0][1..];
            match store.multi_get(keys) {
                Ok(values) => {
                    for v in &values {
                        state.stats.hit(v.is_some());
                    }
                    out.bulks(&values, resp3);
                }
                Err(e) => failed(&store_error(&e), out),
            }
        }
        VectorKind::Exists => {
            let keys: Vec<&Bytes> = group.iter().flat_map(|r| &r[1..]).collect();
            match store.multi_exists(&keys) {
                Ok(found) => {
                    let mut found = found.into_iter();
                    let replies: Vec<Reply> = group
                        .iter()
                        .map(|r| {
                            let count = found.by_ref().take(r.len() - 1).filter(|&e| e).count();
                            Reply::Integer(count as i64)
                        })
                        .collect();
                    out.replies(&replies, resp3);
                }
                Err(e) => failed(&store_error(&e), out),
            }
        }
    }
    state
        .stats
        .command(index, n as u64, started.elapsed().as_micros() as u64);
    session.info.touch(index);
}

/// The replies of a vector of writes (SETs or DELs): each command's own, from which of its
/// keys' writes took effect — all of them (`ok` of whether each key existed before), none
/// (the engine's error), or, after an I/O error in the middle of the vector, some (an error
/// that says so). Watchers of every key changed are marked (a delete of a missing key changes
/// nothing).
#[allow(clippy::too_many_arguments)]
fn write_replies(
    state: &ServerState,
    out: &mut Output<'_>,
    resp3: bool,
    index: usize,
    group: &[Vec<Bytes>],
    keys: &[&Bytes],
    result: quiver_store::Result<Vec<bool>>,
    ok: impl Fn(&[bool]) -> Reply,
) {
    let deletes = index == cmd::index_of(Cmd::Del);
    let (applied, existed, error) = match result {
        Ok(existed) => (vec![true; keys.len()], existed, None),
        Err(quiver_store::Error::PartlyApplied {
            applied,
            existed,
            source,
        }) => (applied, existed, Some(*source)),
        Err(e) => {
            state.stats.failed(index, group.len() as u64);
            out.reply_n(&store_error(&e), group.len(), resp3);
            return;
        }
    };
    state.watches.touch(
        keys.iter()
            .zip(applied.iter().zip(&existed))
            .filter(|(_, (&a, &e))| a && (e || !deletes))
            .map(|(k, _)| *k),
    );
    let mut at = 0;
    let mut failed = 0;
    let replies: Vec<Reply> = group
        .iter()
        .map(|r| {
            // A SET has one key, a DEL all its arguments.
            let n = if deletes { r.len() - 1 } else { 1 };
            let (a, e) = (&applied[at..at + n], &existed[at..at + n]);
            at += n;
            match &error {
                Some(err) if !a.iter().all(|&x| x) => {
                    failed += 1;
                    if a.iter().any(|&x| x) {
                        errors::partly_applied(err)
                    } else {
                        store_error(err)
                    }
                }
                _ => ok(e),
            }
        })
        .collect();
    if failed > 0 {
        state.stats.failed(index, failed);
    }
    out.replies(&replies, resp3);
}

/// The replies of `n` GETs (each its own command: each is checked against the output limit
/// on its own).
fn encode_gets(
    state: &ServerState,
    result: Result<Vec<Option<Bytes>>, Reply>,
    n: usize,
    out: &mut Output<'_>,
    resp3: bool,
) {
    match result {
        Ok(values) => {
            let replies: Vec<Reply> = values
                .into_iter()
                .map(|v| {
                    state.stats.hit(v.is_some());
                    v.map_or(Reply::Null, Reply::Bulk)
                })
                .collect();
            out.replies(&replies, resp3);
        }
        Err(e) => {
            state.stats.failed(cmd::index_of(Cmd::Get), n as u64);
            out.reply_n(&e, n, resp3);
        }
    }
}

/// Executes one request through the command table.
pub fn dispatch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some((index, spec)) = cmd::lookup(&args[0]) else {
        ctx.state
            .stats
            .unknown_commands
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        flag_transaction(ctx.session);
        return errors::unknown_command(args);
    };
    let refused = if !spec.arity_ok(args.len()) {
        Some(errors::wrong_arity(spec.name))
    } else if !ctx.session.authenticated && !spec.flags.contains(&"no_auth") {
        Some(errors::err(errors::NOAUTH))
    } else {
        None
    };
    if let Some(reply) = refused {
        ctx.state.stats.rejected(index);
        flag_transaction(ctx.session);
        if spec.cmd == Cmd::Exec {
            // Redis's execCommandAbort: a refused EXEC discards the transaction.
            ctx.session.set_multi(None);
            ctx.session.unwatch(ctx.state);
            return errors::exec_abort(&reply);
        }
        return reply;
    }
    if let Some(multi) = &mut ctx.session.multi {
        if !matches!(
            spec.cmd,
            Cmd::Exec | Cmd::Discard | Cmd::Multi | Cmd::Watch | Cmd::Quit | Cmd::Reset
        ) {
            multi.queued.push((index, args.to_vec()));
            let queued = multi.queued.len() as u64;
            ctx.session
                .info
                .multi
                .store(queued, std::sync::atomic::Ordering::Relaxed);
            return Reply::simple("QUEUED");
        }
    }
    ctx.session.info.touch(index);
    let started = Instant::now();
    let reply = run(ctx, spec.cmd, args);
    let stats = &ctx.state.stats;
    match errors::refusal(&reply) {
        // Redis refuses these before running the command, and finds no command to count an
        // unknown subcommand against.
        Some(Refusal::UnknownSubcommand) => {}
        Some(Refusal::SubcommandArity) => stats.rejected(index),
        None => {
            stats.command(index, 1, started.elapsed().as_micros() as u64);
            if matches!(reply, Reply::Error(_)) {
                stats.failed(index, 1);
            }
        }
    }
    reply
}

/// A refused command inside MULTI makes EXEC fail (Redis's `flagTransaction`).
fn flag_transaction(session: &mut Session) {
    if let Some(m) = &mut session.multi {
        m.aborted = true;
    }
}

/// Runs a command whose arity and permissions were checked.
pub fn run(ctx: &mut Ctx<'_>, cmd: Cmd, args: &[Bytes]) -> Reply {
    match cmd {
        Cmd::Ping
        | Cmd::Echo
        | Cmd::Hello
        | Cmd::Auth
        | Cmd::Select
        | Cmd::Quit
        | Cmd::Reset
        | Cmd::Client => connection::run(ctx, cmd, args),
        Cmd::Command | Cmd::Config | Cmd::Info => introspection::run(ctx, cmd, args),
        Cmd::Scan | Cmd::Keys | Cmd::DbSize | Cmd::FlushDb | Cmd::FlushAll => {
            keyspace::run(ctx, cmd, args)
        }
        Cmd::Multi | Cmd::Exec | Cmd::Discard | Cmd::Watch | Cmd::Unwatch => {
            transactions::run(ctx, cmd, args)
        }
        c if c.on_keys() => run_atomic(ctx.state, cmd, args),
        c => unreachable!("{c:?} has no implementation"),
    }
}

/// Runs a key/value command as its own optimistic transaction, again on fresh values while
/// another client changed what it read (at most `TXN_ATTEMPTS_MAX` times).
fn run_atomic(state: &ServerState, cmd: Cmd, args: &[Bytes]) -> Reply {
    let spec = &cmd::COMMANDS[cmd::index_of(cmd)];
    retry_on_conflict(&state.stats, TXN_ATTEMPTS_MAX, "command", || {
        let mut txn = Txn::new(state);
        let reply = match prefetch_and_run(&mut txn, state, spec, args) {
            Ok(r) => r,
            Err(e) => return Attempt::Done(store_error(&e)),
        };
        match txn.commit(&[]) {
            Ok(Commit::Applied) => Attempt::Done(reply),
            Ok(Commit::Conflict) => Attempt::Conflict,
            Err(e) => Attempt::Done(store_error(&e)),
        }
    })
}

/// Prefetches a command's keys as one vector (when it has several and reads them), then
/// runs it.
pub fn prefetch_and_run(
    txn: &mut Txn<'_>,
    state: &ServerState,
    spec: &cmd::CommandSpec,
    args: &[Bytes],
) -> quiver_store::Result<Reply> {
    // MSET writes blindly: reading its keys first would only add preconditions.
    if spec.cmd != Cmd::MSet && spec.keys(args).nth(1).is_some() {
        txn.prefetch(spec.keys(args))?;
    }
    strings::run(txn, &state.stats, spec.cmd, args)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::clients::Clients;
    use crate::config::Config;
    use crate::output::OutputBudget;
    use crate::stats::Stats;
    use crate::watch::Watches;

    fn state(dir: &std::path::Path) -> ServerState {
        let config = Config::default();
        ServerState {
            store: quiver_store::Store::open(dir, config.store_options()).unwrap(),
            output_budget: OutputBudget::new(0),
            config,
            stats: Stats::default(),
            watches: Watches::default(),
            clients: Clients::default(),
            run_id: String::new(),
            port: 0,
            coalescer: None,
            shutting_down: AtomicBool::new(false),
        }
    }

    fn request(args: &[&str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::from(a.to_string())).collect()
    }

    /// An I/O error stopped a pipelined vector part-way (the engine says which writes took
    /// effect): each command gets its own answer — its reply if all its writes took effect,
    /// the error if none did, "partly applied" if some did.
    #[test]
    fn a_partly_applied_vector_answers_each_command_for_itself() {
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path());
        let group = vec![
            request(&["DEL", "a", "b"]),
            request(&["DEL", "c"]),
            request(&["DEL", "d", "e"]),
        ];
        let keys: Vec<&Bytes> = group.iter().flat_map(|r| &r[1..]).collect();
        let result = Err(quiver_store::Error::PartlyApplied {
            applied: vec![true, true, false, true, false],
            existed: vec![true, false, true, true, true],
            source: Box::new(quiver_store::Error::NoSpace {
                path: "/x/p0001/0000000000000009.seg".into(),
            }),
        });
        let mut out = Output::new(&state.output_budget, &state.stats);
        let del = cmd::index_of(Cmd::Del);
        write_replies(
            &state,
            &mut out,
            false,
            del,
            &group,
            &keys,
            result,
            |existed| Reply::Integer(existed.iter().filter(|&&e| e).count() as i64),
        );
        let text = String::from_utf8_lossy(out.bytes()).into_owned();
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(lines[0], ":1", "DEL a b: both deleted, one existed");
        assert_eq!(
            lines[1], "-ERR no space left on device: the write was not applied",
            "DEL c: nothing applied"
        );
        assert!(
            lines[2].starts_with("-ERR storage error: ")
                && lines[2].ends_with("the command was partly applied"),
            "DEL d e: {}",
            lines[2]
        );
        assert_eq!(lines.len(), 4, "{text:?}");
    }
}
