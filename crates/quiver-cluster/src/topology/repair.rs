//! Repairs of chains after failures, as the manager computes them (`manager`): the next
//! topology, a pure function of this one and of which nodes hold a lease at which run.
//!
//! Per chain of several members, each member is **ok** (its lease holds, at the run the
//! topology names), **restarted** (its lease holds at another run: the process died and came
//! back, and may have lost what it had applied and not yet made durable) or **dead** (no
//! lease). The chain keeps its ok members, in order: a dead or restarted head is replaced by
//! its successor, a tail by its predecessor, a middle is spliced out (FAWN-KV's rules). A
//! chain with no ok member keeps its first restarted one alone (a copy that may be
//! incomplete is better than none), and one whose members are all dead is left as it is
//! (nobody could serve it anyway; its first member back serves it again). Every changed chain
//! gets the new epoch as its version, which fences the members it lost.
//!
//! A restarted node left only in chains of its own (or in none) is readmitted: the topology
//! takes its new run, and it serves those chains again. It joins other chains later as a
//! tail, after catching up. A join in flight ends with any change of its chain, or when the
//! joining node is no longer ok (its tail starts anew, or another node is chosen).
//!
//! Joins ([`Topology::with_joins`]): each chain short of `replicas` members and not being
//! joined gets an ok node that is not in it and joins nothing else, the one in the fewest
//! chains first (ties: node order), so members spread as the ring spreads them; a chain on
//! its way to a target (`topology::reshape`) gets the target's next member, once it is ok
//! and free.
//!
//! **Partitions between nodes** ([`Topology::expel_candidate`], [`Topology::with_expelled`]):
//! a node that cannot reach its successor in a chain reports it (its lease holds, and so
//! does the successor's: leases alone see nothing). The manager expels one reported node at
//! a time: the topology gives it the run [`EXPELLED`], which no process has, so the node
//! stops serving as soon as it sees that version — and a node counts on a lease renewal only
//! once it has seen the topology of its time (`meta::Meta::keep`), so it surely stopped one
//! lease TTL after the expulsion was written. Until then it is **fencing**: it stays in its
//! chains (nothing is committed without it where it was needed, and nobody can read a value
//! it missed); after, it is treated as restarted: it leaves its shared chains, is readmitted,
//! and joins chains as tail, through links that work. Who is expelled: a node reported by an
//! ok node that is itself reported by nobody (the node cut from everyone, not the neighbours
//! it reports), most reporters first.

use std::collections::{HashMap, HashSet};

use super::{Topology, EXPELLED};

/// Why a node lost its place (or was readmitted) in a repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// It holds no lease.
    Dead(String),
    /// It holds a lease at a run other than the topology's (the new one is given).
    Restarted { id: String, run: u64 },
}

impl Finding {
    pub fn id(&self) -> &str {
        match self {
            Finding::Dead(id) | Finding::Restarted { id, .. } => id,
        }
    }
}

/// The next topology and the findings it was computed from (each must still hold when it is
/// written: the manager makes them conditions of the transaction).
#[derive(Clone, Debug)]
pub struct Repair {
    pub next: Topology,
    pub findings: Vec<Finding>,
}

/// A member's state, from the leases.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Ok,
    /// Expelled less than a lease TTL ago: it may still serve; it keeps its chains.
    Fencing,
    Restarted(u64),
    Dead,
}

impl Topology {
    /// Node `id`'s state given `alive` (each node holding a lease, and its run) and
    /// `fencing` (expelled nodes whose lease TTL has not passed since).
    fn state_of(&self, id: &str, alive: &HashMap<String, u64>, fencing: &HashSet<String>) -> State {
        let known = self.node(id).map_or(0, |n| n.run);
        if known == EXPELLED && fencing.contains(id) {
            return State::Fencing;
        }
        match alive.get(id) {
            None => State::Dead,
            Some(&run) if run == known => State::Ok,
            Some(&run) => State::Restarted(run),
        }
    }

    /// The repair of this topology given `alive` (each node holding a lease, and its run)
    /// and `fencing` (expelled nodes that may still serve); `None` when nothing is to
    /// change. See the module documentation for the rules.
    pub fn repaired(
        &self,
        alive: &HashMap<String, u64>,
        fencing: &HashSet<String>,
    ) -> Option<Repair> {
        let state = |id: &str| self.state_of(id, alive, fencing);
        let mut next = self.next();
        let version = next.epoch;
        let mut findings: Vec<Finding> = Vec::new();
        let mut note = |id: &str, s: State| {
            let finding = match s {
                State::Dead => Finding::Dead(id.to_string()),
                State::Restarted(run) => Finding::Restarted {
                    id: id.to_string(),
                    run,
                },
                State::Ok | State::Fencing => return,
            };
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        };
        for shard in next.shards.iter_mut() {
            let joiner = shard.joining.as_deref().map(|id| (id, state(id)));
            if let Some((id, s)) = joiner.filter(|(_, s)| *s != State::Ok) {
                note(id, s);
                shard.joining = None;
            }
        }
        for shard in next.shards.iter_mut().filter(|s| s.chain.len() > 1) {
            let states: Vec<State> = shard.chain.iter().map(|id| state(id)).collect();
            let ok: Vec<String> = shard
                .chain
                .iter()
                .zip(&states)
                .filter(|(_, s)| matches!(s, State::Ok | State::Fencing))
                .map(|(id, _)| id.clone())
                .collect();
            let keep = if !ok.is_empty() {
                ok
            } else if let Some(i) = states.iter().position(|s| matches!(s, State::Restarted(_))) {
                vec![shard.chain[i].clone()]
            } else {
                continue;
            };
            if keep.len() == shard.chain.len() {
                continue;
            }
            for (id, s) in shard.chain.iter().zip(&states) {
                if !keep.contains(id) {
                    note(id, *s);
                }
            }
            shard.chain = keep;
            shard.version = version;
            // Its tail may have changed: the join starts anew.
            shard.joining = None;
        }
        // Readmission of restarted nodes that share no chain with another node now.
        let mut readmit = Vec::new();
        for node in &next.nodes {
            let State::Restarted(run) = state(&node.id) else {
                continue;
            };
            let alone = next
                .shards
                .iter()
                .all(|s| s.chain.len() == 1 || s.position(&node.id).is_none());
            if alone {
                readmit.push((node.id.clone(), run));
            }
        }
        for (id, run) in readmit {
            note(&id, State::Restarted(run));
            if let Some(n) = next.nodes.iter_mut().find(|n| n.id == id) {
                n.run = run;
            }
        }
        if findings.is_empty() {
            return None;
        }
        // Every member named still is one, every chain keeps at least one: valid by
        // construction; checked all the same before it goes to etcd.
        next.validate().ok()?;
        Some(Repair { next, findings })
    }

    /// The next topology with a node joining each chain short of `replicas` members that has
    /// none (see the module documentation), given `alive` (nodes holding a lease, and their
    /// runs); and the nodes chosen (their leases must be unchanged when it is written).
    /// `None` when there is nothing to join or nobody to join it.
    pub fn with_joins(&self, alive: &HashMap<String, u64>) -> Option<(Topology, Vec<String>)> {
        let ok = |id: &str| self.state_of(id, alive, &HashSet::new()) == State::Ok;
        let mut next = self.next();
        let mut chosen: Vec<String> = Vec::new();
        // Nodes joining a chain already, or chosen for one in this pass: one join at a time.
        let mut taken: Vec<String> = self
            .shards
            .iter()
            .filter_map(|s| s.joining.clone())
            .collect();
        for i in 0..next.shards.len() {
            let shard = &next.shards[i];
            if !self.wants_member(shard) || shard.joining.is_some() {
                continue;
            }
            let chains_of = |id: &str| {
                next.shards
                    .iter()
                    .filter(|s| s.position(id).is_some())
                    .count()
            };
            let free = |id: &str| ok(id) && !taken.iter().any(|t| t == id);
            // A chain on its way to a target takes the target's next member, when it can.
            let pick = match self.target_joiner(shard) {
                Some(id) => free(id).then(|| id.to_string()),
                None => next
                    .nodes
                    .iter()
                    .map(|n| n.id.as_str())
                    .filter(|id| shard.position(id).is_none() && !self.is_leaving(id))
                    .filter(|id| free(id))
                    .min_by_key(|id| chains_of(id))
                    .map(str::to_string),
            };
            if let Some(id) = pick {
                next.shards[i].joining = Some(id.clone());
                taken.push(id.clone());
                chosen.push(id);
            }
        }
        if chosen.is_empty() {
            return None;
        }
        next.validate().ok()?;
        Some((next, chosen))
    }
}

impl Topology {
    /// The node to expel given `reports` (per reporter, the successors it cannot reach) and
    /// `alive`: see the module documentation. `None` while a node is expelled and not yet
    /// readmitted (one at a time), or when no report names a successor of its reporter with
    /// both ok.
    pub fn expel_candidate(
        &self,
        alive: &HashMap<String, u64>,
        reports: &HashMap<String, Vec<String>>,
    ) -> Option<String> {
        if self.nodes.iter().any(|n| n.run == EXPELLED) {
            return None;
        }
        let ok = |id: &str| self.state_of(id, alive, &HashSet::new()) == State::Ok;
        // (reporter, suspect) pairs that stand: both ok, the suspect the reporter's successor
        // in some chain now.
        let pairs: Vec<(&str, &str)> = reports
            .iter()
            .flat_map(|(r, suspects)| suspects.iter().map(move |s| (r.as_str(), s.as_str())))
            .filter(|(r, s)| ok(r) && ok(s) && r != s)
            .filter(|(r, s)| self.shards.iter().any(|sh| sh.successor(r) == Some(*s)))
            .collect();
        let suspected: HashSet<&str> = pairs.iter().map(|(_, s)| *s).collect();
        let trusted: Vec<(&str, &str)> = pairs
            .iter()
            .copied()
            .filter(|(r, _)| !suspected.contains(r))
            .collect();
        // Reports in a cycle only (each reporter reported): act on them all the same.
        let votes = if trusted.is_empty() { pairs } else { trusted };
        self.nodes
            .iter()
            // Reversed: of equal counts `max_by_key` takes the last, so the first in order.
            .rev()
            .map(|n| n.id.as_str())
            .map(|id| (id, votes.iter().filter(|(_, s)| *s == id).count()))
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
            .map(|(id, _)| id.to_string())
    }

    /// The next topology with node `id` expelled (its run [`EXPELLED`]).
    pub fn with_expelled(&self, id: &str) -> Option<Topology> {
        let mut next = self.next();
        let node = next.nodes.iter_mut().find(|n| n.id == id)?;
        node.run = EXPELLED;
        next.validate().ok()?;
        Some(next)
    }
}
