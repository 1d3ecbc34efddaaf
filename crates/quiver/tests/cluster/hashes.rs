//! Large hashes on cluster nodes (issue 36): a hash past the listpack's thresholds keeps its
//! fields in buckets of hidden databases, under keys of its own slot, so a move of the slot
//! carries them with the hash, and the source drops them with it. (Chain replication of large
//! hashes, across kill -9 of any member: the chain crash loop's hashes, `kill_loop::hash`;
//! read from replicas by redis-py: `redis_py_cluster.py`.)

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use quiver_client::{ClusterClient, Value};

use crate::harness::{text, Cluster};
use crate::moves::{owners, pairs_in, wait_settled, wait_store_keys};

/// Fields of the hash: past the listpack's 512 entries, so it is large.
const FIELDS: usize = 1200;
/// Fields per HSET.
const HSET_FIELDS: usize = 200;

/// HSET of fields `fields` of `key` to `v<i>.<round>`; how many it added.
fn hset(client: &mut ClusterClient, key: &str, fields: std::ops::Range<usize>, round: u32) -> i64 {
    let mut added = 0;
    let all: Vec<usize> = fields.collect();
    for chunk in all.chunks(HSET_FIELDS) {
        let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.as_bytes().to_vec()];
        for i in chunk {
            args.push(format!("f{i}").into_bytes());
            args.push(format!("v{i}.{round}").into_bytes());
        }
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        match client.command(&args, 1) {
            Ok(Value::Integer(n)) => added += n,
            other => panic!("HSET {key}: {other:?}"),
        }
    }
    added
}

/// HGETALL of `key` as a map (its order is the large hash's own).
fn hgetall(client: &mut ClusterClient, key: &str) -> BTreeMap<String, String> {
    let reply = client.command(&[b"HGETALL", key.as_bytes()], 1);
    let Ok(Value::Array(items)) = reply else {
        panic!("HGETALL {key}: {reply:?}")
    };
    items
        .chunks(2)
        .map(|p| (text(&p[0]), text(&p[1])))
        .collect()
}

/// `args` sent where its key (`args[1]`) is.
fn call(client: &mut ClusterClient, args: &[&str]) -> Value {
    call_at(client, args, 1)
}

/// `args` sent where `args[key_index]` is.
fn call_at(client: &mut ClusterClient, args: &[&str], key_index: usize) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    client
        .command(&args, key_index)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// OBJECT ENCODING of `key`, asked of its owner.
fn encoding(client: &mut ClusterClient, key: &str) -> String {
    text(&call_at(client, &["OBJECT", "ENCODING", key], 2))
}

/// A large hash moves to another node and back with its slot range: every field arrives,
/// writes at the new owner (more fields, a deletion) travel back, the sources drop it (their
/// keys go to 0), and it stays large throughout.
#[test]
fn a_large_hash_moves_whole_with_its_slot() {
    let cluster = Cluster::start(3);
    // node-1 owns 0-5460, node-2 5461-10922.
    let (slots, lo, hi) = ("1000-1999", 1000, 1999);
    let key = pairs_in("big", lo, hi, 1).remove(0).0;
    let mut client = cluster.client();
    assert_eq!(hset(&mut client, &key, 0..FIELDS, 0), FIELDS as i64);
    assert_eq!(encoding(&mut client, &key), "hashtable");
    let mut want: BTreeMap<String, String> = (0..FIELDS)
        .map(|i| (format!("f{i}"), format!("v{i}.0")))
        .collect();
    assert_eq!(hgetall(&mut client, &key), want);

    cluster.quiver_ok(&["move-slots", "--slots", slots, "--to", "node-2"]);
    let status = wait_settled(&cluster);
    assert_eq!(
        owners(&status, lo, hi),
        BTreeSet::from(["node-2".to_string()])
    );
    assert_eq!(hgetall(&mut client, &key), want, "on node-2");
    wait_store_keys(&cluster, 0, 0, "node-1 dropped the moved range");

    // Written at node-2: half the fields again, more fields, one deleted.
    assert_eq!(hset(&mut client, &key, FIELDS / 2..FIELDS + 100, 1), 100);
    for i in FIELDS / 2..FIELDS + 100 {
        want.insert(format!("f{i}"), format!("v{i}.1"));
    }
    assert_eq!(call(&mut client, &["HDEL", &key, "f7"]), Value::Integer(1));
    want.remove("f7");

    cluster.quiver_ok(&["move-slots", "--slots", slots, "--to", "node-1"]);
    let status = wait_settled(&cluster);
    assert_eq!(
        owners(&status, lo, hi),
        BTreeSet::from(["node-1".to_string()])
    );
    assert_eq!(hgetall(&mut client, &key), want, "back on node-1");
    assert_eq!(
        call(&mut client, &["HLEN", &key]),
        Value::Integer(want.len() as i64)
    );
    assert_eq!(
        text(&call(&mut client, &["HGET", &key, "f1100"])),
        "v1100.1"
    );
    assert_eq!(encoding(&mut client, &key), "hashtable");
    wait_store_keys(&cluster, 1, 0, "node-2 dropped the range moved back");
}
