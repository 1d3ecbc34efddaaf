//! A group of vector operations as one engine call: `multi_get` (through the intermediate
//! queue when coalescing is on), `multi_put`, `multi_delete` or `multi_exists` for a group of
//! one kind; `multi_get_put` for GETs, MGETs and SETs mixed (a pipeline alternating reads and
//! writes stays one vector; the engine runs it as if one by one, atomically). Each command's
//! reply is built from its share of the results (`VectorOp::reply`); values of a GET or MGET
//! are encoded straight into the reply buffer.

use std::time::Instant;

use bytes::Bytes;
use quiver_store::{Access, Answer, Entry, RangeItem};

use super::atomic::KeyCommand;
use super::combine;
use crate::chain::Took;
use crate::cmd::hash::read::Found;
use crate::cmd::vector::{Results, Shape, VectorOp};
use crate::exec::thread::on_thread;
use crate::state::{NodeConn, ServerState};
use crate::store_errors::{self, store_error};
use quiver_service::errors;
use quiver_service::output::Output;
use quiver_service::reply::Reply;
use quiver_service::session::Session;
use quiver_service::table::Vector;

/// Runs `group` (non-empty, all of one kind, keys the engine accepts) and appends each
/// command's reply to `out`, in order.
pub async fn run(
    state: &ServerState,
    session: &mut Session,
    conn: &mut NodeConn,
    group: &[VectorOp<'_>],
    out: &mut Output<'_>,
) {
    let Some(first) = group.first() else {
        return;
    };
    let started = Instant::now();
    let resp3 = session.resp3;
    let db = session.db;
    if reads_hashes_among_writes(group) {
        on_thread(state, conn, |_| by_kind(state, db, group, out, resp3));
        account(state, session, group, started);
        return;
    }
    if pipelining(state, db, group) {
        on_thread(state, conn, |_| pipelined(state, db, group, out, resp3));
        account(state, session, group, started);
        return;
    }
    if group.iter().any(|op| op.kind != first.kind) {
        on_thread(state, conn, |_| mixed(state, db, group, out, resp3));
        account(state, session, group, started);
        return;
    }
    match (state.live.coalescing(), first.kind) {
        // The intermediate queue serves database 0 (other databases read directly).
        (true, Vector::Get) if db == 0 => {
            let c = &state.coalescer;
            let keys = group.iter().flat_map(|op| op.keys()).cloned().collect();
            let result = c.get(keys).await;
            get_replies(state, db, group, result, out, resp3);
        }
        (_, Vector::AtomicPut) if combine::applies(state) => {
            let pairs = group
                .iter()
                .flat_map(|op| op.pairs())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let outcome = combine::commit(state, db, pairs).await;
            conn.durable.merge(outcome.durable);
            match outcome.result {
                Ok(()) => {
                    let keys: Vec<&Bytes> = group.iter().flat_map(|op| op.keys()).collect();
                    let existed = vec![true; keys.len()];
                    write_replies(state, db, out, resp3, group, &keys, Ok(existed));
                }
                Err(refused) => failed_all(state, group, &refused, out, resp3),
            }
        }
        _ => on_thread(state, conn, |_| on_engine(state, db, group, out, resp3)),
    }
    account(state, session, group, started);
}

/// Database `db` of the store, or (none such) every command of `group` answered with why.
fn db_or_failed<'s>(
    state: &'s ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    out: &mut Output<'_>,
    resp3: bool,
) -> Option<quiver_store::Db<'s>> {
    match state.store.db(db) {
        Ok(store) => Some(store),
        Err(e) => {
            failed_all(state, group, &store_error(&e), out, resp3);
            None
        }
    }
}

/// The engine call for `group` in database `db`, and its replies.
fn on_engine(
    state: &ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    out: &mut Output<'_>,
    resp3: bool,
) {
    let Some(store) = db_or_failed(state, db, group, out, resp3) else {
        return;
    };
    let kind = group[0].kind;
    let keys: Vec<&Bytes> = group.iter().flat_map(|op| op.keys()).collect();
    state.core.stats.vector_width(keys.len() as u64);
    match kind {
        Vector::Get => {
            let result = store.multi_get_entries(&keys).map_err(|e| store_error(&e));
            get_replies(state, db, group, result, out, resp3);
        }
        Vector::Put => {
            let pairs: Vec<(&Bytes, &Bytes)> = group.iter().flat_map(|op| op.pairs()).collect();
            let items = || {
                pairs
                    .iter()
                    .map(|(k, v)| {
                        RangeItem::in_db(db, (*k).clone(), Some(Entry::lasting((*v).clone())))
                    })
                    .collect()
            };
            match replicated(state, false, items, || {
                store.multi_put(&pairs).map(|()| vec![true; keys.len()])
            }) {
                Ok(result) => write_replies(state, db, out, resp3, group, &keys, result),
                Err(refused) => failed_all(state, group, &refused, out, resp3),
            }
        }
        Vector::Delete => {
            let items = || {
                keys.iter()
                    .map(|k| RangeItem::in_db(db, (*k).clone(), None))
                    .collect()
            };
            match replicated(state, false, items, || store.multi_delete(&keys)) {
                Ok(result) => write_replies(state, db, out, resp3, group, &keys, result),
                Err(refused) => failed_all(state, group, &refused, out, resp3),
            }
        }
        Vector::AtomicPut => {
            let batch =
                combine::atomic_batch(db, keys.len(), group.iter().flat_map(|op| op.pairs()));
            let items = || crate::txn::chain_items(&batch);
            match replicated(state, true, items, || {
                state.store.apply(&batch).map(|_| vec![true; keys.len()])
            }) {
                Ok(result) => write_replies(state, db, out, resp3, group, &keys, result),
                Err(refused) => failed_all(state, group, &refused, out, resp3),
            }
        }
        Vector::Exists => match store.multi_exists(&keys) {
            Ok(found) => {
                let mut at = 0;
                let replies: Vec<Reply> = group
                    .iter()
                    .map(|op| {
                        let mine = &found[at..at + op.width()];
                        at += op.width();
                        reply_of(state, db, op, Results::Found(mine))
                    })
                    .collect();
                out.replies(&replies, resp3);
            }
            Err(e) => failed_all(state, group, &store_error(&e), out, resp3),
        },
        Vector::None | Vector::Txn => failed_all(
            state,
            group,
            &errors::err("ERR internal error: no vector operation"),
            out,
            resp3,
        ),
    }
}

/// Whether GETs and SETs of database `db` may share an engine vector (`multi_get_put`): not
/// through the intermediate queue (it serves database 0's GETs alone) and not on a node that
/// replicates chains (their writes go down the chain, their reads wait for dirty keys).
pub fn mixing(state: &ServerState, db: u32) -> bool {
    (!state.live.coalescing() || db != 0)
        && !state
            .cluster
            .as_ref()
            .is_some_and(|n| n.chains.is_replicated())
}

/// Whether `group` has reads of hashes and writes: it runs as its runs of one kind, in order
/// ([`by_kind`]), since a read that finds a large hash runs again as a transaction of its
/// own (it reads the hash's buckets), which must come before the writes after it.
fn reads_hashes_among_writes(group: &[VectorOp<'_>]) -> bool {
    group.iter().any(|op| matches!(op.shape, Shape::Hash(_)))
        && group.iter().any(|op| op.kind != Vector::Get)
}

/// Whether `group` runs as an engine pipeline (`Db::pipeline`): each partition's share
/// applied on its own, holding one partition's lock at a time. Only for commands of one key
/// each (GET, SET, DEL, UNLINK, an MGET of one key) with a write among them: a command of
/// several keys (MGET, DEL k1 k2) is atomic in Redis, so its group runs as one atomic vector;
/// GETs alone are one multi-get. Not where `mixing` rules GETs out, nor on a node that
/// replicates chains (writes go down the chain as one message).
fn pipelining(state: &ServerState, db: u32, group: &[VectorOp<'_>]) -> bool {
    let kinds_ok = group
        .iter()
        .all(|op| op.width() == 1 && matches!(op.kind, Vector::Get | Vector::Put | Vector::Delete));
    let writes = group.iter().any(|op| op.kind != Vector::Get);
    let gets = group.iter().any(|op| op.kind == Vector::Get);
    let replicated = state
        .cluster
        .as_ref()
        .is_some_and(|n| n.chains.is_replicated());
    // One command is one key, in one partition: the atomic vector is the same, and leaner.
    group.len() > 1 && kinds_ok && writes && !replicated && (!gets || mixing(state, db))
}

/// A group of single-key commands as one engine pipeline (see [`pipelining`]), and each
/// command's reply in request order: its value, its write's answer, or the error of the
/// partition's share that stopped it (the other partitions' shares apply on their own).
fn pipelined(
    state: &ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    out: &mut Output<'_>,
    resp3: bool,
) {
    let Some(store) = db_or_failed(state, db, group, out, resp3) else {
        return;
    };
    let accesses: Vec<Access<'_>> = group
        .iter()
        .map(|op| match (op.kind, op.pairs().next()) {
            (Vector::Put, Some((k, v))) => Access::Put(k, v),
            (Vector::Delete, _) => Access::Delete(op.keys().next().map_or(&[][..], |k| k)),
            _ => Access::Get(op.keys().next().map_or(&[][..], |k| k)),
        })
        .collect();
    state.core.stats.vector_width(accesses.len() as u64);
    let outcome = match store.pipeline(&accesses) {
        Ok(outcome) => outcome,
        Err(e) => return failed_all(state, group, &store_error(&e), out, resp3),
    };
    let mut failure_of: Vec<Option<usize>> = vec![None; group.len()];
    for (f, (_, stopped)) in outcome.failures.iter().enumerate() {
        for &i in stopped {
            failure_of[i] = Some(f);
        }
    }
    // Watchers of every key changed (a delete of a missing key changes nothing).
    state.watches.touch(
        db,
        group
            .iter()
            .zip(&outcome.answers)
            .filter(|(op, a)| match a {
                Some(Answer::Written { existed }) => *existed || op.kind == Vector::Put,
                _ => false,
            })
            .filter_map(|(op, _)| op.keys().next()),
    );
    let mut replies = Vec::with_capacity(group.len());
    for ((op, answer), failure) in group.iter().zip(outcome.answers).zip(failure_of) {
        replies.push(match (answer, failure) {
            (Some(Answer::Value(v)), _) => {
                state.core.stats.hit(v.is_some());
                reply_of(state, db, op, Results::Values(&[v]))
            }
            (Some(Answer::Written { existed }), _) if op.kind == Vector::Delete => {
                reply_of(state, db, op, Results::Found(&[existed]))
            }
            (Some(Answer::Written { .. }), _) => reply_of(state, db, op, Results::Written),
            (None, failure) => {
                state.core.stats.failed(op.cmd.index(), 1);
                match failure.and_then(|f| outcome.failures.get(f)) {
                    Some((e, _)) => store_error(e),
                    None => errors::err("ERR internal error: a pipeline access has no answer"),
                }
            }
        });
    }
    // One count in the shared output budget for all of them.
    out.replies(&replies, resp3);
}

/// A group of GETs, MGETs and SETs as one `multi_get_put`, and its replies in request order.
/// If the engine refuses the vector (nothing read or written: a full disk, a failed read, a
/// node that started replicating), the group runs as its runs of one kind instead, each as
/// its own vector, so every command gets the answer it would get alone.
fn mixed(state: &ServerState, db: u32, group: &[VectorOp<'_>], out: &mut Output<'_>, resp3: bool) {
    let store = match state.store.db(db) {
        Ok(store) if mixing(state, db) => store,
        _ => return by_kind(state, db, group, out, resp3),
    };
    let mut accesses = Vec::with_capacity(group.iter().map(VectorOp::width).sum());
    for op in group {
        match op.kind {
            Vector::Put => accesses.extend(op.pairs().map(|(k, v)| Access::Put(k, v))),
            _ => accesses.extend(op.keys().map(|k| Access::Get(k))),
        }
    }
    state.core.stats.vector_width(accesses.len() as u64);
    let Ok((values, written)) = store.multi_get_put(&accesses) else {
        return by_kind(state, db, group, out, resp3);
    };
    for v in &values {
        state.core.stats.hit(v.is_some());
    }
    let puts: Vec<VectorOp<'_>> = group
        .iter()
        .filter(|op| op.kind == Vector::Put)
        .copied()
        .collect();
    let put_keys: Vec<&Bytes> = puts.iter().flat_map(|op| op.keys()).collect();
    let mut put_replies = write_reply_list(state, db, &puts, &put_keys, written).into_iter();
    let mut values = values.into_iter();
    for op in group {
        match (op.kind, op.shape) {
            (Vector::Put, _) => {
                if let Some(r) = put_replies.next() {
                    out.reply(&r, resp3);
                }
            }
            (_, Shape::Values) => {
                let mine: Vec<Option<Bytes>> = values
                    .by_ref()
                    .take(op.width())
                    .map(VectorOp::values_item)
                    .collect();
                out.bulks(&mine, resp3);
            }
            _ => out.reply(
                &reply_of(state, db, op, Results::Values(&[values.next().flatten()])),
                resp3,
            ),
        }
    }
}

/// Runs `group` as its runs of consecutive operations of one kind, each one engine vector.
fn by_kind(
    state: &ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    out: &mut Output<'_>,
    resp3: bool,
) {
    let mut at = 0;
    while at < group.len() {
        let kind = group[at].kind;
        let n = group[at..].iter().take_while(|op| op.kind == kind).count();
        on_engine(state, db, &group[at..at + n], out, resp3);
        at += n;
    }
}

/// A vector of writes on a node that replicates chains goes down them
/// (`chain::Chains::write`; `atomic`: as one all-or-nothing message); `items` are its keys'
/// new states. `Err`: refused, nothing applied.
fn replicated<T>(
    state: &ServerState,
    atomic: bool,
    items: impl FnOnce() -> Vec<RangeItem>,
    apply: impl FnOnce() -> quiver_store::Result<T>,
) -> Result<quiver_store::Result<T>, Reply> {
    let Some(node) = state.cluster.as_ref().filter(|n| n.chains.is_replicated()) else {
        return Ok(apply());
    };
    node.chains
        .write(&items(), atomic, || {
            let result = apply();
            let took = Took::of(&result);
            (result, took)
        })
        .map_err(|r| Reply::error(r.to_string()))
}

/// Counts the group's calls (per command, so an UNLINK counts as UNLINK) and marks the
/// connection's last command.
fn account(state: &ServerState, session: &Session, group: &[VectorOp<'_>], started: Instant) {
    let usec = started.elapsed().as_micros() as u64;
    let n = group.len() as u64;
    let mut at = 0;
    while at < group.len() {
        let cmd = group[at].cmd;
        let run = group[at..].iter().take_while(|op| op.cmd == cmd).count();
        // The group's time is shared out by the number of commands.
        state
            .core
            .stats
            .command(cmd.index(), run as u64, usec * run as u64 / n);
        at += run;
    }
    if let Some(last) = group.last() {
        session.info.touch(last.cmd.index());
    }
}

/// Every command of the group answers `error` (the engine call failed before any effect).
fn failed_all(
    state: &ServerState,
    group: &[VectorOp<'_>],
    error: &Reply,
    out: &mut Output<'_>,
    resp3: bool,
) {
    count_failed(state, group);
    out.reply_n(error, group.len(), resp3);
}

/// Counts every command of `group` as failed (INFO commandstats).
fn count_failed(state: &ServerState, group: &[VectorOp<'_>]) {
    for op in group {
        state.core.stats.failed(op.cmd.index(), 1);
    }
}

/// `op`'s reply from its results. A read that found a large hash runs again as its own
/// transaction, which reads the hash's buckets with its metadata as one state.
fn reply_of(state: &ServerState, db: u32, op: &VectorOp<'_>, results: Results<'_>) -> Reply {
    match op.reply(results) {
        Found::Reply(reply) => reply,
        Found::Large(_) => rerun(state, db, std::slice::from_ref(op)).remove(0),
    }
}

/// `ops` run again as one transaction (a read that found a large hash reads its buckets
/// there, as one state with its metadata), each command's reply in order.
fn rerun(state: &ServerState, db: u32, ops: &[VectorOp<'_>]) -> Vec<Reply> {
    let commands: Vec<KeyCommand<'_>> = ops
        .iter()
        .map(|op| -> KeyCommand<'_> { (op.cmd.spec(), &[], Box::new(*op)) })
        .collect();
    super::atomic::run_group(state, db, &commands)
}

/// The replies of a group of GETs and MGETs from the values of all their keys. Consecutive
/// GETs go to the buffer as one batch of replies; an MGET's values are encoded straight.
fn get_replies(
    state: &ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    result: Result<Vec<Option<Entry>>, Reply>,
    out: &mut Output<'_>,
    resp3: bool,
) {
    let values = match result {
        Ok(values) => values,
        Err(e) => return failed_all(state, group, &e, out, resp3),
    };
    for v in &values {
        state.core.stats.hit(v.is_some());
    }
    // The values move into the replies (no copy, no reference count taken twice).
    let mut values = values.into_iter();
    let mut singles: Vec<Reply> = Vec::with_capacity(group.len());
    for (i, op) in group.iter().enumerate() {
        if op.shape == Shape::Values {
            if !singles.is_empty() {
                out.replies(&singles, resp3);
                singles.clear();
            }
            let mine: Vec<Option<Bytes>> = values
                .by_ref()
                .take(op.width())
                .map(VectorOp::values_item)
                .collect();
            out.bulks(&mine, resp3);
            continue;
        }
        match op.one_key_reply(values.next().flatten()) {
            Found::Reply(reply) => singles.push(reply),
            // A read that found a large hash runs again in a transaction, later than the
            // vector read: so do the commands after it, in the same transaction, so that
            // none answers from a state older than one before it did.
            Found::Large(_) => {
                singles.extend(rerun(state, db, &group[i..]));
                break;
            }
        }
    }
    if !singles.is_empty() {
        out.replies(&singles, resp3);
    }
}

/// The replies of a group of writes (SETs, or DELs and UNLINKs) in database `db`, appended
/// to `out`: see [`write_reply_list`].
fn write_replies(
    state: &ServerState,
    db: u32,
    out: &mut Output<'_>,
    resp3: bool,
    group: &[VectorOp<'_>],
    keys: &[&Bytes],
    result: quiver_store::Result<Vec<bool>>,
) {
    let replies = write_reply_list(state, db, group, keys, result);
    out.replies(&replies, resp3);
}

/// Each write command's reply, from which of its keys' writes took effect — all of them
/// (`existed`: whether each key existed before), none (the engine's error), or, after an I/O
/// error in the middle of the vector, some (an error that says so). Watchers of every key
/// changed are marked (a delete of a missing key changes nothing).
fn write_reply_list(
    state: &ServerState,
    db: u32,
    group: &[VectorOp<'_>],
    keys: &[&Bytes],
    result: quiver_store::Result<Vec<bool>>,
) -> Vec<Reply> {
    let deletes = group.first().is_some_and(|op| op.kind == Vector::Delete);
    let (applied, existed, error) = match result {
        Ok(existed) => (vec![true; keys.len()], existed, None),
        Err(quiver_store::Error::PartlyApplied {
            applied,
            existed,
            source,
        }) => (applied, existed, Some(*source)),
        Err(e) => {
            count_failed(state, group);
            return vec![store_error(&e); group.len()];
        }
    };
    state.watches.touch(
        db,
        keys.iter()
            .zip(applied.iter().zip(&existed))
            .filter(|(_, (&a, &e))| a && (e || !deletes))
            .map(|(k, _)| *k),
    );
    let mut at = 0;
    group
        .iter()
        .map(|op| {
            let n = op.width();
            let (a, e) = (&applied[at..at + n], &existed[at..at + n]);
            at += n;
            match &error {
                Some(err) if !a.iter().all(|&x| x) => {
                    state.core.stats.failed(op.cmd.index(), 1);
                    if a.iter().any(|&x| x) {
                        store_errors::partly_applied(err)
                    } else {
                        store_error(err)
                    }
                }
                _ if deletes => reply_of(state, db, op, Results::Found(e)),
                _ => reply_of(state, db, op, Results::Written),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {

    use super::*;

    use quiver_service::stats::Stats;
    use quiver_service::table::Cmd;

    fn request(args: &[&str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::from(a.to_string())).collect()
    }

    /// An I/O error stopped a pipelined vector part-way (the engine says which writes took
    /// effect): each command gets its own answer — its reply if all its writes took effect,
    /// the error if none did, "partly applied" if some did.
    #[test]
    fn a_partly_applied_vector_answers_each_command_for_itself() {
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        let requests = [
            request(&["DEL", "a", "b"]),
            request(&["DEL", "c"]),
            request(&["DEL", "d", "e"]),
        ];
        let group: Vec<VectorOp<'_>> = requests
            .iter()
            .map(|r| crate::cmd::del::del(Cmd::Del, r))
            .collect();
        let keys: Vec<&Bytes> = group.iter().flat_map(|op| op.keys()).collect();
        let result = Err(quiver_store::Error::PartlyApplied {
            applied: vec![true, true, false, true, false],
            existed: vec![true, false, true, true, true],
            source: Box::new(quiver_store::Error::NoSpace {
                path: "/x/p0001/0000000000000009.seg".into(),
            }),
        });
        let stats = Stats::default();
        let mut out = Output::new(&state.core.output_budget, &stats);
        write_replies(&state, 0, &mut out, false, &group, &keys, result);
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
