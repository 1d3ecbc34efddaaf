//! A node leaving a replicated cluster gracefully (`quiver cluster remove-node` with
//! replicas): FAWN-KV's leave, member by member, never below `replicas` copies.
//!
//! 1. [`Topology::with_leaving`] marks the node leaving.
//! 2. Each chain it is in wants a member (`Topology::wants_member`): the manager picks a
//!    replacement that stays and is in the fewest chains, which joins as the chain's tail the
//!    usual way (`with_joins`; the tail streams the range to it while the chain serves), so
//!    the chain briefly has `replicas + 1` members.
//! 3. A leaving head hands its role over to the next member that stays (`topology::heads`:
//!    freeze, drain to committed, a new version).
//! 4. `Topology::with_spliced` (`topology::reshape`, which treats a leaving member as any
//!    member on its way out) splices the leaving node out of every chain where it is no
//!    longer the head and the chain has more members than it keeps, at a new version: its
//!    predecessor sends what it has not seen committed to its new successor, as when a
//!    middle fails — nothing acknowledged depended on the leaving node alone.
//! 5. Once it is in no chain, `without_node` removes it.
//!
//! The copies never drop below `replicas`: the node leaves a chain only after its
//! replacement joined it.

use super::{Shard, Topology, TopologyError};

impl Topology {
    pub fn is_leaving(&self, id: &str) -> bool {
        self.leaving.iter().any(|l| l == id)
    }

    /// Members each chain keeps: `replicas`, or every node that stays when there are fewer.
    pub(super) fn copies(&self) -> usize {
        let staying = self.nodes.len().saturating_sub(self.leaving.len());
        (self.replicas as usize).min(staying)
    }

    /// The next version with node `id` leaving. Refused when the nodes that stay could not
    /// keep `replicas` copies of every range, and without replicas (ranges move away with
    /// `move-slots` there).
    pub fn with_leaving(&self, id: &str) -> Result<Topology, TopologyError> {
        self.node_index(id)?;
        if self.replicas < 2 {
            return Err(TopologyError::Refused(
                "without replicas a node leaves by moving its slots away".into(),
            ));
        }
        let staying = self
            .nodes
            .len()
            .saturating_sub(self.leaving.len() + usize::from(!self.is_leaving(id)));
        if staying < self.replicas as usize {
            return Err(TopologyError::Refused(format!(
                "removing node {id} would leave {staying} nodes for chains of {}",
                self.replicas
            )));
        }
        let mut t = self.next();
        if !t.is_leaving(id) {
            t.leaving.push(id.to_string());
        }
        t.validate()?;
        Ok(t)
    }

    /// The member a leaving head of chain `s` hands its role to: the next one that stays.
    pub(super) fn successor_staying(&self, s: &Shard) -> Option<String> {
        s.chain[1..].iter().find(|m| !self.is_leaving(m)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::tests::nodes;
    use super::*;

    fn alive(t: &Topology) -> HashMap<String, u64> {
        t.nodes.iter().map(|n| (n.id.clone(), n.run)).collect()
    }

    /// A node leaves a 4-node cluster of chains of 3: every chain it is in gets a replacement
    /// first (4 members), its head role goes to the next member, then it is spliced out; the
    /// copies never drop below 3, and it ends in no chain.
    #[test]
    fn a_leaving_node_is_replaced_before_it_leaves_each_chain() {
        let t = Topology::create(nodes(4), 3).unwrap();
        assert!(t.with_leaving("n9").is_err());
        let mut t = t.with_leaving("n0").unwrap();
        assert!(t.is_leaving("n0"));
        let mine: Vec<usize> = (0..t.shards.len())
            .filter(|&i| t.shards[i].position("n0").is_some())
            .collect();
        assert_eq!(mine.len(), 3);
        // Nothing to splice before the replacements joined.
        assert!(t.with_spliced().is_none());
        let (joined, chosen) = t.with_joins(&alive(&t)).unwrap();
        assert!(chosen.iter().all(|c| c != "n0"), "{chosen:?}");
        t = joined;
        for (slots, id, _) in t.clone().joins() {
            t = t.with_tail(slots, id).unwrap();
        }
        // Another round for the chains whose replacement was taken by another join.
        while let Some((joined, _)) = t.with_joins(&alive(&t)) {
            t = joined;
            for (slots, id, _) in t.clone().joins() {
                t = t.with_tail(slots, id).unwrap();
            }
        }
        for &i in &mine {
            assert_eq!(t.shards[i].chain.len(), 4, "{:?}", t.shards[i]);
        }
        // The head hands over first (heads::head_handoff), then every chain is spliced.
        while let Some((slots, to)) = t.head_handoff("n0") {
            assert_ne!(to, "n0");
            t = t.with_head(slots, &to).unwrap();
        }
        t = t.with_spliced().unwrap();
        for s in &t.shards {
            assert_eq!(s.chain.len(), 3, "{s:?}");
            assert!(s.position("n0").is_none(), "{s:?}");
        }
        t = t.without_node("n0").unwrap();
        assert!(t.leaving.is_empty() && t.validate().is_ok());
    }

    #[test]
    fn a_leave_that_would_leave_too_few_nodes_is_refused() {
        let t = Topology::create(nodes(3), 3).unwrap();
        assert!(t.with_leaving("n0").is_err());
        let plain = Topology::create(nodes(3), 1).unwrap();
        assert!(plain.with_leaving("n0").is_err());
    }
}
