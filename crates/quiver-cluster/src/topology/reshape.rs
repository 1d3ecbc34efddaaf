//! Reshaping a replicated cluster while it serves: `move-slots`, `rebalance` and so `add-node`
//! with replicas. A range never moves from one node to another as a copy; it gets a
//! **target** ([`Target`]: the chain it is to end up on) and the chains serving it change
//! member by member until they are that chain — FAWN-KV's join and leave (seed 001,
//! chapter 4), one member at a time:
//!
//! 1. **Split**: a chain straddling an edge of a target is split there by its head
//!    ([`Topology::split_wanted`], [`Topology::with_split`]): it freezes the chain's writes,
//!    waits until everything it applied is committed (every member then holds the same
//!    messages), and writes two chains of the same members at a new version, whose streams
//!    start again at message 0 (`quiver-node`'s `agent::drained`).
//! 2. **Join**: a chain whose members in its target are fewer than the target's has room for
//!    one more member ([`Topology::wants_member`]): the target's first missing member joins as
//!    tail the usual way (the tail streams the range to it while the chain serves; the
//!    manager's `with_joins`), so the chain has one member more than it keeps.
//! 3. **Head**: a head on its way out hands its role to the target's head (or the next
//!    member that stays) once the chain has that extra member; a chain of the target's
//!    members headed by another hands it to the target's head ([`Topology::head_handoff`]).
//! 4. **Splice**: a member on its way out that is not the head leaves a chain with more
//!    members than it keeps ([`Topology::with_spliced`]), as a middle that fails does (its
//!    predecessor sends what it has not seen committed to its new successor).
//! 5. Once every chain of the range is the target, the manager forgets the target.
//! 6. **Merge**: once the cluster is whole again, neighbouring chains of the same head and
//!    members (the parts a grow split and a shrink left on the same nodes) are merged by
//!    their head ([`Topology::merge_wanted`], [`Topology::with_merged`]), drained as a split
//!    is, so the chains do not multiply with every reshape.
//!
//! A member on its way out is one not in the target's chain, or one leaving the cluster
//! (`topology::leave`, which is the same steps without a target). A chain never has fewer
//! members than it had (below `replicas` only through failures), nor more than one beyond
//! what it keeps: the copies never drop below R, and a join copies one range at a time.
//!
//! Each step is one of the moves already made safe on their own (joins, splices, hand-overs
//! fenced by chain versions; splits drained like hand-overs), so a kill -9 of any
//! participant at any step leaves a valid chain that the repairs handle as usual, and the
//! target goes on from wherever the chains are.
//!
//! `rebalance` ([`Topology::rebalance_targets`]) plans where every range should end: each
//! node heads its even share of the slots (the ranges it gets go to the chain it heads, or to
//! a new chain of it and the members holding the least), then members are swapped out of
//! chains they do not head until no node holds a range more than another could take — so a
//! node added to a cluster of chains of R ends up in R chains and heading one.

use quiver_resp::slot::SlotRange;

use super::{Shard, Target, Topology, TopologyError, EXPELLED};

/// Most member swaps one rebalance plans (each strictly evens out what the nodes hold).
const MEMBER_SWAPS_MAX: usize = 256;

/// Whether two chains are the same for a target (or a merge): the same head and the same
/// members (the order of the others only says who forwards to whom).
pub fn same_chain(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.first() == b.first() && a.iter().all(|m| b.contains(m))
}

/// Whether chain `b` follows chain `a` and could be one chain with it: the same head and
/// members, nothing joining either.
fn mergeable(a: &Shard, b: &Shard) -> bool {
    u32::from(a.slots.hi) + 1 == u32::from(b.slots.lo)
        && a.joining.is_none()
        && b.joining.is_none()
        && same_chain(&a.chain, &b.chain)
}

impl Topology {
    /// The target chain `s` lies within, if any (a chain straddling a target's edge is split
    /// first, unless it is that target's chain already).
    pub fn target_of(&self, s: &Shard) -> Option<&Target> {
        self.targets
            .iter()
            .find(|t| t.slots.covers(&s.slots) && !same_chain(&t.chain, &s.chain))
    }

    /// Whether member `id` of chain `s` is on its way out of it: leaving the cluster, or not
    /// in the chain of its target.
    pub fn is_extra(&self, s: &Shard, id: &str) -> bool {
        self.is_leaving(id)
            || self
                .target_of(s)
                .is_some_and(|t| !t.chain.iter().any(|m| m == id))
    }

    pub(super) fn has_extra(&self, s: &Shard) -> bool {
        s.chain.iter().any(|m| self.is_extra(s, m))
    }

    /// Members chain `s` keeps: its target's, else `replicas` (or every node that stays when
    /// there are fewer).
    fn copies_of(&self, s: &Shard) -> usize {
        self.target_of(s)
            .map_or_else(|| self.copies(), |t| t.chain.len())
    }

    /// Whether chain `s` wants a new member: fewer members that stay than it keeps, and
    /// room for one (a chain has at most one member beyond those it keeps).
    pub fn wants_member(&self, s: &Shard) -> bool {
        let staying = s.chain.iter().filter(|m| !self.is_extra(s, m)).count();
        staying < self.copies_of(s) && s.chain.len() <= self.copies_of(s)
    }

    /// The node to join chain `s` next when it has a target: the target's first member not
    /// in it. `None` without a target (the manager then picks one).
    pub fn target_joiner(&self, s: &Shard) -> Option<&str> {
        let t = self.target_of(s)?;
        t.chain
            .iter()
            .find(|m| s.position(m).is_none())
            .map(String::as_str)
    }

    /// The chain node `id` heads that straddles an edge of a target, and the first slot of
    /// its second part (`id` splits it: [`Topology::with_split`]).
    pub fn split_wanted(&self, id: &str) -> Option<(SlotRange, u16)> {
        self.shards
            .iter()
            .filter(|s| s.owner() == id && s.joining.is_none())
            .find_map(|s| {
                self.targets
                    .iter()
                    .filter(|t| !same_chain(&t.chain, &s.chain))
                    .flat_map(|t| [u32::from(t.slots.lo), u32::from(t.slots.hi) + 1])
                    .find(|&at| u32::from(s.slots.lo) < at && at <= u32::from(s.slots.hi))
                    .map(|at| (s.slots, at as u16))
            })
    }

    /// The next version with the chain of exactly `slots` split into two chains of the same
    /// members, `slots.lo..at` and `at..=slots.hi`, both at a new version. Valid only when
    /// every member holds every message of the chain (its head froze the writes and saw them
    /// all committed): both halves' streams start again at 0.
    pub fn with_split(&self, slots: SlotRange, at: u16) -> Result<Topology, TopologyError> {
        let mut t = self.next();
        let version = t.epoch;
        let Some(i) = t.shards.iter().position(|s| s.slots == slots) else {
            return Err(TopologyError::Refused(format!("no chain of slots {slots}")));
        };
        if !(slots.lo < at && at <= slots.hi) {
            return Err(TopologyError::Refused(format!(
                "slot {at} does not split slots {slots}"
            )));
        }
        if t.shards[i].joining.is_some() {
            return Err(TopologyError::Refused(format!(
                "a node is joining the chain of slots {slots}"
            )));
        }
        let mut right = t.shards[i].clone();
        t.shards[i].slots.hi = at - 1;
        t.shards[i].version = version;
        right.slots.lo = at;
        right.version = version;
        t.shards.insert(i + 1, right);
        t.validate()?;
        Ok(t)
    }

    /// Two neighbouring chains node `id` heads with the same members, once the cluster is
    /// whole (no target, join or leave in flight) and `id` has no head to hand over first:
    /// the range they cover and the first slot of the second (`id` merges them:
    /// [`Topology::with_merged`]). A grow splits chains at its targets' edges and a shrink
    /// leaves the parts on the same members: merging them keeps the number of chains
    /// (streams, senders, connections) from growing with every reshape — FAWN-KV's leave,
    /// whose ranges merge into their neighbours'. The head balance goes first: a merge
    /// lowers `ceil(chains / nodes)`, and two chains a restart left on one head must not
    /// become one that head keeps.
    pub fn merge_wanted(&self, id: &str) -> Option<(SlotRange, u16)> {
        if !self.is_whole() || self.head_handoff(id).is_some() {
            return None;
        }
        self.shards
            .windows(2)
            .find(|pair| pair[0].owner() == id && mergeable(&pair[0], &pair[1]))
            .map(|pair| {
                let slots = SlotRange {
                    lo: pair[0].slots.lo,
                    hi: pair[1].slots.hi,
                };
                (slots, pair[1].slots.lo)
            })
    }

    /// The next version with the neighbouring chains `slots.lo..at` and `at..=slots.hi`
    /// (the same members) merged into one chain of `slots`, in the first one's order, at a
    /// new version. Valid only when every member holds every message of both chains (their
    /// head froze their writes and saw them all committed): the merged stream starts at 0.
    pub fn with_merged(&self, slots: SlotRange, at: u16) -> Result<Topology, TopologyError> {
        let mut t = self.next();
        let version = t.epoch;
        let refused = || {
            TopologyError::Refused(format!(
                "no two chains of the same members meet at slot {at} within slots {slots}"
            ))
        };
        let i = t
            .shards
            .iter()
            .position(|s| s.slots.lo == slots.lo && u32::from(s.slots.hi) + 1 == u32::from(at))
            .ok_or_else(refused)?;
        match t.shards.get(i + 1) {
            Some(right) if right.slots.hi == slots.hi && mergeable(&t.shards[i], right) => {}
            _ => return Err(refused()),
        }
        t.shards.remove(i + 1);
        t.shards[i].slots.hi = slots.hi;
        t.shards[i].version = version;
        t.validate()?;
        Ok(t)
    }

    /// The hand-over a head on the way of a target makes (see the module documentation):
    /// node `id` heads a chain with a target and is on its way out once the chain has its
    /// extra member, or heads a chain of its target's members and is not its head.
    pub(super) fn target_handoff(&self, id: &str) -> Option<(SlotRange, String)> {
        self.shards
            .iter()
            .filter(|s| s.owner() == id && s.joining.is_none())
            .find_map(|s| {
                let t = self.target_of(s)?;
                let head = &t.chain[0];
                let to = if self.is_extra(s, id) {
                    if s.chain.len() <= t.chain.len() {
                        return None; // the replacement first
                    }
                    if s.position(head).is_some() {
                        head.clone()
                    } else {
                        s.chain[1..].iter().find(|m| !self.is_extra(s, m))?.clone()
                    }
                } else if !self.has_extra(s) && s.chain.len() == t.chain.len() && head != id {
                    head.clone()
                } else {
                    return None;
                };
                Some((s.slots, to))
            })
    }

    /// The next version with members on their way out (leaving, or not in the target)
    /// spliced out of each chain with more members than it keeps and no join in flight,
    /// never below that; each changed chain at a new version. The head is never spliced (it
    /// hands its role over first). Targets every chain of which has reached are forgotten.
    /// `None` when nothing changes.
    pub fn with_spliced(&self) -> Option<Topology> {
        let mut t = self.next();
        let version = t.epoch;
        let mut changed = false;
        for (i, s) in self.shards.iter().enumerate() {
            if s.joining.is_some() {
                continue;
            }
            let keeps = self.copies_of(s);
            let mut chain = s.chain.clone();
            for m in s.chain[1..].iter().filter(|m| self.is_extra(s, m)) {
                if chain.len() <= keeps {
                    break;
                }
                chain.retain(|c| c != m);
            }
            if chain.len() != s.chain.len() {
                t.shards[i].chain = chain;
                t.shards[i].version = version;
                changed = true;
            }
        }
        let targets = t.targets.len();
        t.targets.retain(|target| !self.reached(target));
        changed |= t.targets.len() != targets;
        if !changed {
            return None;
        }
        t.validate().ok()?;
        Some(t)
    }

    /// Whether every chain serving a slot of `target` is its chain (its head and members).
    pub fn reached(&self, target: &Target) -> bool {
        self.shards
            .iter()
            .filter(|s| s.slots.overlaps(&target.slots))
            .all(|s| same_chain(&s.chain, &target.chain) && s.joining.is_none())
    }

    /// Slots each node holds a copy of (as any member).
    pub fn held_slots(&self, id: &str) -> u32 {
        self.shards
            .iter()
            .filter(|s| s.position(id).is_some())
            .map(|s| s.slots.len())
            .sum()
    }

    /// The chain a range given to node `to` should end up on: the chain `to` heads, if it
    /// heads one of full length; else `to` followed by the nodes that stay and hold the
    /// fewest slots (ties: node order).
    pub fn chain_for(&self, to: &str) -> Vec<String> {
        let copies = self.copies();
        if let Some(s) = self
            .shards
            .iter()
            .find(|s| s.owner() == to && s.chain.len() == copies && !self.has_extra(s))
        {
            return s.chain.clone();
        }
        let mut others: Vec<&str> = self
            .nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| *id != to && !self.is_leaving(id))
            .collect();
        others.sort_by_key(|id| self.held_slots(id));
        std::iter::once(to)
            .chain(others.into_iter().take(copies.saturating_sub(1)))
            .map(str::to_string)
            .collect()
    }

    /// The next version with `targets` recorded. Refused without replicas, over unassigned
    /// slots, over slots moving already, or to a chain that is not `replicas` distinct
    /// members that stay. A target the range has reached already is left out.
    pub fn with_targets(&self, targets: &[Target]) -> Result<Topology, TopologyError> {
        let refused = |m: String| Err(TopologyError::Refused(m));
        if self.replicas < 2 {
            return refused("without replicas slots move with migrations".into());
        }
        let mut t = self.next();
        for target in targets {
            let assigned: u32 = self
                .shards
                .iter()
                .filter_map(|s| s.slots.intersection(&target.slots))
                .map(|r| r.len())
                .sum();
            if assigned != target.slots.len() {
                return refused(format!("slots {} are not all assigned", target.slots));
            }
            if let Some(m) = t.targets.iter().find(|m| m.slots.overlaps(&target.slots)) {
                return refused(format!(
                    "slots {} are moving already (to {})",
                    m.slots,
                    m.chain.join(" -> ")
                ));
            }
            if target.chain.len() != self.copies() {
                return refused(format!(
                    "a chain of {} nodes; this cluster's chains have {}",
                    target.chain.len(),
                    self.copies()
                ));
            }
            for id in &target.chain {
                let node = self
                    .node(id)
                    .ok_or_else(|| TopologyError::Refused(format!("node {id} is not a member")))?;
                if self.is_leaving(id) || node.run == EXPELLED {
                    return refused(format!("node {id} is leaving or expelled"));
                }
            }
            if !self.reached(target) {
                t.targets.push(target.clone());
            }
        }
        t.targets.sort_by_key(|x| x.slots.lo);
        t.validate()?;
        Ok(t)
    }

    /// The next version without the targets overlapping `slots` (an operator's move given
    /// up): the chains stay wherever they are, each a valid chain.
    pub fn without_targets(&self, slots: &[SlotRange]) -> Topology {
        let mut t = self.next();
        t.targets
            .retain(|target| !slots.iter().any(|r| r.overlaps(&target.slots)));
        t
    }

    /// Checks the targets: disjoint, in order, of distinct members.
    pub(super) fn validate_targets(&self) -> Result<(), TopologyError> {
        let mut next = 0u32;
        for target in &self.targets {
            let bad = |m: &str| {
                Err(TopologyError::Invalid(format!(
                    "target of slots {}: {m}",
                    target.slots
                )))
            };
            if u32::from(target.slots.lo) < next {
                return bad("overlaps another or out of order");
            }
            next = u32::from(target.slots.hi) + 1;
            if target.chain.is_empty() || target.chain.len() > self.replicas as usize {
                return bad("a chain of no nodes or of more than replicas");
            }
            for (i, id) in target.chain.iter().enumerate() {
                self.node_index(id)?;
                if target.chain[..i].contains(id) {
                    return bad("a node twice in its chain");
                }
            }
            if self
                .migrations
                .iter()
                .any(|m| m.slots.overlaps(&target.slots))
            {
                return bad("its slots are migrating");
            }
        }
        Ok(())
    }

    /// Where `rebalance` sends each range of a replicated cluster (see the module
    /// documentation): the targets of the ranges whose chain changes.
    pub fn rebalance_targets(&self) -> Vec<Target> {
        let mut end = self.clone();
        end.targets.clear();
        for (slots, to) in self.rebalance_plan() {
            let chain = end.chain_for(&to);
            end.assign(slots, chain, 0);
        }
        for _ in 0..MEMBER_SWAPS_MAX {
            let Some((slots, chain)) = end.member_swap() else {
                break;
            };
            end.assign(slots, chain, 0);
        }
        self.targets_towards(&end)
    }

    /// One swap evening out what the nodes hold: a member (not the head) of a chain giving
    /// its place to a node that holds fewer slots even with that range. Of the nodes holding
    /// most first, and the range making the largest move.
    fn member_swap(&self) -> Option<(SlotRange, Vec<String>)> {
        let mut staying: Vec<(&str, u32)> = self
            .nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| !self.is_leaving(id))
            .map(|id| (id, self.held_slots(id)))
            .collect();
        staying.sort_by_key(|&(id, held)| (std::cmp::Reverse(held), id));
        for &(most, held_most) in &staying {
            for &(least, held_least) in staying.iter().rev() {
                let swap = self
                    .shards
                    .iter()
                    .filter(|s| s.owner() != most && s.position(most).is_some())
                    .filter(|s| s.position(least).is_none())
                    .filter(|s| held_least + s.slots.len() < held_most)
                    .max_by_key(|s| (s.slots.len(), std::cmp::Reverse(s.slots.lo)));
                if let Some(s) = swap {
                    let chain = s
                        .chain
                        .iter()
                        .map(|m| if m == most { least } else { m.as_str() })
                        .map(str::to_string)
                        .collect();
                    return Some((s.slots, chain));
                }
            }
        }
        None
    }

    /// The targets taking this topology's chains to `end`'s: per range of `end`, the parts
    /// whose chain differs here, neighbours of one chain joined.
    fn targets_towards(&self, end: &Topology) -> Vec<Target> {
        let mut targets: Vec<Target> = Vec::new();
        for e in &end.shards {
            for s in &self.shards {
                let Some(slots) = s.slots.intersection(&e.slots) else {
                    continue;
                };
                if same_chain(&s.chain, &e.chain) {
                    continue;
                }
                match targets.last_mut() {
                    Some(last)
                        if last.chain == e.chain
                            && u32::from(last.slots.hi) + 1 == u32::from(slots.lo) =>
                    {
                        last.slots.hi = slots.hi;
                    }
                    _ => targets.push(Target {
                        slots,
                        chain: e.chain.clone(),
                    }),
                }
            }
        }
        targets
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use quiver_resp::slot::SLOTS;

    use super::super::tests::nodes;
    use super::*;

    /// Brings `t` to rest as the cluster would, checking after every step that it is valid
    /// and that no chain has fewer than `copies` members: heads split and hand over, the
    /// manager's joins complete, members are spliced. Returns the steps taken.
    fn settle(t: &mut Topology, copies: usize) -> usize {
        let alive: HashMap<String, u64> = t.nodes.iter().map(|n| (n.id.clone(), n.run)).collect();
        let ids: Vec<String> = t.nodes.iter().map(|n| n.id.clone()).collect();
        let mut steps = 0;
        let mut step = |t: &mut Topology, next: Topology| {
            next.validate().unwrap();
            for s in &next.shards {
                assert!(s.chain.len() >= copies, "{s:?} after {t}");
            }
            assert_eq!(next.assigned_slots(), SLOTS);
            *t = next;
            steps += 1;
            assert!(steps < 500, "no rest: {t}");
        };
        loop {
            let before = t.epoch;
            for id in &ids {
                while let Some((slots, at)) = t.split_wanted(id) {
                    let next = t.with_split(slots, at).unwrap();
                    step(t, next);
                }
            }
            if let Some((next, _)) = t.with_joins(&alive) {
                step(t, next);
                for (slots, id, _) in t.clone().joins() {
                    let next = t.with_tail(slots, id).unwrap();
                    step(t, next);
                }
            }
            for id in &ids {
                if let Some((slots, to)) = t.head_handoff(id) {
                    let next = t.with_head(slots, &to).unwrap();
                    step(t, next);
                }
            }
            if let Some(next) = t.with_spliced() {
                step(t, next);
            }
            for id in &ids {
                while let Some((slots, at)) = t.merge_wanted(id) {
                    let next = t.with_merged(slots, at).unwrap();
                    step(t, next);
                }
            }
            if t.epoch == before {
                return steps;
            }
        }
    }

    /// `add-node` then `rebalance` on chains of 3: the new node ends up heading its share
    /// and in 3 chains, every node holds about as much, and no chain ever had fewer than 3
    /// members on the way.
    #[test]
    fn a_node_added_to_chains_of_three_gets_three_chains_and_its_share_of_heads() {
        let all = nodes(4);
        let t = Topology::create(all[..3].to_vec(), 3).unwrap();
        let mut t = t.with_node(all[3].clone()).unwrap();
        let targets = t.rebalance_targets();
        assert!(!targets.is_empty());
        t = t.with_targets(&targets).unwrap();
        let steps = settle(&mut t, 3);
        assert!(t.targets.is_empty(), "{t}");
        let chains_of = |id: &str| t.shards.iter().filter(|s| s.position(id).is_some()).count();
        assert!(chains_of("n3") >= 3, "{t}");
        for n in ["n0", "n1", "n2", "n3"] {
            let headed = t.headed_slots(n);
            assert!((4090..=4100).contains(&headed), "{n} heads {headed}: {t}");
            let held = t.held_slots(n);
            assert!((12280..=12300).contains(&held), "{n} holds {held}: {t}");
        }
        // At rest: nothing more to do, and a second rebalance plans nothing.
        assert!(t.rebalance_targets().is_empty(), "{t}");
        assert!(steps < 100, "{steps} steps");
    }

    /// A node added to chains of 2 over 2 nodes, then taken out again (leave), then the
    /// cluster rebalanced: valid at every step, never below 2 copies.
    #[test]
    fn grow_then_shrink_with_chains_of_two() {
        let all = nodes(3);
        let mut t = Topology::create(all[..2].to_vec(), 2).unwrap();
        t = t.with_node(all[2].clone()).unwrap();
        t = t.with_targets(&t.rebalance_targets()).unwrap();
        settle(&mut t, 2);
        for n in ["n0", "n1", "n2"] {
            assert!((5455..=5470).contains(&t.headed_slots(n)), "{n}: {t}");
        }
        t = t.with_leaving("n0").unwrap();
        settle(&mut t, 2);
        assert!(t.shards.iter().all(|s| s.position("n0").is_none()), "{t}");
        t = t.without_node("n0").unwrap();
        t = t.with_targets(&t.rebalance_targets()).unwrap();
        settle(&mut t, 2);
        for n in ["n1", "n2"] {
            assert_eq!(t.held_slots(n), SLOTS, "{n}: {t}");
            assert!((8190..=8194).contains(&t.headed_slots(n)), "{n}: {t}");
        }
    }

    /// Grows and shrinks over and over (a node added and rebalanced, then a node leaving
    /// and the rest rebalanced): at rest no two neighbouring chains could be one, and the
    /// number of chains stays bounded instead of growing with every reshape.
    #[test]
    fn chains_split_by_a_grow_merge_again_after_the_shrink() {
        let all = nodes(3 + 12);
        let mut t = Topology::create(all[..3].to_vec(), 3).unwrap();
        for round in 0..12 {
            t = t.with_node(all[3 + round].clone()).unwrap();
            t = t.with_targets(&t.rebalance_targets()).unwrap();
            settle(&mut t, 3);
            let grown = t.shards.len();
            let leaving = t.nodes[round % t.nodes.len()].id.clone();
            t = t.with_leaving(&leaving).unwrap();
            settle(&mut t, 3);
            t = t.without_node(&leaving).unwrap();
            t = t.with_targets(&t.rebalance_targets()).unwrap();
            settle(&mut t, 3);
            eprintln!(
                "round {round}: {grown} chains on 4 nodes, {} on 3",
                t.shards.len()
            );
            assert!(t.shards.windows(2).all(|p| !mergeable(&p[0], &p[1])), "{t}");
            assert!(t.targets.is_empty() && t.is_whole(), "{t}");
            // Without merges: 8, 9, 9, 9, 9, 10, 10, 11, ... chains; with them 5 to 8.
            assert!(t.shards.len() <= 3 * t.nodes.len(), "{t}");
        }
        // Merges are refused where the chains differ or do not meet.
        let t = Topology::create(nodes(3), 3).unwrap();
        let (a, b) = (t.shards[0].slots, t.shards[1].slots);
        let both = SlotRange { lo: a.lo, hi: b.hi };
        assert!(t.with_merged(both, b.lo).is_err());
        assert!(t.with_merged(both, b.lo + 1).is_err());
    }

    /// Two neighbouring chains a restart left on one head (the restarted node rejoined both
    /// as tail) are not merged: the head balance hands one over first, so the writes
    /// spread again.
    #[test]
    fn the_head_balance_goes_before_a_merge() {
        let mut t = Topology::create(nodes(3), 3).unwrap();
        t.shards[1].chain = vec!["n0".into(), "n2".into(), "n1".into()];
        t.validate().unwrap();
        assert!(t.head_handoff("n0").is_some());
        assert_eq!(t.merge_wanted("n0"), None);
        settle(&mut t, 3);
        assert_eq!(t.shards.len(), 3, "{t}");
        for n in ["n0", "n1", "n2"] {
            assert_eq!(t.heads_of(n), 1, "{n}: {t}");
        }
    }

    /// `move-slots` with replicas: a range in the middle of a chain moves to a node that
    /// heads another chain — it ends on that chain, the rest stays where it was.
    #[test]
    fn moving_a_range_splits_its_chain_and_ends_on_the_target_chain() {
        let mut t = Topology::create(nodes(4), 3).unwrap();
        let range = SlotRange { lo: 1000, hi: 1999 };
        let chain = t.chain_for("n2");
        assert_eq!(chain, t.shards[2].chain);
        let before = t.shards[0].chain.clone();
        t = t
            .with_targets(&[Target {
                slots: range,
                chain: chain.clone(),
            }])
            .unwrap();
        assert_eq!(
            t.split_wanted("n0"),
            Some((SlotRange { lo: 0, hi: 4095 }, 1000))
        );
        settle(&mut t, 3);
        let of = |slot: u16| t.shards.iter().find(|s| s.slots.contains(slot)).unwrap();
        assert!(same_chain(&of(1500).chain, &chain), "{t}");
        assert_eq!(of(999).chain, before);
        assert_eq!(of(2000).chain, before);
        assert!(t.targets.is_empty());
        // Targets are refused without replicas, over moving slots, and with a short chain.
        let plain = Topology::create(nodes(3), 1).unwrap();
        assert!(plain.with_targets(&[]).is_err());
        let moving = t
            .with_targets(&[Target {
                slots: range,
                chain: before.clone(),
            }])
            .unwrap();
        assert!(moving
            .with_targets(&[Target {
                slots: SlotRange { lo: 1500, hi: 1600 },
                chain: before.clone()
            }])
            .is_err());
        assert!(t
            .with_targets(&[Target {
                slots: range,
                chain: before[..2].to_vec()
            }])
            .is_err());
    }
}
