//! WATCH bookkeeping, as Redis's `touchWatchedKey`: every write the server makes marks the
//! clients watching the written keys, so EXEC fails even when a key was rewritten with the
//! same value. (EXEC also carries each watched key's value as a batch precondition, which
//! closes the window between its check of the mark and its commit.) The same calls tell
//! CLIENT TRACKING (`quiver_service::tracking`) which keys changed, as Redis's
//! `signalModifiedKey` does both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use quiver_service::tracking::Tracking;

/// A key in a database (SELECT's number): what is watched, and what a transaction reads.
pub type DbKey = (u32, Bytes);

/// A watching client: its id and the mark its EXEC checks.
type Watcher = (u64, Arc<AtomicBool>);

/// Who watches which key.
#[derive(Default)]
pub struct Watches {
    /// CLIENT TRACKING's table, told of every key changed (the service core's).
    tracking: Arc<Tracking>,
    /// Watchers in `by_db`; writers skip the lock entirely while it is 0.
    entries: AtomicUsize,
    /// Database -> key -> its watchers.
    by_db: Mutex<HashMap<u32, HashMap<Bytes, Vec<Watcher>>>>,
}

impl Watches {
    /// Watches that tell `tracking` of every change too.
    pub fn new(tracking: Arc<Tracking>) -> Watches {
        Watches {
            tracking,
            ..Watches::default()
        }
    }

    /// FLUSHDB or FLUSHALL happened (after the watchers of its keys were marked): every
    /// tracking client forgets every key.
    pub fn flushed(&self) {
        self.tracking.flush();
    }

    /// Client `id` watches `key`; `dirty` is set when the key is written.
    pub fn add(&self, id: u64, (db, key): DbKey, dirty: &Arc<AtomicBool>) {
        let mut map = self.by_db.lock();
        let list = map.entry(db).or_default().entry(key).or_default();
        if !list.iter().any(|(c, _)| *c == id) {
            list.push((id, dirty.clone()));
            self.entries.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Client `id` stops watching `keys`.
    pub fn remove<'a>(&self, id: u64, keys: impl Iterator<Item = &'a DbKey>) {
        let mut map = self.by_db.lock();
        for (db, key) in keys {
            let Some(keys) = map.get_mut(db) else {
                continue;
            };
            if let Some(list) = keys.get_mut(key) {
                let before = list.len();
                list.retain(|(c, _)| *c != id);
                self.entries
                    .fetch_sub(before - list.len(), Ordering::SeqCst);
                if list.is_empty() {
                    keys.remove(key);
                }
            }
            if keys.is_empty() {
                map.remove(db);
            }
        }
    }

    /// Every key someone watches in a database `wanted` picks (for FLUSHDB, FLUSHALL and
    /// SWAPDB, which mark the watchers of those that exist).
    pub fn keys_in(&self, wanted: impl Fn(u32) -> bool) -> Vec<DbKey> {
        if self.entries.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let map = self.by_db.lock();
        map.iter()
            .filter(|(db, _)| wanted(**db))
            .flat_map(|(db, keys)| keys.keys().map(|k| (*db, k.clone())))
            .collect()
    }

    /// Keys of database `db` changed (after the write is applied): their watchers are marked
    /// and their trackers told.
    pub fn touch<'a, K: AsRef<[u8]> + 'a>(
        &self,
        db: u32,
        keys: impl IntoIterator<Item = &'a K, IntoIter: Clone>,
    ) {
        let keys = keys.into_iter();
        self.tracking.invalidate(keys.clone().map(|k| k.as_ref()));
        self.mark(db, keys);
    }

    /// Keys changed, each in its database: as [`Watches::touch`].
    pub fn touch_keys<'a>(
        &self,
        keys: impl IntoIterator<Item = (u32, &'a Bytes), IntoIter: Clone>,
    ) {
        let keys = keys.into_iter();
        self.tracking
            .invalidate(keys.clone().map(|(_, k)| k.as_ref()));
        self.mark_watchers(keys);
    }

    /// Marks the watchers of `keys` (each with its database) without telling the trackers:
    /// FLUSHDB, FLUSHALL and SWAPDB, which mark the watchers of the keys that existed, as
    /// Redis's `touchAllWatchedKeysInDb`; a flush tells the trackers at once ([`Watches::flushed`]),
    /// SWAPDB does not (nor does Redis).
    pub fn mark_watchers<'a>(&self, keys: impl IntoIterator<Item = (u32, &'a Bytes)>) {
        if self.entries.load(Ordering::SeqCst) == 0 {
            return;
        }
        for (db, key) in keys {
            self.mark(db, [key]);
        }
    }

    /// Marks the watchers of every key in `keys` of database `db`.
    fn mark<'a, K: AsRef<[u8]> + 'a>(&self, db: u32, keys: impl IntoIterator<Item = &'a K>) {
        if self.entries.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.by_db.lock();
        let Some(watched) = map.get(&db) else {
            return;
        };
        for key in keys {
            if let Some(list) = watched.get(key.as_ref()) {
                for (_, dirty) in list {
                    dirty.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_marks_only_watchers_of_the_key() {
        let w = Watches::default();
        let (a, b) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        w.add(1, (0, Bytes::from("x")), &a);
        w.add(2, (0, Bytes::from("y")), &b);
        w.touch(0, [&b"x"[..]].iter());
        assert!(a.load(Ordering::SeqCst));
        assert!(!b.load(Ordering::SeqCst));
        // The same key in another database is another key.
        w.touch(1, [&b"y"[..]].iter());
        assert!(!b.load(Ordering::SeqCst));
        w.remove(2, [(0, Bytes::from("y"))].iter());
        w.touch(0, [&b"y"[..]].iter());
        assert!(!b.load(Ordering::SeqCst));
        assert_eq!(w.entries.load(Ordering::SeqCst), 1);
    }
}
