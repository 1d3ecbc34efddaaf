//! `ClusterClient` reading multigets from replicas (`read_from_replicas`) against the scripted
//! cluster of `fake_cluster`: the fewest nodes contacted, `READONLY` on every connection (and
//! again on a new one), replicas that refuse or cannot be reached, and Redis's `CROSSSLOT`.

use std::io::Write;
use std::sync::mpsc;

use bytes::Bytes;
use quiver_client::cluster::{key_slot, ClusterClient};
use quiver_client::{ClientOptions, Connection, Error};
use quiver_testkit::port::free_port;

use crate::common::{read_exactly, FakeServer, TEST_READ_TIMEOUT};
use crate::fake_cluster::FakeCluster;

/// `READONLY` as a request.
const READONLY: &[u8] = b"*1\r\n$8\r\nREADONLY\r\n";

/// Three nodes, each the master of a third of the slots; node `i`'s ranges are replicated
/// on the nodes `replicas(i)` names (indices, or `None` for a dead address).
fn replicated(cross_slot: bool, replicas: impl Fn(usize) -> Vec<Option<usize>>) -> FakeCluster {
    let cluster = FakeCluster::start(3, cross_slot);
    let dead = format!("127.0.0.1:{}", free_port());
    for master in 0..3 {
        let addrs = replicas(master)
            .into_iter()
            .map(|r| r.map_or_else(|| dead.clone(), |r| cluster.addr(r)))
            .collect();
        cluster.model().replicas[master] = addrs;
    }
    cluster
}

/// A client of `cluster` with `read_from_replicas`.
fn replica_client(cluster: &FakeCluster) -> ClusterClient {
    let mut options = cluster.options();
    options.read_from_replicas = true;
    ClusterClient::connect_with(options).unwrap()
}

/// Keys over every node's slots, each set (through the masters) to `v<i>`.
fn written(cluster: &FakeCluster, n: usize) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("rr:{i}").into_bytes()).collect();
    for node in 0..3 {
        assert!(keys.iter().any(|k| cluster.owner_of(k) == node));
    }
    let pairs: Vec<(&[u8], String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (&k[..], format!("v{i}")))
        .collect();
    cluster.client().multi_set(&pairs).unwrap();
    keys
}

fn expected(n: usize) -> Vec<Option<Bytes>> {
    (0..n).map(|i| Some(Bytes::from(format!("v{i}")))).collect()
}

/// MGETs each node received.
fn mgets(cluster: &FakeCluster) -> Vec<usize> {
    (0..3)
        .map(|n| cluster.model().received(n, "MGET").len())
        .collect()
}

#[test]
fn replica_reads_contact_the_fewest_nodes() {
    // Chains of 2 on a ring (node i's ranges on i, i + 1): two nodes hold every key.
    let cluster = replicated(false, |i| vec![Some((i + 1) % 3)]);
    let keys = written(&cluster, 60);
    let mut client = replica_client(&cluster);
    assert!(client.options().read_from_replicas);
    for k in &keys {
        let owner = cluster.owner_of(k);
        let replicas = client.slot_replicas(key_slot(k));
        assert_eq!(replicas, [cluster.addr((owner + 1) % 3).as_str()]);
    }
    let before = client.stats();
    assert_eq!(client.multi_get(&keys).unwrap(), expected(60));
    let stats = client.stats();
    assert_eq!(stats.multiget_keys - before.multiget_keys, 60);
    assert_eq!(stats.multiget_requests - before.multiget_requests, 2);
    // No MOVED: the replicas served the reads, so their connections had sent READONLY
    // (the fake, like Redis, redirects a replica read otherwise).
    assert_eq!((stats.moved, stats.retries, stats.node_failures), (0, 0, 0));
    assert_eq!(mgets(&cluster).iter().sum::<usize>(), 2);
    let readonly = |cluster: &FakeCluster| -> usize {
        (0..3)
            .map(|n| cluster.model().received(n, "READONLY").len())
            .sum()
    };
    // One connection per node contacted (the seed's included), each sent it once.
    let sent = readonly(&cluster);
    assert!((2..=3).contains(&sent), "{sent}");

    // Without the option: one MGET per master, and no READONLY.
    let mut plain = cluster.client();
    let before = mgets(&cluster);
    assert_eq!(plain.multi_get(&keys).unwrap(), expected(60));
    assert_eq!(plain.stats().multiget_requests, 3);
    assert_eq!(plain.stats().multiget_keys, 60);
    let after = mgets(&cluster);
    assert!((0..3).all(|n| after[n] == before[n] + 1), "{after:?}");
    assert_eq!(readonly(&cluster), sent);

    // Every node holding every range: one MGET.
    let cluster = replicated(false, |i| vec![Some((i + 1) % 3), Some((i + 2) % 3)]);
    let keys = written(&cluster, 60);
    let mut client = replica_client(&cluster);
    assert_eq!(client.multi_get(&keys).unwrap(), expected(60));
    assert_eq!(client.stats().multiget_requests, 1);
    // Other commands still go to the master: a GET of each key, one per key, no redirect.
    for (i, k) in keys.iter().enumerate().take(6) {
        assert_eq!(client.get(k).unwrap(), Some(Bytes::from(format!("v{i}"))));
    }
    client.multi_set(&[(&keys[0], "w")]).unwrap();
    assert_eq!(client.multi_exists(&keys).unwrap(), 60);
    assert_eq!(client.stats().moved, 0);
}

#[test]
fn a_replica_that_refuses_is_not_read_from_again_in_the_call() {
    let cluster = replicated(false, |i| vec![Some((i + 1) % 3), Some((i + 2) % 3)]);
    let keys = written(&cluster, 30);
    let mut client = replica_client(&cluster);
    assert_eq!(client.multi_get(&keys).unwrap(), expected(30));
    let before = mgets(&cluster);
    let chosen = (0..3).find(|&n| before[n] == 1).unwrap();
    // The chosen node refuses every request from now on, as a node that left the chains
    // before the tables say so would (MOVED to a key's master).
    let other = keys.iter().find(|k| cluster.owner_of(k) != chosen).unwrap();
    let owner = cluster.owner_of(other);
    let moved = format!("-MOVED {} {}\r\n", key_slot(other), cluster.addr(owner));
    for _ in 0..40 {
        cluster.model().script[chosen].push_back(moved.clone());
    }
    // Each call takes the next node of those that would do (the planner's turns): within
    // three calls one asks the refusing node.
    let mut refused = false;
    for _ in 0..3 {
        let (before, stats) = (mgets(&cluster), client.stats());
        assert_eq!(client.multi_get(&keys).unwrap(), expected(30));
        let after = mgets(&cluster);
        let requests = client.stats().multiget_requests - stats.multiget_requests;
        if after[chosen] == before[chosen] {
            assert_eq!(requests, 1, "{after:?}");
            continue;
        }
        // Asked once, refused; then one other node (master or replica of every key) serves
        // all.
        assert_eq!(after[chosen], before[chosen] + 1, "{after:?}");
        assert_eq!(requests, 2);
        assert_eq!(client.stats().moved - stats.moved, 1);
        refused = true;
        break;
    }
    assert!(refused, "no call asked node {chosen}");
}

#[test]
fn an_unreachable_replica_is_left_out_of_the_next_round() {
    // One dead node replicates every range: it alone would hold every key.
    let cluster = replicated(false, |_| vec![None]);
    let keys = written(&cluster, 30);
    let mut client = replica_client(&cluster);
    assert_eq!(client.multi_get(&keys).unwrap(), expected(30));
    let stats = client.stats();
    assert_eq!(stats.node_failures, 1);
    // The dead node took nothing; then one MGET per master.
    assert_eq!(stats.multiget_requests, 3);
    assert_eq!(mgets(&cluster), [1, 1, 1]);
}

#[test]
fn crossslot_replicas_get_one_request_per_slot() {
    // Redis-like nodes: keys of one slot per request, replicas included.
    let cluster = replicated(true, |i| vec![Some((i + 1) % 3), Some((i + 2) % 3)]);
    let keys = written(&cluster, 20);
    let mut client = replica_client(&cluster);
    assert_eq!(client.multi_get(&keys).unwrap(), expected(20));
    let mut slots: Vec<u16> = keys.iter().map(|k| key_slot(k)).collect();
    slots.sort_unstable();
    slots.dedup();
    let stats = client.stats();
    assert_eq!(stats.cross_slot, 1);
    // The refused request, then one per slot, all to the one node chosen.
    assert_eq!(stats.multiget_requests, 1 + slots.len() as u64);
    assert_eq!(mgets(&cluster).iter().filter(|&&n| n > 0).count(), 1);
    assert_eq!(stats.moved, 0);
}

/// `ClientOptions::readonly`: `READONLY` on connect, and again on the connection a reconnect
/// makes (the server's flag belongs to the connection it was sent on).
#[test]
fn readonly_is_sent_on_every_connect() {
    let (closed_tx, closed_rx) = mpsc::channel();
    let server = FakeServer::start(2, move |index, mut stream| {
        assert_eq!(read_exactly(&mut stream, READONLY.len()), READONLY);
        stream.write_all(b"+OK\r\n").unwrap();
        let ping = b"*1\r\n$4\r\nPING\r\n";
        assert_eq!(read_exactly(&mut stream, ping.len()), ping);
        stream.write_all(b"+PONG\r\n").unwrap();
        if index == 0 {
            // Closed while idle: the client's next call reconnects.
            drop(stream);
            closed_tx.send(()).unwrap();
        } else {
            read_exactly(&mut stream, 1);
        }
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.read_timeout = Some(TEST_READ_TIMEOUT);
    options.readonly = true;
    let mut conn = Connection::connect_with(options).unwrap();
    conn.ping().unwrap();
    closed_rx.recv().unwrap();
    conn.ping().unwrap();
    drop(conn);
    server.join();

    // A server that refuses READONLY (a standalone one) fails the connect.
    let server = FakeServer::start(1, |_, mut stream| {
        assert_eq!(read_exactly(&mut stream, READONLY.len()), READONLY);
        let refusal = b"-ERR This instance has cluster support disabled\r\n";
        stream.write_all(refusal).unwrap();
        read_exactly(&mut stream, 1);
    });
    let mut options = ClientOptions::new(server.addr.clone());
    options.read_timeout = Some(TEST_READ_TIMEOUT);
    options.readonly = true;
    let err = Connection::connect_with(options).unwrap_err();
    assert!(
        matches!(&err, Error::Server(text) if text.contains("cluster support disabled")),
        "{err:?}"
    );
    server.join();
}
