//! Routing an operation's keys to partitions of one layout version ([`inner::Table`]) and
//! checking, once their locks are held, that the partitions still own them: a split or merge
//! may have installed a new layout in between, and then the operation starts again on it.

use std::ops::Deref;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::{owns, StoreInner};
use crate::partition::{PartState, Partition};

/// Tries of one operation whose partitions a split or merge changed under it: each retry
/// means a new layout was installed since the last, which takes a copy of a whole range.
pub const ROUTE_ATTEMPTS_MAX: usize = 16;

/// Keys routed on one layout version.
pub(crate) struct Routed {
    /// The partitions involved, in lock order (ascending id).
    pub parts: Vec<Arc<Partition>>,
    /// Per key: its partition (an index into `parts`) and its slot.
    pub of_key: Vec<(usize, u16)>,
}

impl Routed {
    pub fn new<'k>(inner: &StoreInner, keys: impl Iterator<Item = (&'k [u8], KeyHash)>) -> Routed {
        let table = inner.table();
        let routes: Vec<(usize, u16)> = keys.map(|(k, h)| table.route(k, h)).collect();
        let mut positions: Vec<usize> = routes.iter().map(|r| r.0).collect();
        positions.sort_unstable();
        positions.dedup();
        let mut parts: Vec<Arc<Partition>> =
            positions.iter().map(|&p| table.parts[p].clone()).collect();
        parts.sort_unstable_by_key(|p| p.id);
        let of_key = routes
            .iter()
            .map(|&(pos, slot)| {
                let id = table.parts[pos].id;
                // `parts` holds every key's partition, sorted by id.
                (parts.partition_point(|p| p.id < id), slot)
            })
            .collect();
        Routed { parts, of_key }
    }

    /// Whether every key's partition, locked (`guards[i]` is `parts[i]`'s), still owns it.
    pub fn owned<G: Deref<Target = PartState>>(&self, guards: &[G]) -> bool {
        self.of_key.iter().all(|&(g, slot)| owns(&guards[g], slot))
    }
}

/// Counts an operation's tries on new layouts ([`ROUTE_ATTEMPTS_MAX`]).
#[derive(Default)]
pub(crate) struct RouteTries(usize);

impl RouteTries {
    /// Called when the layout changed under the operation: `Ok` to try again.
    pub fn again(&mut self) -> Result<()> {
        self.0 += 1;
        if self.0 >= ROUTE_ATTEMPTS_MAX {
            return Err(Error::Rerouted {
                attempts: ROUTE_ATTEMPTS_MAX,
            });
        }
        Ok(())
    }
}
