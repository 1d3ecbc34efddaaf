//! `ClusterClient`'s routing against the scripted cluster of `fake_cluster`: one request per
//! node (per slot after `CROSSSLOT`), `ASK`, `MOVED` with a stale table, `TRYAGAIN` and
//! `CLUSTERDOWN` retries, unreachable nodes, and the bounds on all of them.

use bytes::Bytes;
use quiver_client::cluster::{key_slot, ClusterClient, ClusterOptions, REDIRECTS_MAX};
use quiver_client::Error;
use quiver_testkit::port::free_port;

use crate::fake_cluster::FakeCluster;

fn keys(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}:{i}").into_bytes())
        .collect()
}

/// Distinct slots among `keys` that live on `node`.
fn slots_on(cluster: &FakeCluster, node: usize, keys: &[Vec<u8>]) -> usize {
    let mut slots: Vec<u16> = keys
        .iter()
        .filter(|k| cluster.owner_of(k) == node)
        .map(|k| key_slot(k))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots.len()
}

#[test]
fn single_key_commands_go_to_the_slot_owner() {
    let cluster = FakeCluster::start(3, true);
    let mut client = cluster.client();
    assert_eq!(client.nodes().len(), 3);
    let keys = keys("single", 60);
    for (i, k) in keys.iter().enumerate() {
        client.set(k, format!("v{i}")).unwrap();
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(client.get(k).unwrap(), Some(Bytes::from(format!("v{i}"))));
        assert!(client.exists(k).unwrap());
        let owner = cluster.owner_of(k);
        assert_eq!(
            client.slot_owner(key_slot(k)),
            Some(cluster.addr(owner).as_str())
        );
        assert!(cluster.model().data[owner].contains_key(k), "{k:?}");
    }
    assert_eq!(client.incr("counter").unwrap(), 1);
    assert_eq!(client.incr("counter").unwrap(), 2);
    assert!(client.delete(&keys[0]).unwrap());
    assert!(!client.delete(&keys[0]).unwrap());
    let stats = client.stats();
    assert_eq!((stats.moved, stats.asked, stats.retries), (0, 0, 0));
    assert_eq!(stats.refreshes, 1);
}

/// Quiver takes keys of many slots in one request: one MSET and one MGET per node.
#[test]
fn quiver_like_nodes_get_one_request_per_node() {
    let cluster = FakeCluster::start(3, false);
    let mut client = cluster.client();
    let keys = keys("wide", 300);
    let pairs: Vec<(&[u8], String)> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(i, k)| (k.as_slice(), format!("v{i}")))
        .collect();
    client.multi_set(&pairs).unwrap();
    let values = client.multi_get(&keys).unwrap();
    assert_eq!(values.len(), keys.len());
    for (i, value) in values.iter().enumerate() {
        let want = (i % 3 != 0).then(|| Bytes::from(format!("v{i}")));
        assert_eq!(value, &want, "key {i}");
    }
    for node in 0..3 {
        let model = cluster.model();
        assert_eq!(model.received(node, "MSET").len(), 1, "node {node}");
        assert_eq!(model.received(node, "MGET").len(), 1, "node {node}");
    }
    assert_eq!(client.multi_exists(&keys).unwrap(), 200);
    assert_eq!(client.multi_delete(&keys).unwrap(), 200);
    assert_eq!(client.multi_exists(&keys).unwrap(), 0);
    let stats = client.stats();
    assert_eq!(stats.cross_slot, 0);
    assert_eq!(stats.requests, 5 * 3);
}

/// Redis refuses keys of several slots: after one `CROSSSLOT` per node, one request per slot,
/// and the next call goes per slot straight away.
#[test]
fn crossslot_nodes_get_one_request_per_slot() {
    let cluster = FakeCluster::start(3, true);
    let mut client = cluster.client();
    let keys = keys("narrow", 200);
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), k.as_slice())).collect();
    client.multi_set(&pairs).unwrap();
    assert_eq!(client.stats().cross_slot, 3);
    let mut wanted: Vec<Vec<u8>> = keys.clone();
    wanted.push(b"missing".to_vec());
    let values = client.multi_get(&wanted).unwrap();
    for (k, v) in wanted.iter().zip(&values) {
        let want = (k != b"missing").then(|| Bytes::from(k.clone()));
        assert_eq!(v, &want);
    }
    assert_eq!(client.stats().cross_slot, 3, "the per-slot flag is kept");
    for node in 0..3 {
        // (Counted before the model is locked: `slots_on` locks it.)
        let slots = slots_on(&cluster, node, &keys);
        let mget_slots = slots_on(&cluster, node, &wanted);
        let model = cluster.model();
        // The refused one spanning slots, then one per slot.
        assert_eq!(model.received(node, "MSET").len(), 1 + slots, "node {node}");
        let mgets = model.received(node, "MGET").len();
        assert_eq!(mgets, mget_slots, "node {node}");
    }
}

/// `ASK`: `ASKING` then the command to the target, once; the table is unchanged.
#[test]
fn ask_sends_asking_then_the_command_to_the_target_once() {
    let cluster = FakeCluster::start(2, true);
    let mut client = cluster.client();
    let k = b"migrating-key".to_vec();
    let slot = key_slot(&k);
    let (owner, target) = {
        let owner = cluster.owner_of(&k);
        (owner, 1 - owner)
    };
    {
        let mut model = cluster.model();
        model.migrating.insert(slot, target);
        model.data[target].insert(k.clone(), b"moved-value".to_vec());
    }
    for round in 1..=2 {
        assert_eq!(
            client.get(&k).unwrap().as_deref(),
            Some(&b"moved-value"[..])
        );
        assert_eq!(client.stats().asked, round);
        assert_eq!(client.slot_owner(slot), Some(cluster.addr(owner).as_str()));
    }
    let mut names = cluster.model().names(target);
    names.retain(|n| n != "CLUSTER"); // The seed answered CLUSTER SLOTS too.
    assert_eq!(names, ["ASKING", "GET", "ASKING", "GET"]);
    assert_eq!(cluster.model().received(owner, "GET").len(), 2);
    assert_eq!(client.stats().moved, 0);
}

/// A multi-key request refused with `ASK` for one slot: that slot's keys go to the target
/// after `ASKING`, the others back to the node.
#[test]
fn ask_in_a_multi_get_sends_the_slot_s_keys_to_the_target() {
    let cluster = FakeCluster::start(2, false);
    let mut client = cluster.client();
    let keys = keys("mask", 50);
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), k.as_slice())).collect();
    client.multi_set(&pairs).unwrap();
    let moving = keys[7].clone();
    let (owner, slot) = (cluster.owner_of(&moving), key_slot(&moving));
    {
        let mut model = cluster.model();
        let value = model.data[owner].remove(&moving).unwrap();
        model.data[1 - owner].insert(moving.clone(), value);
        model.migrating.insert(slot, 1 - owner);
    }
    let values = client.multi_get(&keys).unwrap();
    for (k, v) in keys.iter().zip(&values) {
        assert_eq!(v.as_deref(), Some(k.as_slice()));
    }
    assert_eq!(client.stats().asked, 1);
    let target_names = cluster.model().names(1 - owner);
    assert_eq!(&target_names[target_names.len() - 2..], ["ASKING", "MGET"]);
    let asked = cluster.model().received(1 - owner, "MGET").pop().unwrap();
    assert!(asked[1..].iter().all(|k| key_slot(k) == slot), "{asked:?}");
}

/// A stale table: `MOVED` updates the slot, the table is read again, the command retried.
#[test]
fn moved_is_followed_and_refreshes_the_table() {
    let cluster = FakeCluster::start(3, true);
    let stale = {
        let model = cluster.model();
        let everything_on_0 = vec![0; model.owners.len()];
        crate::fake_cluster::ranges(&everything_on_0, &model.addrs)
    };
    cluster.model().slots_replies.push_back(stale);
    let mut client = cluster.client();
    assert_eq!(client.nodes(), [cluster.addr(0)]);
    let k = (0..)
        .map(|i| format!("moved:{i}").into_bytes())
        .find(|k| cluster.owner_of(k) == 2)
        .unwrap();
    client.set(&k, "v").unwrap();
    assert_eq!(client.stats().moved, 1);
    assert_eq!(client.stats().refreshes, 2);
    assert_eq!(
        client.slot_owner(key_slot(&k)),
        Some(cluster.addr(2).as_str())
    );
    assert_eq!(client.nodes().len(), 3);
    assert_eq!(cluster.model().data[2].get(&k).unwrap(), b"v");
    assert_eq!(client.get(&k).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(client.stats().moved, 1);
}

/// A multi-key call on a stale table: the refused requests' keys are regrouped and resent.
#[test]
fn moved_in_a_multi_set_regroups_the_keys() {
    let cluster = FakeCluster::start(3, false);
    let stale = {
        let model = cluster.model();
        let everything_on_1 = vec![1; model.owners.len()];
        crate::fake_cluster::ranges(&everything_on_1, &model.addrs)
    };
    cluster.model().slots_replies.push_back(stale);
    let mut client = cluster.client();
    let keys = keys("regroup", 120);
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), k.as_slice())).collect();
    client.multi_set(&pairs).unwrap();
    for k in &keys {
        let owner = cluster.owner_of(k);
        assert!(cluster.model().data[owner].contains_key(k), "{k:?}");
    }
    assert_eq!(client.stats().moved, 1);
    let values = client.multi_get(&keys).unwrap();
    assert!(keys
        .iter()
        .zip(&values)
        .all(|(k, v)| v.as_deref() == Some(k.as_slice())));
    // Node 1 refused the first MSET; then each node got one.
    for node in 0..3 {
        let msets = cluster.model().received(node, "MSET").len();
        assert_eq!(msets, if node == 1 { 2 } else { 1 }, "node {node}");
    }
}

#[test]
fn tryagain_and_clusterdown_are_retried() {
    let cluster = FakeCluster::start(1, true);
    let mut client = cluster.client();
    client.set("k", "v").unwrap();
    {
        let mut model = cluster.model();
        model.script[0].push_back("-TRYAGAIN Multiple keys request during rehashing\r\n".into());
        model.script[0].push_back("-CLUSTERDOWN The cluster is down\r\n".into());
    }
    assert_eq!(client.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(client.stats().retries, 2);
    cluster.model().script[0].push_back("-TRYAGAIN again\r\n".into());
    assert_eq!(client.multi_get(&["k", "k"]).unwrap().len(), 2);
    assert_eq!(client.stats().retries, 3);
}

/// Every bound ends in an error naming the last redirect; the connection stays usable.
#[test]
fn endless_redirects_end_in_an_error_after_the_bound() {
    let cluster = FakeCluster::start(2, true);
    let mut client = cluster.client();
    let k = b"bounded".to_vec();
    let (owner, slot) = (cluster.owner_of(&k), key_slot(&k));
    let other = cluster.addr(1 - owner);
    let own = cluster.addr(owner);
    {
        // Each node sends the key to the other, forever.
        let mut model = cluster.model();
        for _ in 0..REDIRECTS_MAX {
            model.script[owner].push_back(format!("-MOVED {slot} {other}\r\n"));
            model.script[1 - owner].push_back(format!("-MOVED {slot} {own}\r\n"));
        }
    }
    let err = client.get(&k).unwrap_err();
    let Error::Redirects { attempts, last } = &err else {
        panic!("expected Error::Redirects, got {err:?}");
    };
    assert_eq!(*attempts, REDIRECTS_MAX);
    assert!(last.starts_with(&format!("MOVED {slot} ")), "{last}");
    assert!(err.to_string().contains("MOVED"), "{err}");
    let gets: usize = (0..2)
        .map(|n| cluster.model().received(n, "GET").len())
        .sum();
    assert_eq!(gets, REDIRECTS_MAX);

    cluster.model().script.iter_mut().for_each(|s| s.clear());
    {
        let mut model = cluster.model();
        for _ in 0..REDIRECTS_MAX {
            model.script[owner].push_back("-TRYAGAIN busy\r\n".into());
        }
    }
    let err = client.multi_get(&[&k]).unwrap_err();
    assert!(
        matches!(&err, Error::Redirects { last, .. } if last == "TRYAGAIN busy"),
        "{err:?}"
    );
    {
        let mut model = cluster.model();
        for _ in 0..REDIRECTS_MAX {
            model.script[owner].push_back("-CLUSTERDOWN The cluster is down\r\n".into());
        }
    }
    let err = client.get(&k).unwrap_err();
    assert!(
        matches!(&err, Error::ClusterDown(t) if t.starts_with("CLUSTERDOWN")),
        "{err:?}"
    );
    // Every reply was read: the connections are in step.
    client.set(&k, "fine").unwrap();
    assert_eq!(client.get(&k).unwrap().as_deref(), Some(&b"fine"[..]));
}

/// Other error replies come back as they are, after every node's replies were read.
#[test]
fn other_error_replies_are_returned_and_the_connections_stay_in_step() {
    let cluster = FakeCluster::start(3, false);
    let mut client = cluster.client();
    let keys = keys("err", 30);
    cluster.model().script[1].push_back("-WRONGTYPE Operation against a key\r\n".into());
    let err = client.multi_get(&keys).unwrap_err();
    assert!(
        matches!(&err, Error::Server(t) if t.starts_with("WRONGTYPE")),
        "{err:?}"
    );
    assert_eq!(client.multi_get(&keys).unwrap(), vec![None; keys.len()]);
    cluster.model().script[0].push_back("-ERR nope\r\n".into());
    let k0 = keys.iter().find(|k| cluster.owner_of(k) == 0).unwrap();
    assert!(matches!(client.get(k0).unwrap_err(), Error::Server(t) if t == "ERR nope"));
    let err = client.command(&[b"GET"], 1).unwrap_err();
    assert!(
        matches!(err, Error::KeyIndex { index: 1, args: 1 }),
        "{err:?}"
    );
    assert_eq!(client.multi_get::<&[u8]>(&[]).unwrap(), vec![]);
    assert_eq!(client.multi_delete::<&[u8]>(&[]).unwrap(), 0);
}

/// A node nobody listens on: the table is read again from another node, and the command
/// goes where the new table says.
#[test]
fn an_unreachable_node_makes_the_client_reread_the_table() {
    let cluster = FakeCluster::start(2, true);
    let dead = format!("127.0.0.1:{}", free_port());
    cluster
        .model()
        .slots_replies
        .push_back(vec![(0, 16383, dead.clone())]);
    let mut client = cluster.client();
    assert_eq!(client.nodes(), [dead.as_str()]);
    client.set("k", "v").unwrap();
    let stats = client.stats();
    assert_eq!((stats.node_failures, stats.refreshes), (1, 2));
    assert!(!client.nodes().contains(&dead.as_str()));
    assert_eq!(client.get("k").unwrap().as_deref(), Some(&b"v"[..]));

    // The same for a multi-key call.
    cluster
        .model()
        .slots_replies
        .push_back(vec![(0, 16383, dead.clone())]);
    client.refresh().unwrap();
    let keys = keys("dead", 40);
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), k.as_slice())).collect();
    client.multi_set(&pairs).unwrap();
    assert_eq!(client.stats().node_failures, 2);
    assert_eq!(client.multi_exists(&keys).unwrap(), 40);
}

/// Nothing reachable: `connect` fails naming every seed, a dead node fails after its bound.
#[test]
fn a_dead_cluster_is_a_clear_error() {
    let seeds = [
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    ];
    let err = ClusterClient::connect(&[&seeds[0], &seeds[1]]).unwrap_err();
    let Error::ClusterDown(text) = &err else {
        panic!("expected Error::ClusterDown, got {err:?}");
    };
    assert!(
        text.contains(&seeds[0]) && text.contains(&seeds[1]),
        "{text}"
    );
    let err = ClusterClient::connect_with(ClusterOptions::new(Vec::<String>::new())).unwrap_err();
    assert!(matches!(err, Error::ClusterDown(_)), "{err:?}");

    // Every CLUSTER SLOTS names a dead node: the connection error, after the bound.
    let cluster = FakeCluster::start(1, true);
    let dead = format!("127.0.0.1:{}", free_port());
    for _ in 0..10 {
        let stale = vec![(0, 16383, dead.clone())];
        cluster.model().slots_replies.push_back(stale);
    }
    let mut client = cluster.client();
    let err = client.get("k").unwrap_err();
    assert!(err.is_connection_error(), "{err:?}");
    assert_eq!(
        client.stats().node_failures,
        quiver_client::cluster::NODE_FAILURES_MAX as u64
    );
}
