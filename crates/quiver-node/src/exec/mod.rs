//! Executing a pipelined run of requests: one rule for every command.
//!
//! A connection hands over every complete request it has read as one run. Each request is
//! checked (known, arity, authentication; queued instead inside MULTI) and parsed
//! (`cmd::parse`) into what runs it:
//!
//! * a **vector operation** (GET, MGET, a plain SET, DEL, UNLINK, EXISTS): consecutive ones of
//!   one kind — or GETs, MGETs and SETs mixed ([`joins`]) — become one engine vector
//!   ([`vector`]) of at most `max-vector-width` keys, never across a command of another kind;
//!   the engine runs a vector as if its operations ran one by one, so a read that follows a
//!   write in the pipeline sees it, and replies stay in request order;
//! * a **command on keys** (everything else that touches keys, and a vector operation wider
//!   than `max-multikey-width`): its own optimistic transaction ([`atomic`]), committed as one
//!   compound batch, retried (boundedly) on conflict;
//! * **EXEC**: the queued commands as one transaction, by the same code as a single command;
//! * a command about the **connection or the server**: run once on the connection.
//!
//! "How is MGET executed?" — `cmd::get` makes it a `Get` vector operation; [`vector::run`]
//! sends it (with the GETs and MGETs around it) to the engine's `multi_get` and encodes the
//! values straight into the reply buffer.

pub mod atomic;
pub mod cluster;
pub mod combine;
pub mod thread;
pub mod vector;

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cmd::common::Limits;
use crate::cmd::ctx::Ctx;
use crate::cmd::parsed::Command;
use crate::cmd::{self};
use crate::state::{NodeConn, ServerState};
use quiver_service::admission::{check, flag_transaction, queue};
use quiver_service::errors::{self, Refusal};
use quiver_service::output::Output;
use quiver_service::reply::Reply;
use quiver_service::service::InfoParts;
use quiver_service::service::{Core, Service};
use quiver_service::session::Session;
use quiver_service::table::{Cmd, CommandSpec, Flags, Vector};
use thread::on_thread;

pub use quiver_service::service::RunEnd;

/// Longest time a write waits for its range's hand-over to be decided (cluster mode) before
/// it is answered TRYAGAIN.
pub const FROZEN_WAIT_MAX: Duration = Duration::from_secs(10);
/// How often a waiting write checks its range again (a thaw also wakes it).
const FROZEN_POLL: Duration = Duration::from_millis(10);
const TRYAGAIN: &str = "TRYAGAIN the slot's range is being handed over to another node; retry";

/// A request made ready to run.
enum Prepared<'a> {
    /// Answered without running: refused, queued inside MULTI, or a syntax error.
    Answered(Reply),
    /// A write to a range frozen for its hand-over (cluster mode): prepared again later.
    Frozen,
    Run {
        spec: &'static CommandSpec,
        args: &'a [Bytes],
        command: Command<'a>,
    },
}

/// Executes `requests` in order, appending each reply to `out` (which refuses a reply that
/// would pass `client-output-buffer-total-limit`). Engine calls run on this thread
/// (`thread::on_thread`: inside `block_in_place` when they may wait on the disk, or with
/// their fdatasyncs left to [`run_and_settle`]); with coalescing on, GET vectors are handed
/// to the storage thread and awaited.
pub async fn execute_run(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    requests: &[Vec<Bytes>],
    out: &mut Output<'_>,
) -> RunEnd {
    let limit = state.core.live.client_output_buffer_limit();
    // Once per run, not per request.
    let limits = Limits::of(state);
    // Cluster mode: the run holds the gate from its routing checks to its last reply, so a
    // range frozen for its hand-over has no write of this run in flight.
    let _gate = match &state.cluster {
        Some(node) => Some(node.gate.read().await),
        None => None,
    };
    let mut frozen_since: Option<Instant> = None;
    let run_started = Instant::now();
    let mut group = Vec::new();
    // A request prepared while looking for the end of a vector group, run next.
    let mut next: Option<Prepared<'_>> = None;
    let mut i = 0;
    while i < requests.len() && !session.closing {
        let paused = pause_turn(state, session, &requests[i]).await;
        let prepared = match next.take() {
            Some(p) => p,
            None => prepare(state, session, conn, &limits, &requests[i]),
        };
        let step_started = Instant::now();
        // Whether the step's requests ran (and go to the slow log if slow).
        let mut ran = true;
        let n = match prepared {
            Prepared::Answered(reply) => {
                out.reply(&reply, session.resp3);
                ran = false;
                1
            }
            Prepared::Frozen => {
                ran = false;
                let since = *frozen_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= FROZEN_WAIT_MAX {
                    out.reply(&errors::err(TRYAGAIN), session.resp3);
                    frozen_since = None;
                    1
                } else {
                    if let Some(node) = &state.cluster {
                        tokio::select! {
                            _ = node.thawed.notified() => {}
                            _ = tokio::time::sleep(FROZEN_POLL) => {}
                        }
                    }
                    // The same request is prepared again.
                    0
                }
            }
            Prepared::Run {
                command: Command::Vector(op),
                ..
            } if op.width() <= state.live.max_multikey_width() => {
                // Requests prepared here cannot change the session (only a command that is
                // no vector operation can, and it ends the group), so preparing ahead is safe.
                group.clear();
                let mix = vector::mixing(state, session.db);
                let width_max = group_width_max_of(state, op.kind);
                let mut width = op.width();
                group.push(op);
                let mut j = i + 1;
                while j < requests.len() && !paused {
                    match prepare(state, session, conn, &limits, &requests[j]) {
                        Prepared::Run {
                            command: Command::Vector(more),
                            ..
                        } if joins(op.kind, more.kind, mix)
                            && width + more.width() <= width_max =>
                        {
                            width += more.width();
                            group.push(more);
                            j += 1;
                        }
                        other => {
                            next = Some(other);
                            break;
                        }
                    }
                }
                vector::run(state, session, conn, &group, out).await;
                j - i
            }
            Prepared::Run {
                spec,
                args,
                command: Command::Keys(c),
            } if groups(state, spec) => {
                // As for a vector group, the requests prepared ahead cannot change the session.
                let mut group: Vec<atomic::KeyCommand<'_>> = vec![(spec, args, c)];
                let mut j = i + 1;
                while j < requests.len() && group.len() < state.live.max_vector_width() && !paused {
                    match prepare(state, session, conn, &limits, &requests[j]) {
                        Prepared::Run {
                            spec,
                            args,
                            command: Command::Keys(c),
                        } if groups(state, spec) => {
                            group.push((spec, args, c));
                            j += 1;
                        }
                        other => {
                            next = Some(other);
                            break;
                        }
                    }
                }
                let (db, started) = (session.db, Instant::now());
                let replies = on_thread(state, conn, |_| atomic::run_group(state, db, &group));
                account_group(state, session, &group, &replies, started);
                for reply in &replies {
                    out.reply(reply, session.resp3);
                }
                j - i
            }
            Prepared::Run { spec, args, .. } if spec.cmd == Cmd::Shutdown => {
                shutdown(state, session, conn, args, out);
                1
            }
            Prepared::Run {
                spec,
                args,
                command,
            } => {
                // EXEC is not logged (Redis logs the commands it runs).
                ran = !spec.flags.contains(Flags::SKIP_SLOWLOG);
                run_command(state, session, conn, (spec, args, command), out).await;
                1
            }
        };
        // CLIENT TRACKING's invalidations of what the step wrote follow its replies.
        session.info.pushes.deliver(out, session.receiver());
        if ran {
            slow_log(state, session, &requests[i..i + n], step_started);
        }
        if n > 0 {
            frozen_since = None;
            // A command's latency inside the server includes the commands before it in its
            // run.
            state
                .core
                .stats
                .latency(run_started.elapsed().as_micros() as u64, n as u64);
        }
        i += n;
        if out.len() > limit {
            return RunEnd::OutputLimit;
        }
    }
    RunEnd::Complete
}

/// Runs one command that is no part of a group, and writes its reply.
async fn run_command(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    (spec, args, command): (&'static CommandSpec, &[Bytes], Command<'_>),
    out: &mut Output<'_>,
) {
    let reply = on_thread(state, conn, |conn| {
        run_one(
            &mut Ctx {
                state,
                session,
                conn,
            },
            spec,
            args,
            command,
        )
    });
    // CLIENT KILL: what follows it runs once its victims are gone.
    state.core.clients.wait_gone(&mut session.killed).await;
    // CLIENT REPLY: its own reply is the first the new mode drops (OFF, SKIP).
    if let Some(mode) = session.reply_change.take() {
        out.switch(mode);
    }
    out.reply(&reply, session.resp3);
}

/// CLIENT PAUSE: waits while a pause holds the request `args`; whether one was active (then
/// the run's requests go one by one: none is grouped ahead of its wait).
async fn pause_turn(state: &ServerState, session: &Session, args: &[Bytes]) -> bool {
    let pause = &state.core.pause;
    let paused = pause.is_active();
    if paused {
        pause
            .wait(&state.core.config.rename_command, session, args)
            .await;
    }
    paused
}

/// SHUTDOWN (`cmd::persistence::shutdown`): once the server is stopping, the connection
/// closes after the replies before it are written, without a reply of its own, as Redis's
/// does.
fn shutdown(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    args: &[Bytes],
    out: &mut Output<'_>,
) {
    state.core.stats.command(Cmd::Shutdown.index(), 1, 0);
    match on_thread(state, conn, |_| cmd::persistence::shutdown(state, args)) {
        Ok(()) => session.closing = true,
        Err(reply) => out.reply(&reply, session.resp3),
    }
}

/// Offers the requests of a step that began at `started` to the slow log, each with its share
/// of the step's time (a vector's commands ran as one engine call), to MONITOR, and the step
/// to the latency monitor.
fn slow_log(state: &ServerState, session: &Session, step: &[Vec<Bytes>], started: Instant) {
    let took = started.elapsed().as_micros() as u64;
    state.core.step_took(took);
    let usec = took / step.len().max(1) as u64;
    for args in step {
        state
            .core
            .command_done(args, usec, session.db, &session.info);
    }
}

/// Most keys of a group of `kind`: `max-vector-width` (the storage vector width R: reads are
/// prefetched and probed that many at a time), but in `fsync` mode for MSETs, whose group is
/// one compound batch — two rounds of fdatasyncs per batch — as many as a combined batch
/// takes (`combine::COMBINED_KEYS_MAX`).
fn group_width_max_of(state: &ServerState, kind: Vector) -> usize {
    let max_vector_width = state.live.max_vector_width();
    match kind {
        Vector::AtomicPut if state.fsync() => max_vector_width.max(combine::COMBINED_KEYS_MAX),
        _ => max_vector_width,
    }
}

/// Whether a vector operation of kind `more` joins a group begun by one of kind `first`: one
/// of the same kind always; GETs (and MGETs) and SETs join each other's groups when `mix`
/// (`vector::mixing`) — the engine runs such a group as if one by one, so a GET after a SET
/// of its key in the pipeline still sees it.
fn joins(first: Vector, more: Vector, mix: bool) -> bool {
    let reads_or_puts = |k| matches!(k, Vector::Get | Vector::Put);
    first == more || (mix && reads_or_puts(first) && reads_or_puts(more))
}

/// Looks a request up, checks it ([`check`]), queues it inside MULTI, and parses it.
/// Refusals are counted here; nothing runs.
fn prepare<'a>(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    limits: &Limits,
    args: &'a [Bytes],
) -> Prepared<'a> {
    let spec = match check(&state.core, session, args) {
        Ok(spec) => spec,
        Err(refused) => {
            if refused.discard {
                conn.unwatch(session.id(), &state.watches);
            }
            return Prepared::Answered(refused.reply);
        }
    };
    let index = spec.cmd.index();
    let mut flush_chains = false;
    if let Some(node) = &state.cluster {
        let check = cluster::check(node, session, conn, spec, args);
        if matches!(check, cluster::Check::Wait) {
            return Prepared::Frozen;
        }
        flush_chains = matches!(check, cluster::Check::FlushChains);
        if let cluster::Check::Refuse(reply) = check {
            if spec.cmd == Cmd::Exec {
                // Redis discards a transaction whose EXEC is redirected.
                session.set_multi(None);
                conn.unwatch(session.id(), &state.watches);
            } else {
                flag_transaction(session);
            }
            state.core.stats.rejected(index);
            return Prepared::Answered(reply);
        }
    }
    if let Some(reply) = queue(session, spec, args) {
        return Prepared::Answered(reply);
    }
    if session.tracking {
        // Before the command runs: see `quiver_service::tracking`.
        state.core.tracking.before_command(session, spec, args);
    }
    match cmd::parse(spec, args, limits) {
        // Its arguments checked as the plain command's, a flush of the node's chains.
        Ok(_) if flush_chains => Prepared::Run {
            spec,
            args,
            command: Command::Server,
        },
        Ok(command) => Prepared::Run {
            spec,
            args,
            command,
        },
        Err(reply) => {
            // Parsing is part of running the command: Redis counts a syntax error as a
            // failed call.
            session.info.touch(index);
            state.core.stats.command(index, 1, 0);
            state.core.stats.failed(index, 1);
            Prepared::Answered(reply)
        }
    }
}

/// Whether a command of `spec` joins a pipeline's group of read-modify-writes run as one
/// transaction (`Vector::Txn`). Not on a cluster node: a group may span chains, and a
/// transaction's writes go down one.
fn groups(state: &ServerState, spec: &CommandSpec) -> bool {
    spec.vector == Vector::Txn && state.cluster.is_none()
}

/// Counts the commands of a group run as one transaction, its time shared out among them.
fn account_group(
    state: &ServerState,
    session: &Session,
    group: &[atomic::KeyCommand<'_>],
    replies: &[Reply],
    started: Instant,
) {
    let usec = started.elapsed().as_micros() as u64 / group.len().max(1) as u64;
    for ((spec, _, _), reply) in group.iter().zip(replies) {
        let index = spec.cmd.index();
        session.info.touch(index);
        state.core.stats.command(index, 1, usec);
        if matches!(reply, Reply::Error(_)) {
            state.core.stats.failed(index, 1);
        }
    }
}

/// Runs one command that is not part of a vector group, and counts it.
fn run_one(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &[Bytes],
    command: Command<'_>,
) -> Reply {
    let index = spec.cmd.index();
    ctx.session.info.touch(index);
    let started = Instant::now();
    let reply = match command {
        Command::Server => cmd::run_server(ctx, spec.cmd, args),
        Command::Exec => atomic::exec(ctx),
        Command::Keys(c) => atomic::run_command(ctx.state, ctx.session.db, spec, args, &*c),
        // Wider than one engine call: read (or written) through a transaction.
        Command::Vector(op) => atomic::run_command(ctx.state, ctx.session.db, spec, args, &op),
    };
    let stats = &ctx.state.core.stats;
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

/// [`execute_run`], then, on a member of replicated chains, the wait for the commit of what
/// the run wrote and of the last writes of what it read (CRAQ): only then do its replies go
/// out (`chain`).
async fn run_and_settle(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    requests: &[Vec<Bytes>],
    out: &mut Output<'_>,
) -> RunEnd {
    let (end, held) = held_for(execute_run(state, session, conn, requests, out)).await;
    // How long the run held its thread: its awaits (a combined batch's leader committing,
    // the intermediate queue) and the waits below do not.
    state.core.stats.stalls.run(held);
    if !conn.durable.is_empty() {
        // `fsync` mode: the replies wait for the run's writes to be on stable storage. If an
        // fdatasync failed they were applied but may be lost: their outcome is unknown, and
        // the connection closes without replies, as any lost connection.
        if let Err(e) = std::mem::take(&mut conn.durable).settle().await {
            tracing::warn!(client = session.id(), error = %e, "an fdatasync failed: the run's outcome is unknown");
            return RunEnd::Unresolved;
        }
    }
    let Some(node) = &state.cluster else {
        return end;
    };
    if conn.chain_keys.is_empty() && conn.barrier.is_empty() {
        return end;
    }
    let keys = std::mem::take(&mut conn.chain_keys);
    node.chains.read_barrier(&keys, &mut conn.barrier);
    if !conn.barrier.settle().await {
        return RunEnd::Unresolved;
    }
    // What the run read was current if the node still held its lease after reading it (a
    // node loses its chains only after its lease is gone): else nothing is answered.
    if !keys.is_empty() && !node.leased() {
        return RunEnd::Unresolved;
    }
    end
}

/// Runs `fut`; its output, and the time spent polling it — what it held its thread for, not
/// counting the time it waited between polls.
async fn held_for<F: Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut held = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let polled = Instant::now();
        let poll = fut.as_mut().poll(cx);
        held += polled.elapsed();
        poll
    })
    .await;
    (out, held)
}

/// A node executes its connections' runs on its store ([`crate::exec`]).
impl Service for ServerState {
    type Conn = NodeConn;

    fn core(&self) -> &Core {
        &self.core
    }

    fn execute_run<'a>(
        &'a self,
        session: &'a mut Session,
        conn: &'a mut NodeConn,
        requests: &'a [Vec<Bytes>],
        out: &'a mut Output<'_>,
    ) -> impl Future<Output = RunEnd> + Send + 'a {
        run_and_settle(self, session, conn, requests, out)
    }

    fn disconnected(&self, session: &mut Session, mut conn: NodeConn) {
        conn.unwatch(session.id(), &self.watches);
    }

    fn render_metrics(&self) -> String {
        crate::state::metrics::render(self)
    }

    fn info_parts(&self) -> InfoParts {
        crate::state::info::parts(self)
    }
}
