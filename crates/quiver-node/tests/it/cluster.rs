//! CLUSTER KEYSLOT, COUNTKEYSINSLOT and GETKEYSINSLOT on a standalone server, checked against
//! slots computed here with `quiver_store::slot::key_slot` (the engine's CRC16, which its own
//! tests check against Redis Cluster's published values), never against the server's own
//! answers. Byte-exact replies and errors are in the golden sessions `cluster/...`.

use std::collections::{BTreeMap, BTreeSet};

use quiver_client::{Connection, Value};
use quiver_node::testing::TestServer;
use quiver_store::slot::{key_slot, SLOTS};
use quiver_store::Clock;

use crate::bad_input::{client, client_with};

fn cmd(c: &mut Connection, args: &[&[u8]]) -> Value {
    match c.command(args) {
        Ok(v) => v,
        Err(quiver_client::Error::Server(text) | quiver_client::Error::NoAuth(text)) => {
            Value::Error(text)
        }
        Err(e) => panic!("{args:?}: {e}"),
    }
}

fn int(c: &mut Connection, args: &[&[u8]]) -> i64 {
    match cmd(c, args) {
        Value::Integer(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn error(c: &mut Connection, args: &[&[u8]]) -> String {
    match cmd(c, args) {
        Value::Error(text) => text,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn keyslot(c: &mut Connection, key: &[u8]) -> i64 {
    int(c, &[b"CLUSTER", b"KEYSLOT", key])
}

fn count_in_slot(c: &mut Connection, slot: u16) -> i64 {
    int(
        c,
        &[b"CLUSTER", b"COUNTKEYSINSLOT", slot.to_string().as_bytes()],
    )
}

/// GETKEYSINSLOT's keys, in the server's order.
fn keys_in_slot(c: &mut Connection, slot: u16, count: u64) -> Vec<Vec<u8>> {
    let reply = cmd(
        c,
        &[
            b"CLUSTER",
            b"GETKEYSINSLOT",
            slot.to_string().as_bytes(),
            count.to_string().as_bytes(),
        ],
    );
    let Value::Array(items) = reply else {
        panic!("GETKEYSINSLOT {slot} {count}: {reply:?}");
    };
    items
        .iter()
        .map(|i| i.as_bytes().expect("a bulk key").to_vec())
        .collect()
}

/// The keys written, by the slot `key_slot` gives them.
type BySlot = BTreeMap<u16, BTreeSet<Vec<u8>>>;

fn write_keys(c: &mut Connection, keys: &[Vec<u8>]) -> BySlot {
    let mut by_slot = BySlot::new();
    for chunk in keys.chunks(100) {
        let pairs: Vec<(&[u8], &[u8])> = chunk.iter().map(|k| (&k[..], &b"v"[..])).collect();
        c.multi_set(&pairs).unwrap();
    }
    for k in keys {
        by_slot.entry(key_slot(k)).or_default().insert(k.clone());
    }
    by_slot
}

/// Keys with hash tags (many in one slot each, the edge cases of the tag rule included) and
/// keys without (spread over the slots).
fn test_keys() -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for tag in ["user1000", "user1001", "order:7", "{", "}"] {
        for i in 0..40 {
            keys.push(format!("{{{tag}}}:{i}").into_bytes());
        }
    }
    for i in 0..30 {
        // The first `{...}` counts, and an empty one means the whole key is hashed.
        keys.push(format!("x{i}{{user1000}}{{other}}").into_bytes());
        keys.push(format!("{{}}{i}{{user1000}}").into_bytes());
    }
    for i in 0..600 {
        keys.push(format!("plain:{i}").into_bytes());
    }
    keys.push(b"\x00\xff\r\n{user1001}".to_vec());
    keys
}

fn check_slots(c: &mut Connection, by_slot: &BySlot) {
    let mut total = 0;
    for (&slot, expected) in by_slot {
        total += expected.len();
        assert_eq!(
            count_in_slot(c, slot),
            expected.len() as i64,
            "COUNTKEYSINSLOT {slot}"
        );
        let all = keys_in_slot(c, slot, 1 << 40);
        let found: BTreeSet<Vec<u8>> = all.iter().cloned().collect();
        assert_eq!(found.len(), all.len(), "GETKEYSINSLOT {slot}: repeats");
        assert_eq!(&found, expected, "GETKEYSINSLOT {slot}");
        let some = keys_in_slot(c, slot, 3);
        assert_eq!(some.len(), expected.len().min(3), "GETKEYSINSLOT {slot} 3");
        assert!(
            some.iter().all(|k| expected.contains(k)),
            "{slot}: {some:?}"
        );
        assert_eq!(some.iter().collect::<BTreeSet<_>>().len(), some.len());
        assert!(keys_in_slot(c, slot, 0).is_empty());
    }
    assert_eq!(total, test_keys().len());
    // Slots with no key, at both ends and between the ranges partitions own.
    for slot in [0, 1, SLOTS as u16 / 2, SLOTS as u16 - 1]
        .into_iter()
        .chain((1..8).map(|i| (i * SLOTS / 8) as u16))
        .filter(|s| !by_slot.contains_key(s))
    {
        assert_eq!(count_in_slot(c, slot), 0, "empty slot {slot}");
        assert!(keys_in_slot(c, slot, 10).is_empty(), "empty slot {slot}");
    }
}

#[test]
fn slots_of_keys_with_and_without_hash_tags() {
    for partitions in [4, 7, 1] {
        let server = TestServer::start_with(|c| c.node.partitions = partitions);
        let mut c = client(server.addr);
        let keys = test_keys();
        for k in &keys {
            assert_eq!(keyslot(&mut c, k), i64::from(key_slot(k)), "{k:?}");
        }
        assert_eq!(keyslot(&mut c, b"{user1000}.following"), 3443);
        assert_eq!(
            keyslot(&mut c, b"x{}{user1000}"),
            i64::from(key_slot(b"x{}{user1000}"))
        );
        assert_ne!(key_slot(b"x{}{user1000}"), key_slot(b"user1000"));

        let mut by_slot = write_keys(&mut c, &keys);
        let tagged = key_slot(b"user1000");
        // `{user1000}:i` and `xi{user1000}{other}`; `{}i{user1000}` hashes whole.
        let n = by_slot[&tagged].len();
        assert!(n >= 70, "{n}");
        assert!(!by_slot[&tagged].contains(&b"{}0{user1000}"[..]));
        check_slots(&mut c, &by_slot);

        // Deleting and overwriting keys, then a slot emptied.
        let gone: Vec<Vec<u8>> = by_slot[&tagged].iter().take(25).cloned().collect();
        let refs: Vec<&[u8]> = gone.iter().map(|k| &k[..]).collect();
        assert_eq!(c.multi_delete(&refs).unwrap(), 25);
        c.set(&by_slot[&tagged].iter().last().unwrap()[..], "again")
            .unwrap();
        for k in &gone {
            by_slot.get_mut(&tagged).unwrap().remove(k);
        }
        assert_eq!(count_in_slot(&mut c, tagged), n as i64 - 25);
        let order = key_slot(b"order:7");
        let order_keys: Vec<Vec<u8>> = by_slot.remove(&order).unwrap().into_iter().collect();
        let refs: Vec<&[u8]> = order_keys.iter().map(|k| &k[..]).collect();
        c.multi_delete(&refs).unwrap();
        assert_eq!(count_in_slot(&mut c, order), 0);
        assert!(keys_in_slot(&mut c, order, 100).is_empty());
        let remaining: usize = by_slot.values().map(BTreeSet::len).sum();
        assert_eq!(int(&mut c, &[b"DBSIZE"]), remaining as i64);
    }
}

#[test]
fn a_transaction_sees_its_own_writes_to_a_slot() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let slot = key_slot(b"t");
    c.multi_set(&[("{t}a", "1"), ("{t}b", "2"), ("{t}c", "3"), ("other", "4")])
        .unwrap();
    cmd(&mut c, &[b"MULTI"]);
    for line in [
        "DEL {t}a".to_string(),
        "SET {t}d 4".into(),
        "SET {t}b 5".into(),
        format!("CLUSTER COUNTKEYSINSLOT {slot}"),
        format!("CLUSTER GETKEYSINSLOT {slot} 100"),
        format!("CLUSTER GETKEYSINSLOT {slot} 2"),
        "FLUSHALL".into(),
        "SET {t}e 6".into(),
        format!("CLUSTER COUNTKEYSINSLOT {slot}"),
        format!("CLUSTER GETKEYSINSLOT {slot} 100"),
    ] {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        assert_eq!(cmd(&mut c, &args), Value::Simple("QUEUED".into()), "{line}");
    }
    let Value::Array(replies) = cmd(&mut c, &[b"EXEC"]) else {
        panic!("EXEC");
    };
    let keys = |v: &Value| -> BTreeSet<Vec<u8>> {
        let Value::Array(items) = v else {
            panic!("{v:?}");
        };
        items
            .iter()
            .map(|i| i.as_bytes().unwrap().to_vec())
            .collect()
    };
    let set =
        |ks: &[&str]| -> BTreeSet<Vec<u8>> { ks.iter().map(|k| k.as_bytes().to_vec()).collect() };
    assert_eq!(replies[3], Value::Integer(3));
    assert_eq!(keys(&replies[4]), set(&["{t}b", "{t}c", "{t}d"]));
    let two = keys(&replies[5]);
    assert_eq!(two.len(), 2);
    assert!(two.is_subset(&set(&["{t}b", "{t}c", "{t}d"])));
    assert_eq!(replies[8], Value::Integer(1));
    assert_eq!(keys(&replies[9]), set(&["{t}e"]));
    assert_eq!(count_in_slot(&mut c, slot), 1);
    assert_eq!(keys_in_slot(&mut c, slot, 10), [b"{t}e".to_vec()]);
}

/// Quiver never counts a key whose time has passed (Redis counts one until it reclaims it).
#[test]
fn expired_keys_are_not_in_their_slot() {
    let clock = Clock::manual(1_700_000_000_000);
    let server = TestServer::start_with_clock(clock.clone(), |_| {});
    let mut c = client(server.addr);
    let slot = key_slot(b"t");
    cmd(&mut c, &[b"SET", b"{t}short", b"v", b"PX", b"100"]);
    cmd(&mut c, &[b"SET", b"{t}long", b"v", b"EX", b"100"]);
    assert_eq!(count_in_slot(&mut c, slot), 2);
    clock.advance(100);
    assert_eq!(count_in_slot(&mut c, slot), 1);
    assert_eq!(keys_in_slot(&mut c, slot, 10), [b"{t}long".to_vec()]);
}

#[test]
fn help_lists_what_quiver_answers_and_the_rest_is_disabled() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    let Value::Array(lines) = cmd(&mut c, &[b"CLUSTER", b"HELP"]) else {
        panic!("CLUSTER HELP");
    };
    let text: Vec<String> = lines
        .iter()
        .map(|l| match l {
            Value::Simple(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(text[0].starts_with("CLUSTER <subcommand>"), "{text:?}");
    for sub in [
        "KEYSLOT <key>",
        "COUNTKEYSINSLOT <slot>",
        "GETKEYSINSLOT <slot> <count>",
        "HELP",
    ] {
        assert!(text.iter().any(|l| l == sub), "{sub} in {text:?}");
    }
    assert!(!text.iter().any(|l| l.starts_with("SLOTS")), "{text:?}");
    for sub in ["SLOTS", "NODES", "INFO", "SHARDS", "MYID", "LINKS"] {
        assert_eq!(
            error(&mut c, &[b"CLUSTER", sub.as_bytes()]),
            "ERR This instance has cluster support disabled"
        );
    }
}

/// As in Redis: an unknown subcommand and a subcommand's arity are refused before
/// authentication; a known subcommand needs it.
#[test]
fn subcommands_are_looked_up_before_authentication() {
    let server = TestServer::start_with(|c| c.service.requirepass = Some("pw".into()));
    let mut c = client(server.addr);
    assert_eq!(
        error(&mut c, &[b"CLUSTER", b"foo"]),
        "ERR unknown subcommand 'foo'. Try CLUSTER HELP."
    );
    assert_eq!(
        error(&mut c, &[b"CLUSTER", b"KEYSLOT"]),
        "ERR wrong number of arguments for 'cluster|keyslot' command"
    );
    assert_eq!(
        error(&mut c, &[b"CLUSTER", b"KEYSLOT", b"x"]),
        "NOAUTH Authentication required."
    );
    let mut authed = client_with(server.addr, |o| o.password = Some("pw".into()));
    assert_eq!(keyslot(&mut authed, b"x"), 16287);
}

/// Refusals count as Redis counts them: a subcommand's arity as a rejected call of the
/// command, an unknown subcommand against nothing; an invalid slot is a failed call.
#[test]
fn commandstats_count_cluster_like_redis() {
    let server = TestServer::start();
    let mut c = client(server.addr);
    error(&mut c, &[b"CLUSTER", b"KEYSLOT"]);
    error(&mut c, &[b"CLUSTER", b"nosuch"]);
    error(&mut c, &[b"CLUSTER", b"COUNTKEYSINSLOT", b"16384"]);
    keyslot(&mut c, b"k");
    cmd(&mut c, &[b"MULTI"]);
    error(&mut c, &[b"CLUSTER", b"nosuch"]);
    assert!(error(&mut c, &[b"EXEC"]).starts_with("EXECABORT"));
    let stats = c.info(Some("commandstats")).unwrap();
    let line = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_cluster:"))
        .unwrap_or_else(|| panic!("no cmdstat_cluster:\n{stats}"));
    let field = |key: &str| -> u64 {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        (
            field("calls"),
            field("rejected_calls"),
            field("failed_calls")
        ),
        (2, 1, 1),
        "{line}"
    );
}
