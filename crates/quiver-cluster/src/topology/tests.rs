use std::collections::{HashMap, HashSet};

use super::repair::Finding;
use super::*;

/// Nodes `n0`.. (the helper of every topology test module).
pub(super) fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node {
            id: format!("n{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            run: 100 + i as u64,
        })
        .collect()
}

/// Each chain's members, head first.
fn chain_ids(t: &Topology) -> Vec<Vec<&str>> {
    t.shards
        .iter()
        .map(|s| s.chain.iter().map(String::as_str).collect())
        .collect()
}

fn r(lo: u16, hi: u16) -> SlotRange {
    SlotRange { lo, hi }
}

#[test]
fn create_splits_slots_evenly_and_round_trips_as_json() {
    let t = Topology::create(nodes(3), 1).unwrap();
    assert_eq!(t.epoch, 1);
    assert_eq!(t.assigned_slots(), SLOTS);
    assert_eq!(t.ranges_of("n0"), vec![r(0, 5460)]);
    assert_eq!(t.ranges_of("n2"), vec![r(10922, 16383)]);
    let json = t.to_json();
    assert!(String::from_utf8_lossy(&json).contains("\"slots\":\"0-5460\""));
    assert_eq!(Topology::from_json(&json).unwrap(), t);
    let table = t.slot_table();
    assert_eq!(table[0], 0);
    assert_eq!(table[5461], 1);
    assert_eq!(table[16383], 2);
    // Each slot's shard: here shard i is node i's range.
    let shards = t.shard_table();
    assert_eq!(
        (shards[0], shards[5460], shards[5461], shards[16383]),
        (0, 0, 1, 2)
    );
}

#[test]
fn create_refuses_what_this_build_cannot_serve() {
    for (n, replicas) in [(3, 0), (3, 4), (2, 3)] {
        assert!(
            matches!(
                Topology::create(nodes(n), replicas),
                Err(TopologyError::Refused(_))
            ),
            "{n} nodes, replicas {replicas}"
        );
    }
    assert!(Topology::create(Vec::new(), 1).is_err());
    let mut twice = nodes(2);
    twice[1].addr = twice[0].addr.clone();
    assert!(Topology::create(twice, 1).is_err());
    let mut bad_id = nodes(1);
    bad_id[0].id = "has space".into();
    assert!(Topology::create(bad_id, 1).is_err());
}

#[test]
fn damaged_documents_are_refused() {
    let t = Topology::create(nodes(2), 1).unwrap();
    let mut overlapping = t.clone();
    overlapping.shards[1].slots.lo = 100;
    assert!(Topology::from_json(&overlapping.to_json()).is_err());
    let mut stranger = t.clone();
    stranger.shards[0].chain = vec!["nobody".into()];
    assert!(Topology::from_json(&stranger.to_json()).is_err());
    assert!(Topology::from_json(b"{\"epoch\": 1}").is_err());
    assert!(Topology::from_json(b"not json").is_err());
    let text = String::from_utf8(t.to_json())
        .unwrap()
        .replace("0-8191", "0-99999");
    assert!(Topology::from_json(text.as_bytes()).is_err());
}

#[test]
fn a_migration_ends_with_the_slots_at_its_target_or_its_source() {
    let t = Topology::create(nodes(2), 1).unwrap();
    let moving = t.with_migration(r(100, 199), "n1").unwrap();
    assert_eq!(moving.epoch, 2);
    assert_eq!(moving.migrations[0].from, "n0");
    // One migration of a slot at a time; the owner cannot be the target.
    assert!(moving.with_migration(r(150, 160), "n1").is_err());
    assert!(t.with_migration(r(9000, 9001), "n1").is_err());
    // A range spanning two owners is refused.
    assert!(t.with_migration(r(8000, 8300), "n0").is_err());

    let done = moving.with_migration_ended(r(100, 199), true).unwrap();
    assert_eq!(done.epoch, 3);
    assert!(done.migrations.is_empty());
    assert_eq!(done.ranges_of("n0"), vec![r(0, 99), r(200, 8191)]);
    assert_eq!(done.ranges_of("n1"), vec![r(100, 199), r(8192, 16383)]);
    assert_eq!(done.assigned_slots(), SLOTS);

    let aborted = moving.with_migration_ended(r(100, 199), false).unwrap();
    assert_eq!(aborted.shards, t.shards);
    assert!(moving.with_migration_ended(r(100, 198), true).is_err());

    // Moving the slots back joins the shards again.
    let back = done
        .with_migration(r(100, 199), "n0")
        .unwrap()
        .with_migration_ended(r(100, 199), true)
        .unwrap();
    let chains = |t: &Topology| -> Vec<(SlotRange, Vec<String>)> {
        t.shards
            .iter()
            .map(|s| (s.slots, s.chain.clone()))
            .collect()
    };
    assert_eq!(chains(&back), chains(&t));
    assert_eq!(
        back.shards[0].version, back.epoch,
        "the joined chain changed"
    );
}

#[test]
fn nodes_join_empty_and_leave_only_empty() {
    let t = Topology::create(nodes(2), 1).unwrap();
    let extra = Node {
        id: "n9".into(),
        addr: "127.0.0.1:7009".into(),
        run: 109,
    };
    let grown = t.with_node(extra.clone()).unwrap();
    assert!(grown.ranges_of("n9").is_empty());
    assert!(grown.with_node(extra).is_err());
    assert!(grown.without_node("n0").is_err());
    assert_eq!(grown.without_node("n9").unwrap().nodes, t.nodes);
    assert!(matches!(
        grown.without_node("zz"),
        Err(TopologyError::UnknownNode(_))
    ));
}

#[test]
fn a_member_moves_to_a_new_address_unless_another_has_it() {
    let t = Topology::create(nodes(2), 1).unwrap();
    let moved = t.with_address("n1", "127.0.0.1:8001").unwrap();
    assert_eq!(moved.epoch, 2);
    assert_eq!(moved.node("n1").unwrap().addr, "127.0.0.1:8001");
    assert!(t.with_address("n1", "127.0.0.1:7000").is_err());
    assert!(t.with_address("zz", "127.0.0.1:8001").is_err());
}

#[test]
fn rebalance_gives_every_node_its_even_share() {
    let t = Topology::create(nodes(2), 1).unwrap();
    let mut grown = t
        .with_node(Node {
            id: "n2".into(),
            addr: "127.0.0.1:7002".into(),
            run: 102,
        })
        .unwrap();
    let plan = grown.rebalance_plan();
    assert!(!plan.is_empty());
    for (range, to) in plan {
        grown = grown.with_migration(range, &to).unwrap();
        grown = grown.with_migration_ended(range, true).unwrap();
    }
    let shares: Vec<u32> = ["n0", "n1", "n2"]
        .iter()
        .map(|id| grown.ranges_of(id).iter().map(|r| r.len()).sum())
        .collect();
    let even: Vec<u32> = SlotRange::even(3).iter().map(|r| r.len()).collect();
    assert_eq!(shares, even);
    assert!(grown.rebalance_plan().is_empty());
}

#[test]
fn owner_of_range_needs_one_owner_and_no_gap() {
    let t = Topology::create(nodes(2), 1).unwrap();
    assert_eq!(t.owner_of_range(r(0, 8191)), Some("n0"));
    assert_eq!(t.owner_of_range(r(8191, 8192)), None);
    let mut gap = t.clone();
    gap.shards[0].slots = r(0, 99);
    assert_eq!(gap.owner_of_range(r(50, 150)), None);
    assert_eq!(gap.owner_of_range(r(50, 99)), Some("n0"));
}

/// FAWN-KV's layout: node i heads range i and is followed by the next nodes on the ring, so
/// every node is a head once, a tail once, and in the middle of the other chains.
#[test]
fn chains_are_laid_on_the_ring() {
    let t = Topology::create(nodes(4), 3).unwrap();
    let chains = chain_ids(&t);
    assert_eq!(
        chains,
        vec![
            vec!["n0", "n1", "n2"],
            vec!["n1", "n2", "n3"],
            vec!["n2", "n3", "n0"],
            vec!["n3", "n0", "n1"],
        ]
    );
    for id in ["n0", "n1", "n2", "n3"] {
        assert_eq!(t.shards.iter().filter(|s| s.owner() == id).count(), 1);
        assert_eq!(t.shards.iter().filter(|s| s.tail() == id).count(), 1);
    }
    assert!(t.shards.iter().all(|s| s.version == 1));
    assert_eq!(t.shards[0].successor("n1"), Some("n2"));
    assert_eq!(t.shards[0].successor("n2"), None);
    assert_eq!(Topology::from_json(&t.to_json()).unwrap(), t);
    let mut long = t.clone();
    long.shards[0].chain.push("n3".into());
    assert!(long.validate().is_err(), "a chain longer than replicas");
    let mut future = t.clone();
    future.shards[0].version = 9;
    assert!(future.validate().is_err(), "a version after the epoch");
}

/// Leases of `ids` at their runs in `t`, except `restarted` (at a new run: 1000 more).
fn alive(t: &Topology, ids: &[&str], restarted: &[&str]) -> HashMap<String, u64> {
    ids.iter()
        .map(|id| {
            let run = t.node(id).unwrap().run;
            let run = if restarted.contains(id) {
                run + 1000
            } else {
                run
            };
            (id.to_string(), run)
        })
        .collect()
}

/// A dead head is replaced by its successor, a dead tail by its predecessor, a dead middle
/// spliced out — each changed chain at the new epoch; a chain of one keeps its member; a
/// returning node is appended as tail.
#[test]
fn members_leave_and_join_chains_at_new_versions() {
    let t = Topology::create(nodes(3), 3).unwrap();
    assert!(t
        .repaired(&alive(&t, &["n0", "n1", "n2"], &[]), &HashSet::new())
        .is_none());
    let repair = t
        .repaired(&alive(&t, &["n0", "n2"], &[]), &HashSet::new())
        .unwrap();
    assert_eq!(repair.findings, vec![Finding::Dead("n1".into())]);
    let u = repair.next;
    assert_eq!(u.epoch, 2);
    let chains: Vec<&Vec<String>> = u.shards.iter().map(|s| &s.chain).collect();
    assert_eq!(
        chains[0],
        &vec!["n0".to_string(), "n2".into()],
        "middle spliced"
    );
    assert_eq!(
        chains[1],
        &vec!["n2".to_string(), "n0".into()],
        "head replaced"
    );
    assert_eq!(
        chains[2],
        &vec!["n2".to_string(), "n0".into()],
        "tail replaced"
    );
    assert!(u.shards.iter().all(|s| s.version == 2));
    assert!(
        u.repaired(&alive(&u, &["n0", "n2"], &[]), &HashSet::new())
            .is_none(),
        "nothing left to change"
    );
    let v = u
        .repaired(&alive(&u, &["n2"], &[]), &HashSet::new())
        .unwrap()
        .next;
    assert!(v.shards.iter().all(|s| s.chain == ["n2"]), "{v}");
    assert!(
        v.repaired(&alive(&v, &[], &[]), &HashSet::new()).is_none(),
        "the last member stays"
    );
    let w = u.with_tail(u.shards[0].slots, "n1").unwrap();
    assert_eq!(
        w.shards[0].chain,
        vec!["n0".to_string(), "n2".into(), "n1".into()]
    );
    assert_eq!((w.shards[0].version, w.shards[1].version), (3, 2));
    assert!(
        w.with_tail(w.shards[0].slots, "n1").is_err(),
        "already a member"
    );
    assert!(matches!(
        t.with_migration(t.shards[0].slots, "n1"),
        Err(TopologyError::Refused(_))
    ));
}

/// A restarted node leaves every chain it shares (it may have lost what it had in flight)
/// and is readmitted at its new run where it is alone; a chain whose members all restarted
/// keeps its first; one whose members are all dead is left as it is.
#[test]
fn restarted_members_leave_shared_chains_and_are_readmitted_alone() {
    let t = Topology::create(nodes(3), 2).unwrap();
    // Chains: [n0 n1] [n1 n2] [n2 n0].
    let repair = t
        .repaired(&alive(&t, &["n0", "n1", "n2"], &["n1"]), &HashSet::new())
        .unwrap();
    let u = repair.next;
    assert_eq!(u.shards[0].chain, ["n0"]);
    assert_eq!(u.shards[1].chain, ["n2"]);
    assert_eq!(u.shards[2].chain, ["n2", "n0"]);
    assert_eq!(
        u.node("n1").unwrap().run,
        1101,
        "readmitted: in no chain now"
    );
    assert_eq!(
        repair.findings,
        vec![Finding::Restarted {
            id: "n1".into(),
            run: 1101
        }]
    );
    assert!(u
        .repaired(&alive(&u, &["n0", "n1", "n2"], &[]), &HashSet::new())
        .is_none());

    // n0 and n1 restarted, n2 dead: [n0 n1] keeps its first (n0), [n1 n2] its only one
    // alive (n1), [n2 n0] n0; both are alone, so both are readmitted.
    let v = t
        .repaired(&alive(&t, &["n0", "n1"], &["n0", "n1"]), &HashSet::new())
        .unwrap()
        .next;
    assert_eq!(v.shards[0].chain, ["n0"]);
    assert_eq!(v.shards[1].chain, ["n1"]);
    assert_eq!(v.shards[2].chain, ["n0"]);
    assert_eq!(
        (v.node("n0").unwrap().run, v.node("n1").unwrap().run),
        (1100, 1101)
    );
    assert_eq!(v.node("n2").unwrap().run, 102);

    // All dead: nothing to do.
    assert!(t.repaired(&alive(&t, &[], &[]), &HashSet::new()).is_none());
}

/// A chain short of members gets an ok node that is not in it, the one in the fewest chains
/// first; a node joins one chain at a time; a join ends when its chain changes or its node is
/// no longer ok; `with_join_ended` appends the node as tail.
#[test]
fn short_chains_get_joining_nodes() {
    let t = Topology::create(nodes(4), 3).unwrap();
    // Chains: [n0 n1 n2] [n1 n2 n3] [n2 n3 n0] [n3 n0 n1].
    let everyone = ["n0", "n1", "n2", "n3"];
    assert!(
        t.with_joins(&alive(&t, &everyone, &[])).is_none(),
        "no chain is short"
    );
    let u = t
        .repaired(&alive(&t, &["n0", "n1", "n3"], &[]), &HashSet::new())
        .unwrap()
        .next;
    // n2 is gone: [n0 n1] [n1 n3] [n3 n0] [n3 n0 n1]; each short chain gets the survivor it
    // lacks, so the three survivors hold every range three times again.
    let (v, chosen) = u.with_joins(&alive(&u, &["n0", "n1", "n3"], &[])).unwrap();
    assert_eq!(chosen, ["n3", "n0", "n1"]);
    let joins: Vec<(SlotRange, String, String)> = v
        .joins()
        .map(|(s, id, tail)| (s, id.to_string(), tail.to_string()))
        .collect();
    assert_eq!(
        joins,
        [
            (v.shards[0].slots, "n3".to_string(), "n1".to_string()),
            (v.shards[1].slots, "n0".to_string(), "n3".to_string()),
            (v.shards[2].slots, "n1".to_string(), "n0".to_string()),
        ]
    );
    assert_eq!(
        v.shards[0].version, u.shards[0].version,
        "a join is not a membership change"
    );
    assert!(
        v.with_joins(&alive(&v, &everyone, &[])).is_none(),
        "a node joins one chain at a time, a chain gets one node at a time"
    );
    let w = v.with_join_ended(v.shards[0].slots, "n3", true).unwrap();
    assert_eq!(w.shards[0].chain, ["n0", "n1", "n3"]);
    assert_eq!(w.shards[0].version, w.epoch);
    assert_eq!(w.joins().count(), 2);
    // A joining node dies: its join ends with the repair; the others go on.
    let gone = w
        .repaired(&alive(&w, &["n0", "n3"], &[]), &HashSet::new())
        .unwrap();
    assert!(gone.next.joins().all(|(_, id, _)| id != "n1"));
    assert!(gone.findings.contains(&Finding::Dead("n1".into())));
    // Ended without completing: nobody joins, the chain unchanged.
    let y = v.with_join_ended(v.shards[1].slots, "n0", false).unwrap();
    assert_eq!(y.shards[1].chain, v.shards[1].chain);
    assert!(y.joins().all(|(_, id, _)| id != "n0"));
    assert!(
        y.with_join_ended(y.shards[1].slots, "n0", true).is_err(),
        "not joining"
    );
}

fn reports(pairs: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(r, s)| (r.to_string(), s.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// A node its predecessor cannot reach is expelled (one at a time), keeps its chains while
/// it may still serve (fencing), then leaves them like a restarted node and is readmitted.
/// The node cut from everyone is expelled, not the successors it reports; reports that no
/// longer name a successor, or come from or name a node that is not ok, count for nothing.
#[test]
fn a_node_its_predecessor_cannot_reach_is_expelled_then_fenced_out() {
    let t = Topology::create(nodes(3), 3).unwrap();
    let chains = chain_ids(&t);
    assert_eq!(
        chains,
        [["n0", "n1", "n2"], ["n1", "n2", "n0"], ["n2", "n0", "n1"]]
    );
    let all = alive(&t, &["n0", "n1", "n2"], &[]);
    assert_eq!(t.expel_candidate(&all, &reports(&[])), None);
    // n0 precedes n1 (chains 0 and 2): the link n0 -> n1 is cut.
    assert_eq!(
        t.expel_candidate(&all, &reports(&[("n0", &["n1"])])),
        Some("n1".into())
    );
    // n1 cut from everyone: n0 reports it, it reports n2; n1 goes.
    assert_eq!(
        t.expel_candidate(&all, &reports(&[("n0", &["n1"]), ("n1", &["n2"])])),
        Some("n1".into())
    );
    // n0 never precedes n2; a dead reporter or suspect counts for nothing.
    assert_eq!(t.expel_candidate(&all, &reports(&[("n0", &["n2"])])), None);
    let without_n0 = alive(&t, &["n1", "n2"], &[]);
    assert_eq!(
        t.expel_candidate(&without_n0, &reports(&[("n0", &["n1"])])),
        None
    );
    let without_n1 = alive(&t, &["n0", "n2"], &[]);
    assert_eq!(
        t.expel_candidate(&without_n1, &reports(&[("n0", &["n1"])])),
        None
    );

    let u = t.with_expelled("n1").unwrap();
    assert_eq!(u.epoch, t.epoch + 1);
    assert_eq!(u.node("n1").unwrap().run, EXPELLED);
    assert_eq!(u.shards, t.shards, "the chains stay as they are");
    assert_eq!(
        u.expel_candidate(&all, &reports(&[("n2", &["n0"])])),
        None,
        "one expulsion at a time"
    );
    // Fencing: n1 may still serve by its last renewal; it keeps its chains.
    let fencing: HashSet<String> = ["n1".to_string()].into();
    assert!(u.repaired(&all, &fencing).is_none());
    assert!(
        u.with_joins(&all).is_none(),
        "no chain is short, and n1 joins none"
    );
    // Its TTL passed: it leaves every chain it shares and is readmitted at its run.
    let repair = u.repaired(&all, &HashSet::new()).unwrap();
    assert_eq!(
        repair.findings,
        vec![Finding::Restarted {
            id: "n1".into(),
            run: 101
        }]
    );
    let v = repair.next;
    assert!(v.shards.iter().all(|s| s.position("n1").is_none()), "{v}");
    assert!(v.shards.iter().all(|s| s.chain.len() == 2), "{v}");
    assert_eq!(v.node("n1").unwrap().run, 101);
    // Dead meanwhile: it leaves its chains, to be readmitted when it is back.
    let dead = u.repaired(&without_n1, &HashSet::new()).unwrap();
    assert_eq!(dead.findings, vec![Finding::Dead("n1".into())]);

    // Two nodes each preceding the other, each reporting the other: one is expelled.
    let t2 = Topology::create(nodes(2), 2).unwrap();
    let both = alive(&t2, &["n0", "n1"], &[]);
    assert_eq!(
        t2.expel_candidate(&both, &reports(&[("n0", &["n1"]), ("n1", &["n0"])])),
        Some("n0".into())
    );
}

/// Redis's tools see each head as a master of its ranges, a node heading none as a replica of
/// the head of its first chain, and count each key once over the masters.
#[test]
fn redis_roles_count_each_slot_once_over_the_masters() {
    let t = Topology::create(nodes(3), 3).unwrap();
    for n in ["n0", "n1", "n2"] {
        assert_eq!(t.redis_role(n), RedisRole::Master);
        assert_eq!(t.counted_ranges(n), t.ranges_of(n));
    }
    // On the ring each node streams to the next (its successor in every chain it does not
    // end).
    for (n, next) in [("n0", "n1"), ("n1", "n2"), ("n2", "n0")] {
        let to: Vec<&str> = t.successors_of(n).iter().map(|s| s.id.as_str()).collect();
        assert_eq!(to, [next]);
    }
    // n0 out of every chain: n1 and n2 head them all; n0 joins one as its tail again.
    let mut t = t.clone();
    for s in &mut t.shards {
        s.chain.retain(|m| m != "n0");
    }
    let first = t.shards[0].slots;
    t = t.with_tail(first, "n0").unwrap();
    let head = t.shards[0].owner().to_string();
    assert_eq!(t.redis_role("n0"), RedisRole::Replica { of: &head });
    assert_eq!(t.counted_ranges("n0"), vec![first]);
    assert!(t.successors_of("n0").is_empty(), "a tail streams to no one");
    let masters: Vec<&str> = ["n0", "n1", "n2"]
        .into_iter()
        .filter(|n| t.redis_role(n) == RedisRole::Master)
        .collect();
    let slots: u32 = masters
        .iter()
        .flat_map(|n| t.counted_ranges(n))
        .map(|r| r.len())
        .sum();
    assert_eq!(slots, quiver_resp::slot::SLOTS);
    // A node in no chain is a master without slots.
    let mut lone = t.clone();
    lone.shards[0].chain.retain(|m| m != "n0");
    assert_eq!(lone.redis_role("n0"), RedisRole::Master);
    assert!(lone.counted_ranges("n0").is_empty());
}
