use super::*;

use quiver_cluster::topology::Node;
use quiver_store::slot::{key_slot, SlotRange};

fn topology(n: usize) -> Topology {
    let nodes = (0..n)
        .map(|i| Node {
            id: format!("n{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            run: 0,
        })
        .collect();
    Topology::create(nodes, 1).unwrap()
}

/// Keys whose slots the 2-node topology gives to n0 (slots below 8192) and to n1.
fn keys_of(owner: usize) -> Vec<Vec<u8>> {
    (0..)
        .map(|i| format!("key:{i}").into_bytes())
        .filter(|k| (key_slot(k) >= 8192) == (owner == 1))
        .take(8)
        .collect()
}

fn route(node: &ClusterNode, keys: &[Vec<u8>]) -> Route {
    node.route(keys.iter().map(|k| &k[..]), false, false)
}

#[test]
fn keys_of_one_node_run_there_whatever_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    assert_eq!(route(&node, &keys_of(0)), Route::Down(DOWN_NO_TOPOLOGY));
    assert!(node.adopt(topology(2)).unwrap());

    let mine = keys_of(0);
    assert!(
        mine.iter()
            .map(|k| key_slot(k))
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 1
    );
    assert_eq!(route(&node, &mine), Route::Local);

    let theirs = keys_of(1);
    assert_eq!(
        route(&node, &theirs),
        Route::Moved {
            slot: key_slot(&theirs[0]),
            addr: "127.0.0.1:7001".into()
        }
    );
    let mixed = vec![mine[0].clone(), theirs[0].clone()];
    assert_eq!(route(&node, &mixed), Route::CrossSlot);
}

#[test]
fn only_newer_epochs_are_adopted_and_they_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), None, "127.0.0.1:7000".into()).unwrap();
    let id = node.id.clone();
    assert_eq!(id.len(), 40);
    let t1 = topology(2);
    let t2 = t1
        .with_migration(SlotRange { lo: 0, hi: 9 }, "n1")
        .unwrap()
        .with_migration_ended(SlotRange { lo: 0, hi: 9 }, true)
        .unwrap();
    assert!(node.adopt(t2.clone()).unwrap());
    assert!(!node.adopt(t1).unwrap(), "an older epoch is ignored");
    assert!(!node.adopt(t2.clone()).unwrap(), "so is the same one");
    assert_eq!(node.view().epoch(), 3);
    drop(node);

    let again = ClusterNode::open(dir.path(), None, "127.0.0.1:7000".into()).unwrap();
    assert_eq!(again.id, id, "the id is the directory's");
    assert_eq!(again.view().topology, Some(t2));
    assert!(matches!(
        ClusterNode::open(dir.path(), Some("other"), "127.0.0.1:7000".into()),
        Err(ClusterError::OtherNode { .. })
    ));
}

#[test]
fn an_unassigned_slot_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    let mut t = topology(2);
    t.shards.truncate(1); // slots 8192.. unassigned
    node.adopt(t).unwrap();
    assert_eq!(route(&node, &keys_of(1)), Route::Down(DOWN_UNSERVED));
    assert_eq!(route(&node, &keys_of(0)), Route::Local);
}

#[test]
fn a_damaged_state_file_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CLUSTER_FILE), b"{not json").unwrap();
    let e = ClusterNode::open(dir.path(), None, "127.0.0.1:7000".into())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(CLUSTER_FILE), "{e}");
}

#[tokio::test]
async fn a_frozen_range_holds_writes_then_reads() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    node.adopt(topology(2)).unwrap();
    let mine = keys_of(0);
    let slot = key_slot(&mine[0]);
    node.freeze(SlotRange { lo: slot, hi: slot }).await;
    let write = node.route(mine.iter().map(|k| &k[..]), true, false);
    assert_eq!(write, Route::Frozen { slot });
    assert_eq!(route(&node, &mine), Route::Local, "reads run");
    // Once the hand-over may commit, reads wait too.
    node.freeze_reads(SlotRange { lo: slot, hi: slot });
    assert_eq!(route(&node, &mine), Route::Frozen { slot });
    node.thaw(SlotRange { lo: slot, hi: slot });
    assert_eq!(route(&node, &mine), Route::Local);
    assert_eq!(
        node.route(mine.iter().map(|k| &k[..]), true, false),
        Route::Local
    );
}

#[test]
fn ranges_no_longer_held_are_dropped_and_the_list_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n1"), "127.0.0.1:7001".into()).unwrap();
    let t1 = topology(2);
    node.adopt(t1.clone()).unwrap();
    // n1 imports 0-99 (held), then the move is aborted: 0-99 is to be dropped.
    let importing = t1
        .with_migration(SlotRange { lo: 0, hi: 99 }, "n1")
        .unwrap();
    node.adopt(importing.clone()).unwrap();
    assert!(node.pending_drops().is_empty());
    node.adopt(
        importing
            .with_migration_ended(SlotRange { lo: 0, hi: 99 }, false)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(node.pending_drops(), vec![SlotRange { lo: 0, hi: 99 }]);
    // n1 hands 9000-9099 over: dropped too.
    let t = node.view().topology.clone().unwrap();
    let moved = t
        .with_migration(SlotRange { lo: 9000, hi: 9099 }, "n0")
        .unwrap()
        .with_migration_ended(SlotRange { lo: 9000, hi: 9099 }, true)
        .unwrap();
    node.adopt(moved).unwrap();
    drop(node);
    let node = ClusterNode::open(dir.path(), None, "127.0.0.1:7001".into()).unwrap();
    assert_eq!(
        node.pending_drops(),
        vec![
            SlotRange { lo: 0, hi: 99 },
            SlotRange { lo: 9000, hi: 9099 }
        ]
    );
    // Only what the node neither owns nor imports when the drop runs is deleted.
    assert_eq!(
        node.droppable(SlotRange { lo: 8990, hi: 9199 }),
        vec![SlotRange { lo: 9000, hi: 9099 }]
    );
    node.dropped(SlotRange { lo: 0, hi: 99 }).unwrap();
    assert_eq!(node.pending_drops(), vec![SlotRange { lo: 9000, hi: 9099 }]);
}

#[test]
fn a_restart_freezes_the_moves_it_was_making() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    let range = SlotRange { lo: 10, hi: 19 };
    node.adopt(topology(2).with_migration(range, "n1").unwrap())
        .unwrap();
    assert!(node.frozen().is_empty());
    drop(node);
    let node = ClusterNode::open(dir.path(), None, "127.0.0.1:7000".into()).unwrap();
    assert_eq!(node.frozen(), vec![range]);
    // Reads too: the hand-over may have committed before the restart.
    let key = (0..)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| range.contains(key_slot(k)))
        .unwrap();
    assert_eq!(
        route(&node, std::slice::from_ref(&key)),
        Route::Frozen {
            slot: key_slot(&key)
        }
    );
}

/// In a replicated cluster a node serves its chains only while it holds its lease, and only
/// at the run the topology names (a restarted node is out until readmitted).
#[test]
fn a_replicated_node_serves_only_leased_and_admitted() {
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    let mut t = topology(2);
    t.replicas = 2;
    t.shards[0].chain.push("n1".into());
    t.shards[1].chain.push("n0".into());
    t.nodes[0].run = node.run;
    t.validate().unwrap();
    assert!(node.adopt(t.clone()).unwrap());
    let mine = keys_of(0);
    assert_eq!(route(&node, &mine), Route::Down(DOWN_NO_LEASE));
    // A renewal after which etcd held a topology this node has not seen does not count.
    node.saw_topology(40);
    assert!(!node.lease_renewed(Instant::now(), Duration::from_secs(60), 41));
    assert!(!node.leased());
    assert_eq!(route(&node, &mine), Route::Down(DOWN_NO_LEASE));
    node.saw_topology(41);
    assert!(node.lease_renewed(Instant::now(), Duration::from_secs(60), 41));
    assert!(node.leased());
    assert_eq!(route(&node, &mine), Route::Local);
    // A replica read of the other chain too (READONLY), not a write.
    let theirs = keys_of(1);
    assert_eq!(
        node.route(theirs.iter().map(|k| &k[..]), false, true),
        Route::Local
    );
    assert!(matches!(
        node.route(theirs.iter().map(|k| &k[..]), true, false),
        Route::Moved { .. }
    ));

    let mut other_run = t.clone();
    other_run.epoch += 1;
    other_run.nodes[0].run = node.run.wrapping_add(1);
    assert!(node.adopt(other_run).unwrap());
    assert_eq!(route(&node, &mine), Route::Down(DOWN_NOT_ADMITTED));

    // A lease that lapsed.
    let dir = tempfile::tempdir().unwrap();
    let node = ClusterNode::open(dir.path(), Some("n0"), "127.0.0.1:7000".into()).unwrap();
    t.nodes[0].run = node.run;
    assert!(node.adopt(t).unwrap());
    assert!(node.lease_renewed(Instant::now(), Duration::from_millis(1), 0));
    std::thread::sleep(Duration::from_millis(5));
    assert!(!node.leased());
    assert_eq!(route(&node, &mine), Route::Down(DOWN_NO_LEASE));
}
