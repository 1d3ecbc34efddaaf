//! WATCH bookkeeping, as Redis's `touchWatchedKey`: every write the server makes marks the
//! clients watching the written keys, so EXEC fails even when a key was rewritten with the
//! same value. (EXEC also carries each watched key's value as a batch precondition, which
//! closes the window between its check of the mark and its commit.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

/// A watching client: its id and the mark its EXEC checks.
type Watcher = (u64, Arc<AtomicBool>);

/// Who watches which key.
#[derive(Default)]
pub struct Watches {
    /// Entries in `by_key`; writers skip the lock entirely while it is 0.
    entries: AtomicUsize,
    by_key: Mutex<HashMap<Bytes, Vec<Watcher>>>,
}

impl Watches {
    /// Client `id` watches `key`; `dirty` is set when the key is written.
    pub fn add(&self, id: u64, key: Bytes, dirty: &Arc<AtomicBool>) {
        let mut map = self.by_key.lock();
        let list = map.entry(key).or_default();
        if !list.iter().any(|(c, _)| *c == id) {
            list.push((id, dirty.clone()));
            self.entries.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Client `id` stops watching `keys`.
    pub fn remove<'a>(&self, id: u64, keys: impl Iterator<Item = &'a Bytes>) {
        let mut map = self.by_key.lock();
        for key in keys {
            if let Some(list) = map.get_mut(key) {
                let before = list.len();
                list.retain(|(c, _)| *c != id);
                self.entries
                    .fetch_sub(before - list.len(), Ordering::SeqCst);
                if list.is_empty() {
                    map.remove(key);
                }
            }
        }
    }

    /// Every key someone watches (for FLUSHALL, which marks the watchers of those that
    /// existed).
    pub fn keys(&self) -> Vec<Bytes> {
        if self.entries.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.by_key.lock().keys().cloned().collect()
    }

    /// Marks the watchers of every key in `keys`. Called after the write is applied.
    pub fn touch<'a, K: AsRef<[u8]> + 'a>(&self, keys: impl IntoIterator<Item = &'a K>) {
        if self.entries.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.by_key.lock();
        for key in keys {
            if let Some(list) = map.get(key.as_ref()) {
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
        w.add(1, Bytes::from("x"), &a);
        w.add(2, Bytes::from("y"), &b);
        w.touch([&b"x"[..]].iter());
        assert!(a.load(Ordering::SeqCst));
        assert!(!b.load(Ordering::SeqCst));
        w.remove(2, [Bytes::from("y")].iter());
        w.touch([&b"y"[..]].iter());
        assert!(!b.load(Ordering::SeqCst));
        assert_eq!(w.entries.load(Ordering::SeqCst), 1);
    }
}
