//! Databases (Redis's SELECT): each logical database `db` is a key namespace of the store, and
//! its keys' records carry the namespace id (`ext.namespace`, hashed with the key). Which
//! namespace a database reads is a mapping kept in the store's metadata (`QUIVER`), so:
//!
//! - **SWAPDB a b** swaps two entries of the mapping: one metadata write, no key is copied.
//! - **FLUSHDB** points the database at a fresh namespace, never used before: one metadata
//!   write; the old namespace is mapped by no database any more, so its records are dead —
//!   replay skips them, compaction drops them (and their index entries) — and, since ids are
//!   never reused, they can never come back.
//!
//! Database `d` starts as namespace `d` (so database 0 is namespace 0, written as no field at
//! all); fresh namespaces are numbered from [`DATABASES_MAX`] up. Only entries that differ from
//! that start are written to the metadata.
//!
//! A change of the mapping takes every partition's write lock and gives each the new mapping
//! (`PartState::dbs`) along with the store's table: an operation takes its namespace from a
//! partition it holds locked, so it sees the mapping before the change or after it, whole.
//! (Routing depends on a key's slot only, so a namespace that changed between the routing and
//! the locks only means hashing the keys again.)

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Most databases a store can address (Redis's `databases` setting is bounded by it).
pub const DATABASES_MAX: u32 = 1024;

/// Which namespace each database reads, and which namespaces are live.
#[derive(Clone, Debug)]
pub(crate) struct DbMap {
    /// Namespace of database `d` (index `d`), for every `d < DATABASES_MAX`.
    ns_of_db: Vec<u32>,
    /// Namespace -> database, for every live namespace. Asked for every record a compaction
    /// scans (`is_live`): hashed with foldhash, not SipHash (a fiftieth of a compaction).
    db_of_ns: HashMap<u32, u32, foldhash::fast::RandomState>,
    /// The id the next FLUSHDB gives its database.
    next_ns: u32,
}

impl DbMap {
    /// Every database on its own namespace (a new store).
    pub fn identity() -> DbMap {
        DbMap::with(ns_start(), DATABASES_MAX)
    }

    /// The mapping whose non-identity entries are `entries` (db, namespace).
    pub fn from_entries(entries: &[(u32, u32)], next_ns: u32) -> Result<DbMap> {
        let next_ns = next_ns.max(DATABASES_MAX);
        let mut ns_of_db = ns_start();
        for &(db, ns) in entries {
            if db >= DATABASES_MAX || ns >= next_ns {
                return Err(Error::InvalidOptions(format!(
                    "database {db} -> namespace {ns}: out of range"
                )));
            }
            ns_of_db[db as usize] = ns;
        }
        let m = DbMap::with(ns_of_db, next_ns);
        if m.db_of_ns.len() != m.ns_of_db.len() {
            return Err(Error::InvalidOptions(
                "two databases are mapped to one namespace".into(),
            ));
        }
        Ok(m)
    }

    fn with(ns_of_db: Vec<u32>, next_ns: u32) -> DbMap {
        let db_of_ns = ns_of_db
            .iter()
            .enumerate()
            .map(|(db, &ns)| (ns, db as u32))
            .collect();
        DbMap {
            ns_of_db,
            db_of_ns,
            next_ns,
        }
    }

    /// The namespace database `db` reads (`db < DATABASES_MAX`, checked by `Store::db`).
    #[inline]
    pub fn ns(&self, db: u32) -> u32 {
        self.ns_of_db[db as usize]
    }

    /// The database reading namespace `ns`; `None`: the namespace is dead (flushed).
    #[inline]
    pub fn db_of(&self, ns: u32) -> Option<u32> {
        self.db_of_ns.get(&ns).copied()
    }

    #[inline]
    pub fn is_live(&self, ns: u32) -> bool {
        self.db_of(ns).is_some()
    }

    /// The mapping after SWAPDB a b.
    pub fn swapped(&self, a: u32, b: u32) -> DbMap {
        let mut m = self.clone();
        m.ns_of_db.swap(a as usize, b as usize);
        m.db_of_ns.insert(m.ns_of_db[a as usize], a);
        m.db_of_ns.insert(m.ns_of_db[b as usize], b);
        m
    }

    /// The mapping after FLUSHDB of `db`: a fresh namespace for it; returns the old one too.
    pub fn flushed(&self, db: u32) -> Result<(DbMap, u32)> {
        let old = self.ns(db);
        let fresh = self.next_ns;
        let next_ns = fresh.checked_add(1).ok_or_else(|| {
            Error::InvalidOptions("every namespace id has been used: FLUSHALL first".into())
        })?;
        let mut m = self.clone();
        m.ns_of_db[db as usize] = fresh;
        m.db_of_ns.remove(&old);
        m.db_of_ns.insert(fresh, db);
        m.next_ns = next_ns;
        Ok((m, old))
    }

    /// The metadata lines of the mapping (only entries that differ from the start).
    pub fn to_meta(&self) -> String {
        let mut s = String::new();
        if self.next_ns > DATABASES_MAX {
            s.push_str(&format!("next-namespace {}\n", self.next_ns));
        }
        for (db, &ns) in self.ns_of_db.iter().enumerate() {
            if ns != db as u32 {
                s.push_str(&format!("database {db} namespace {ns}\n"));
            }
        }
        s
    }
}

/// One database's figures, summed over the partitions.
#[derive(Clone, Copy, Default)]
pub(crate) struct Figures {
    pub keys: u64,
    pub expiring_keys: u64,
    /// Sum of the expiring keys' remaining times (ms).
    pub ttl_sum: u128,
}

impl Figures {
    pub fn add(&mut self, o: Figures) {
        self.keys += o.keys;
        self.expiring_keys += o.expiring_keys;
        self.ttl_sum += o.ttl_sum;
    }

    pub fn avg_ttl_ms(&self) -> u64 {
        self.ttl_sum
            .checked_div(self.expiring_keys as u128)
            .map_or(0, |v| v as u64)
    }
}

/// Database `d` on namespace `d`, for every database: where a store starts.
fn ns_start() -> Vec<u32> {
    (0..DATABASES_MAX).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_and_flush_keep_one_namespace_per_database() {
        let m = DbMap::identity();
        assert_eq!((m.ns(0), m.ns(3)), (0, 3));
        assert_eq!(m.to_meta(), "");
        let m = m.swapped(0, 3);
        assert_eq!(
            (m.ns(0), m.ns(3), m.db_of(0), m.db_of(3)),
            (3, 0, Some(3), Some(0))
        );
        let (m, old) = m.flushed(3).unwrap();
        assert_eq!(old, 0);
        assert_eq!(m.ns(3), DATABASES_MAX);
        assert!(!m.is_live(0));
        assert_eq!(m.db_of(DATABASES_MAX), Some(3));
        let text = m.to_meta();
        assert_eq!(
            text,
            format!(
                "next-namespace {}\ndatabase 0 namespace 3\ndatabase 3 namespace {DATABASES_MAX}\n",
                DATABASES_MAX + 1
            )
        );
        let back = DbMap::from_entries(&[(0, 3), (3, DATABASES_MAX)], DATABASES_MAX + 1).unwrap();
        assert_eq!(back.ns_of_db, m.ns_of_db);
        assert!(DbMap::from_entries(&[(0, 3)], DATABASES_MAX).is_err());
    }
}
