//! The reclaimer of large hashes that are gone (`quiver_store::large_hash`, "anchors"). A
//! large hash can go without a hash command seeing it — DEL, UNLINK, an expiry, SET over it,
//! FLUSHDB, RENAME onto it (FLUSHALL empties the hidden databases too) — and leaves its
//! buckets and its anchor behind, unread (its generation is never used again). Every [`RECLAIM_EVERY`] the node
//! walks the anchors and, for each whose key holds no metadata of its generation in any
//! database, deletes its buckets and then the anchor.
//!
//! On a cluster node only the head of the hash's chain reclaims, and its deletions go down
//! the chain as every write does (`reclaim_here`).
//!
//! Safety: the check and the deletions are one transaction, whose commit finds every read
//! unchanged — the anchor, and the key absent (or something else) in each database — or
//! applies nothing, so a hash renamed (its anchor rewritten), moved or swapped to another
//! database meanwhile is never taken for gone. Once gone a generation stays gone, so a
//! hash's buckets are deleted in several transactions (each checks again), the anchor last:
//! a crash between leaves the anchor for the next pass.

use std::time::Duration;

use bytes::Bytes;
use quiver_store::large_hash::{Anchor, HashValue, ANCHORS_DB, BUCKETS_DB};
use quiver_store::Entry;
use tokio::sync::watch;

use crate::cluster::Route;
use crate::state::{ServerState, SharedState};
use crate::txn::{Commit, Txn};

/// How often the reclaimer runs.
pub const RECLAIM_EVERY: Duration = Duration::from_secs(10);
/// Anchors one pass reads at most (the next pass goes on from there), and per scan page.
const ANCHORS_PER_PASS: usize = 1024;
const ANCHORS_PER_PAGE: usize = 128;
/// Scan pages one pass reads at most (a page may come back empty).
const PAGES_PER_PASS: usize = 64;
/// Buckets one transaction of the reclaimer deletes at most.
const BUCKETS_PER_TXN: u32 = 512;

/// What a pass reclaimed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    pub hashes: u64,
    pub buckets: u64,
}

/// Runs a pass every [`RECLAIM_EVERY`] until `shutdown` changes.
pub async fn run(state: SharedState, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(RECLAIM_EVERY);
    let mut cursor = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let s = state.clone();
        match tokio::task::spawn_blocking(move || pass(&s, cursor)).await {
            Ok(Ok((next, done))) => {
                cursor = next;
                if done.hashes > 0 {
                    tracing::info!(
                        hashes = done.hashes,
                        buckets = done.buckets,
                        "reclaimed large hashes that are gone"
                    );
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "reclaiming large hashes failed"),
            Err(_) => return,
        }
    }
}

/// One pass over at most [`ANCHORS_PER_PASS`] anchors from `cursor` (a scan cursor of the
/// anchors' database); returns the cursor to go on from (0: the walk is complete) and what
/// it reclaimed.
pub fn pass(state: &ServerState, mut cursor: u64) -> quiver_store::Result<(u64, Reclaimed)> {
    let anchors = state.store.db(ANCHORS_DB)?;
    let mut done = Reclaimed::default();
    let mut read = 0;
    for _ in 0..PAGES_PER_PASS {
        let page = anchors.scan(cursor, None, ANCHORS_PER_PAGE)?;
        for key in &page.keys {
            if let Some(buckets) = reclaim_here(state, key)? {
                done.hashes += 1;
                done.buckets += buckets;
            }
        }
        read += page.keys.len();
        cursor = page.cursor;
        if cursor == 0 || read >= ANCHORS_PER_PASS {
            break;
        }
    }
    Ok((cursor, done))
}

/// [`reclaim`] where this node may write the anchor's slot. On a cluster node that is a
/// slot whose chain it heads and that is not frozen (an importing range's anchor may arrive
/// before its hash, a replica's chain writes come from its head): the node's gate is held
/// meanwhile, so that no hand-over freezes the slot between the check and the commit. The
/// anchor's key routes by its `{tag}`, the hash's slot.
fn reclaim_here(state: &ServerState, key: &Bytes) -> quiver_store::Result<Option<u64>> {
    let Some(node) = &state.cluster else {
        return reclaim(state, key);
    };
    let _gate = node.gate.blocking_read();
    match node.route([&key[..]], true, false) {
        Route::Local => reclaim(state, key),
        _ => Ok(None),
    }
}

/// Deletes the buckets and the anchor at `key` if its hash is gone; how many buckets (`None`:
/// the hash is there, the anchor went meanwhile, or a conflict left it for the next pass).
fn reclaim(state: &ServerState, key: &Bytes) -> quiver_store::Result<Option<u64>> {
    let mut from = 0u32;
    let mut deleted = 0u64;
    // Bounded: each round deletes up to BUCKETS_PER_TXN of the anchor's buckets, or stops.
    loop {
        let mut txn = Txn::new(state, 0);
        let Some(anchor) = gone(&mut txn, key)? else {
            return Ok(None);
        };
        let to = anchor.buckets.min(from.saturating_add(BUCKETS_PER_TXN));
        let keys: Vec<Bytes> = (from..to).map(|n| anchor.bucket_key(n)).collect();
        txn.prefetch(BUCKETS_DB, keys.iter())?;
        for k in keys {
            if txn.get_entry_in(BUCKETS_DB, &k)?.is_some() {
                txn.delete_in(BUCKETS_DB, k);
                deleted += 1;
            }
        }
        if to == anchor.buckets {
            txn.delete_in(ANCHORS_DB, key.clone());
        }
        if txn.commit(&[])? != Commit::Applied {
            return Ok(None);
        }
        if to == anchor.buckets {
            return Ok(Some(deleted));
        }
        from = to;
    }
}

/// The anchor at `key` if its hash is gone: no database holds metadata of its generation at
/// its key (read through `txn`, so that its commit finds all of it unchanged).
fn gone(txn: &mut Txn<'_>, key: &Bytes) -> quiver_store::Result<Option<Anchor>> {
    let Some(entry) = txn.get_entry_in(ANCHORS_DB, key)? else {
        return Ok(None);
    };
    // What is no anchor is left alone (the checker reports damage).
    let Some(anchor) = Anchor::decode(key, &entry.value) else {
        return Ok(None);
    };
    for db in 0..txn.databases() {
        let found = txn.get_entry_in(db, &anchor.parent)?;
        if holds(found.as_ref(), anchor.generation) {
            return Ok(None);
        }
    }
    Ok(Some(anchor))
}

/// Whether `found` is a large hash of `generation`.
fn holds(found: Option<&Entry>, generation: u64) -> bool {
    matches!(
        found.map(Entry::hash_value),
        Some(Ok(HashValue::Large(meta))) if meta.generation == generation
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::common::{Limits, TxnCommand};
    use crate::cmd::databases::Move;
    use crate::cmd::hash::write::HSet;
    use crate::cmd::hash::{read_hash, Hash};
    use crate::cmd::rename::{Copy, Rename};
    use crate::exec::atomic::run_command;
    use quiver_service::reply::Reply;
    use quiver_service::table::Cmd;

    const FIELDS: usize = 600;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn limits() -> Limits {
        Limits {
            value_len_max: 1 << 20,
            databases: 16,
        }
    }

    fn run(state: &ServerState, db: u32, cmd: Cmd, a: &[Bytes], c: &dyn TxnCommand) -> Reply {
        run_command(state, db, cmd.spec(), a, c)
    }

    /// A hash of FIELDS fields at `key` of `db`: large (past the listpack's 512).
    fn large_hash(state: &ServerState, db: u32, key: &str) {
        let mut words = vec!["HSET".to_string(), key.to_string()];
        for i in 0..FIELDS {
            words.extend([format!("f{i}"), format!("{key}.{i}")]);
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let a = args(&words);
        let hset = HSet::parse(Cmd::HSet, &a).unwrap();
        assert_eq!(
            run(state, db, Cmd::HSet, &a, &hset),
            Reply::Integer(FIELDS as i64)
        );
    }

    /// Every field of the hash at `key` of `db`, as written by [`large_hash`] from `origin`.
    fn assert_whole(state: &ServerState, db: u32, key: &str, origin: &str) {
        let mut txn = Txn::new(state, db);
        let key = Bytes::copy_from_slice(key.as_bytes());
        let entry = read_hash(&mut txn, &key).unwrap();
        assert!(matches!(
            entry.as_ref().map(Entry::hash_value),
            Some(Ok(HashValue::Large(m))) if m.count == FIELDS as u64
        ));
        let names: Vec<String> = (0..FIELDS).map(|i| format!("f{i}")).collect();
        let mut hash =
            Hash::of(&mut txn, entry.as_ref(), names.iter().map(|f| f.as_bytes())).unwrap();
        for (i, f) in names.iter().enumerate() {
            let v = hash.get(&mut txn, f.as_bytes()).unwrap();
            assert_eq!(v.as_deref(), Some(format!("{origin}.{i}").as_bytes()));
        }
    }

    fn hidden(state: &ServerState) -> (u64, u64) {
        let count = |db| state.store.db(db).unwrap().len();
        (count(ANCHORS_DB), count(BUCKETS_DB))
    }

    /// Gone by DEL, by SET over it, by FLUSHDB: reclaimed, anchor and buckets; renamed, moved
    /// and swapped to another database, or copied before its source went: kept whole.
    #[test]
    fn the_buckets_of_gone_hashes_are_reclaimed_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let state = ServerState::for_tests(dir.path());
        for key in ["deleted", "overwritten", "renamed", "moved", "copied"] {
            large_hash(&state, 0, key);
        }
        let (anchors, buckets) = hidden(&state);
        assert_eq!(anchors, 5);
        assert!(buckets >= 5, "{buckets} buckets");
        assert_eq!(pass(&state, 0).unwrap(), (0, Reclaimed::default()));

        let db0 = state.store.db(0).unwrap();
        assert!(db0.delete(b"deleted").unwrap());
        db0.put(b"overwritten", b"a string").unwrap();
        let a = args(&["RENAME", "renamed", "renamed.2"]);
        let rename = Rename::parse(Cmd::Rename, &a).unwrap();
        assert_eq!(run(&state, 0, Cmd::Rename, &a, &rename), Reply::OK);
        let a = args(&["MOVE", "moved", "1"]);
        let mv = Move::parse(&a, &limits()).unwrap();
        assert_eq!(run(&state, 0, Cmd::Move, &a, &mv), Reply::Integer(1));
        state.store.swap_dbs(1, 2).unwrap();
        let a = args(&["COPY", "copied", "copied.2"]);
        let copy = Copy::parse(&a, &limits()).unwrap();
        assert_eq!(run(&state, 0, Cmd::Copy, &a, &copy), Reply::Integer(1));
        assert!(db0.delete(b"copied").unwrap());

        let (_, done) = pass(&state, 0).unwrap();
        assert_eq!(done.hashes, 3, "deleted, overwritten, copied");
        assert!(done.buckets >= 3);
        assert_eq!(hidden(&state).0, 3);
        assert_whole(&state, 0, "renamed.2", "renamed");
        assert_whole(&state, 2, "moved", "moved");
        assert_whole(&state, 0, "copied.2", "copied");
        assert_eq!(pass(&state, 0).unwrap(), (0, Reclaimed::default()));

        state.store.flush_db(0).unwrap();
        state.store.flush_db(2).unwrap();
        let (_, done) = pass(&state, 0).unwrap();
        assert_eq!(done.hashes, 3);
        assert_eq!(hidden(&state), (0, 0), "every anchor and bucket reclaimed");
    }
}
