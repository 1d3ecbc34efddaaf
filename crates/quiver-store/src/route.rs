//! Routing an operation's keys to partitions of one layout version ([`inner::Table`]) and
//! checking, once their locks are held, that the partitions still own them: a split or merge
//! may have installed a new layout in between, and then the operation starts again on it.

use std::ops::Deref;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::hash::KeyHash;
use crate::inner::{owns, Table};
use crate::partition::{PartState, Partition};

/// Tries of one operation whose partitions a split or merge changed under it: each retry
/// means a new layout was installed since the last, which takes a copy of a whole range.
pub const ROUTE_ATTEMPTS_MAX: usize = 16;

/// Keys routed on one layout version.
pub(crate) struct Routed {
    pub table: Arc<Table>,
    /// The positions (in `table.parts`) of the partitions involved, in lock order (ascending
    /// id).
    pub order: Vec<usize>,
    /// Per key: its partition (an index into `order`) and its slot.
    pub of_key: Vec<(usize, u16)>,
}

impl Routed {
    pub fn new<'k>(table: Arc<Table>, keys: impl Iterator<Item = (&'k [u8], KeyHash)>) -> Routed {
        let mut of_key: Vec<(usize, u16)> = keys.map(|(k, h)| table.route(k, h)).collect();
        let mut order: Vec<usize> = of_key.iter().map(|r| r.0).collect();
        order.sort_unstable();
        order.dedup();
        order.sort_unstable_by_key(|&p| table.parts[p].id);
        // Position -> index in `order`: a scan of a few entries (a vector touches at most
        // every partition), cheaper than a map for the widths that matter.
        for r in &mut of_key {
            r.0 = order.iter().position(|&p| p == r.0).unwrap_or(0);
        }
        Routed {
            table,
            order,
            of_key,
        }
    }

    /// The `i`th partition involved (in lock order).
    pub fn part(&self, i: usize) -> &Arc<Partition> {
        &self.table.parts[self.order[i]]
    }

    /// The partitions involved, in lock order.
    pub fn parts(&self) -> impl Iterator<Item = &Arc<Partition>> {
        self.order.iter().map(|&p| &self.table.parts[p])
    }

    /// Whether every key's partition, locked (`guards[i]` is `part(i)`'s), still owns it.
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
