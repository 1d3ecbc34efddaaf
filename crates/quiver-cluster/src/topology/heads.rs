//! Head balance: which chain a node should hand its head role over, and the topology after
//! the hand-over.
//!
//! A restarted node rejoins every chain as its tail, so after kills and restarts the heads —
//! which take every write of their chains — pile onto the nodes that stayed up (the chain
//! kill loop saw one node head all three chains in 998 of 1000 cycles). Once the cluster is
//! whole (every chain at its full length, no join and no move in flight, no node expelled),
//! a node heading more than `ceil(chains / nodes)` chains hands one over to the member of it
//! that heads the fewest slots, as long as that one then heads fewer slots than the giver
//! had: each hand-over lowers the sum of squares of what the nodes head, so they end, and
//! with chains of equal ranges (the pile-up after restarts) they end with every node at
//! most at the bound. Counting the slots too keeps ranges where the operator put them: a
//! rebalanced node heading several small chains that are together its share keeps them,
//! and so does one given a range by `move-slots` (`topology::reshape`).
//!
//! A leaving node (`topology::leave`) hands each chain it heads to the next member that
//! stays, whether the cluster is whole or not.
//!
//! The head drives the hand-over (`quiver-node`'s `agent::drained`): it freezes the chain's
//! writes, waits until everything it applied is committed — every member then holds the same
//! messages, so any order of them is a valid chain — and writes [`Topology::with_head`]:
//! the new head first, the others in their order, at a new version (which fences the old
//! head's messages).

use quiver_resp::slot::SlotRange;

use super::{Topology, TopologyError, EXPELLED};

impl Topology {
    /// The most chains one node should head once the cluster is whole: `ceil(chains /
    /// nodes)`.
    pub fn heads_max(&self) -> usize {
        self.shards.len().div_ceil(self.nodes.len().max(1))
    }

    /// How many chains node `id` heads.
    pub fn heads_of(&self, id: &str) -> usize {
        self.shards.iter().filter(|s| s.owner() == id).count()
    }

    /// How many slots node `id` heads (its share of the writes).
    pub fn headed_slots(&self, id: &str) -> u32 {
        self.shards
            .iter()
            .filter(|s| s.owner() == id)
            .map(|s| s.slots.len())
            .sum()
    }

    /// Whether every chain has its full length (`replicas`, or every node when there are
    /// fewer), nothing joins, moves or leaves, and no node is expelled: when heads may be
    /// moved for balance.
    pub fn is_whole(&self) -> bool {
        let full = (self.replicas as usize).min(self.nodes.len());
        self.replicas > 1
            && self.migrations.is_empty()
            && self.leaving.is_empty()
            && self.targets.is_empty()
            && self.nodes.iter().all(|n| n.run != EXPELLED)
            && self
                .shards
                .iter()
                .all(|s| s.chain.len() == full && s.joining.is_none())
    }

    /// The chain node `id` should hand its head role over, and to whom (see the module
    /// documentation; a head on the way of a target: `topology::reshape`); `None` when it
    /// heads no more than [`Topology::heads_max`] chains, or the cluster is not whole.
    pub fn head_handoff(&self, id: &str) -> Option<(SlotRange, String)> {
        if self.is_leaving(id) {
            // A leaving head hands its chains over one by one, whole cluster or not.
            return self
                .shards
                .iter()
                .filter(|s| s.owner() == id)
                .find_map(|s| self.successor_staying(s).map(|m| (s.slots, m)));
        }
        if let Some(handoff) = self.target_handoff(id) {
            return Some(handoff);
        }
        let mine = self.headed_slots(id);
        if !self.is_whole() || self.heads_of(id) <= self.heads_max() {
            return None;
        }
        // Only to a member that then heads fewer slots than this node would have kept: the
        // sum of squares of what the nodes head falls with each hand-over, so they end.
        self.shards
            .iter()
            .filter(|s| s.owner() == id)
            .flat_map(|s| {
                s.chain[1..]
                    .iter()
                    .map(move |m| (self.headed_slots(m), s.slots, m))
            })
            .filter(|&(headed, slots, _)| headed + slots.len() < mine)
            .min_by_key(|&(headed, slots, _)| (headed, slots))
            .map(|(_, slots, m)| (slots, m.clone()))
    }

    /// The next version with `id` at the head of the chain of exactly `slots`, the other
    /// members after it in their order, at a new version. Valid only when every member holds
    /// every message of the chain (the head froze its writes and saw them all committed).
    pub fn with_head(&self, slots: SlotRange, id: &str) -> Result<Topology, TopologyError> {
        let mut t = self.next();
        let version = t.epoch;
        let Some(s) = t.shards.iter_mut().find(|s| s.slots == slots) else {
            return Err(TopologyError::Refused(format!("no chain of slots {slots}")));
        };
        let Some(at) = s.position(id) else {
            return Err(TopologyError::Refused(format!(
                "node {id} is not in the chain of slots {slots}"
            )));
        };
        let head = s.chain.remove(at);
        s.chain.insert(0, head);
        s.version = version;
        t.validate()?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::nodes;
    use super::*;

    /// After restarts one node heads every chain: hand-overs, each computed from the last
    /// topology, spread the heads to one per node, and then none is wanted.
    #[test]
    fn hand_overs_spread_the_heads_then_stop() {
        let mut t = Topology::create(nodes(3), 3).unwrap();
        assert!(t.is_whole());
        assert!(["n0", "n1", "n2"]
            .iter()
            .all(|n| t.head_handoff(n).is_none()));
        // n0 heads every chain (n1 and n2 rejoined as tails).
        for s in &mut t.shards {
            s.chain = vec!["n0".into(), "n1".into(), "n2".into()];
        }
        assert_eq!(t.heads_max(), 1);
        let mut handoffs = 0;
        while let Some((slots, to)) = t.head_handoff("n0") {
            let before = t.shards.iter().find(|s| s.slots == slots).unwrap().clone();
            t = t.with_head(slots, &to).unwrap();
            let after = t.shards.iter().find(|s| s.slots == slots).unwrap();
            assert_eq!(after.owner(), to);
            assert_eq!(
                after.version, t.epoch,
                "the chain is fenced at a new version"
            );
            assert_eq!(after.chain.len(), before.chain.len());
            handoffs += 1;
            assert!(handoffs <= 3, "{t:?}");
        }
        assert_eq!(handoffs, 2);
        for n in ["n0", "n1", "n2"] {
            assert_eq!(t.heads_of(n), 1, "{n}: {:?}", t.shards);
            assert!(t.head_handoff(n).is_none());
        }
    }

    /// Nothing moves while the cluster is not whole: a short chain, a join, a migration.
    #[test]
    fn no_hand_over_while_the_cluster_is_not_whole() {
        let mut t = Topology::create(nodes(3), 3).unwrap();
        for s in &mut t.shards {
            s.chain = vec!["n0".into(), "n1".into(), "n2".into()];
        }
        let mut short = t.clone();
        short.shards[2].chain.pop();
        assert!(!short.is_whole() && short.head_handoff("n0").is_none());
        let mut joining = t.clone();
        joining.shards[1].joining = Some("n2".into());
        assert!(joining.head_handoff("n0").is_none());
        let plain = Topology::create(nodes(3), 1).unwrap();
        assert!(!plain.is_whole());
        assert!(t.with_head(t.shards[0].slots, "n9").is_err());
    }
}
