//! The names of the keys the expiry sweep (`sweep`) deleted, kept for whoever asked
//! (`Store::report_expired`): a server whose clients cache keys must tell them a key expired,
//! as Redis does.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

/// Most swept keys kept for [`ExpiredKeys::take`]; past it the report says some were lost.
pub const EXPIRED_KEPT_MAX: usize = 65_536;

/// The names of the keys the sweep deleted, for whoever asked (`Store::report_expired`: a
/// server whose clients cache keys and must hear that one expired, as Redis tells them).
#[derive(Default)]
pub(crate) struct ExpiredKeys {
    wanted: AtomicBool,
    keys: Mutex<VecDeque<Vec<u8>>>,
    /// Keys went unreported since the last `take` (the list was full).
    lost: AtomicBool,
}

impl ExpiredKeys {
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Starts or stops keeping the names (stopping forgets those kept).
    pub fn set_wanted(&self, on: bool) {
        if self.wanted.swap(on, Ordering::Relaxed) && !on {
            self.keys.lock().clear();
            self.lost.store(false, Ordering::Relaxed);
        }
    }

    /// Keeps `names` (nothing unless wanted).
    pub fn add<'k>(&self, names: impl Iterator<Item = &'k [u8]>) {
        if !self.wanted() {
            return;
        }
        let mut keys = self.keys.lock();
        for name in names {
            if keys.len() >= EXPIRED_KEPT_MAX {
                self.lost.store(true, Ordering::Relaxed);
                return;
            }
            keys.push_back(name.to_vec());
        }
    }

    /// The names kept since the last call, and whether any were lost meanwhile.
    pub fn take(&self) -> (Vec<Vec<u8>>, bool) {
        let keys = self.keys.lock().drain(..).collect();
        (keys, self.lost.swap(false, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swept_names_are_kept_only_while_wanted_and_bounded() {
        let e = ExpiredKeys::default();
        e.add([&b"a"[..]].into_iter());
        e.set_wanted(true);
        e.add([&b"b"[..]].into_iter());
        assert_eq!(e.take(), (vec![b"b".to_vec()], false));
        let many = vec![b"k".to_vec(); EXPIRED_KEPT_MAX + 1];
        e.add(many.iter().map(|k| &k[..]));
        let (kept, lost) = e.take();
        assert_eq!((kept.len(), lost), (EXPIRED_KEPT_MAX, true));
        assert_eq!(e.take(), (Vec::new(), false));
        e.add([&b"c"[..]].into_iter());
        e.set_wanted(false);
        assert_eq!(e.take(), (Vec::new(), false));
    }
}
