#!/usr/bin/env python3
"""redis-py's cluster client (redis.cluster.RedisCluster) against a Quiver cluster.

    redis_py_cluster.py PORT [REPLICAS]

PORT is any node's: the client discovers the others with CLUSTER SLOTS. With REPLICAS (the
cluster's chain length, 1 by default) above 1 the client reads from replicas too
(load balancing round robin over a range's members: READONLY connections to each), and CLUSTER SLOTS
must list REPLICAS-1 replicas per range. Sets 1000 keys (spread
over every node), reads them back in order with mget_nonatomic, checks get, delete and exists,
that cluster_slots and cluster_nodes parse into the whole cluster, a pipeline, and hashes (HSET of
10 fields per entity, a Feast-style pipeline of 32 HMGETs, a large hash of 600 fields, read from
every member). Exits 0 when
everything matched; otherwise prints the first mismatch and exits 1. Run by the cluster test
binary (crates/quiver/tests/cluster); scripts/test_deps.sh installs redis-py.
"""

import sys

from redis.cluster import RedisCluster

try:  # redis-py 5.3+; older ones only have read_from_replicas
    from redis.cluster import LoadBalancingStrategy
except ImportError:
    LoadBalancingStrategy = None

SLOTS = 16384
KEYS = 1000
PIPELINED = 50
# Keys read once per member of their chain.
REREADS = 100
# Fields of the large hash: past the listpack's 512 entries.
LARGE_FIELDS = 600


def check(ok, what):
    if not ok:
        print(f"redis_py_cluster.py: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    port = int(sys.argv[1])
    replicas = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    spread = {}
    if replicas > 1 and LoadBalancingStrategy is not None:
        spread = {"load_balancing_strategy": LoadBalancingStrategy.ROUND_ROBIN}
    elif replicas > 1:
        spread = {"read_from_replicas": True}
    rc = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, **spread)
    try:
        run(rc, replicas)
    finally:
        rc.close()


def run(rc, replicas):
    keys = [f"py:{i}" for i in range(KEYS)]
    values = [f"value-{i}" for i in range(KEYS)]
    for k, v in zip(keys, values):
        check(rc.set(k, v) is True, f"SET {k}")
    owners = {rc.get_node_from_key(k).name for k in keys}
    check(len(owners) == 3, f"the keys are on {len(owners)} nodes, not 3: {owners}")

    got = rc.mget_nonatomic(keys)
    check(got == values, f"mget_nonatomic: {got[:5]}... differs from {values[:5]}...")
    # Each read may go to any member of the key's chain (round robin with replicas): every
    # one has every acknowledged write.
    for k, v in zip(keys[:REREADS], values):
        for _ in range(replicas):
            got = rc.get(k)
            check(got == v, f"GET {k} (from any member): {got!r}, not {v!r}")
    check(rc.get("py:7") == "value-7", "GET py:7")
    check(rc.exists("py:7") == 1, "EXISTS py:7 before DEL")
    check(rc.delete("py:7") == 1, "DEL py:7")
    check(rc.get("py:7") is None, "GET py:7 after DEL")
    check(rc.exists("py:7") == 0, "EXISTS py:7 after DEL")
    check(rc.exists("py:8") == 1, "EXISTS py:8")
    check(rc.get("py:absent") is None, "GET of a key never set")

    # cluster_slots: {(lo, hi): {"primary": (host, port), "replicas": [...]}}, every slot once.
    slots = rc.cluster_slots()
    ranges = sorted(slots)
    check(ranges[0][0] == 0 and ranges[-1][1] == SLOTS - 1, f"cluster_slots: {ranges}")
    check(
        all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:])),
        f"cluster_slots: gaps or overlaps in {ranges}",
    )
    primaries = {slots[r]["primary"] for r in ranges}
    check(len(primaries) == 3, f"cluster_slots: primaries {primaries}")
    check(
        all(len(slots[r]["replicas"]) == replicas - 1 for r in ranges),
        f"cluster_slots: replicas {[slots[r]['replicas'] for r in ranges]}",
    )

    # cluster_nodes: {"host:port": {"node_id", "flags", "slots", ...}}, one of them myself.
    nodes = rc.cluster_nodes()
    check(len(nodes) == 3, f"cluster_nodes: {nodes}")
    check(
        {f"{h}:{p}" for h, p in primaries} == set(nodes),
        f"cluster_nodes {set(nodes)} vs cluster_slots {primaries}",
    )
    myself = [n for n in nodes.values() if "myself" in n["flags"]]
    check(len(myself) == 1, f"cluster_nodes: myself {myself}")
    check(
        sorted(n["node_id"] for n in nodes.values()) == ["node-1", "node-2", "node-3"],
        f"cluster_nodes: ids {[n['node_id'] for n in nodes.values()]}",
    )

    pipe = rc.pipeline()
    for i in range(PIPELINED):
        pipe.set(f"pipe:{i}", str(i))
    if replicas > 1:
        # Reading from replicas, the pipeline's GETs go to other nodes than its SETs, at the
        # same time: they may precede them (no acknowledged write yet), so they wait for them.
        sets = pipe.execute()
        pipe = rc.pipeline()
    for i in range(PIPELINED):
        pipe.get(f"pipe:{i}")
    replies = pipe.execute()
    if replicas > 1:
        replies = sets + replies
    check(replies[:PIPELINED] == [True] * PIPELINED, f"pipeline SETs: {replies[:PIPELINED]}")
    check(
        replies[PIPELINED:] == [str(i) for i in range(PIPELINED)],
        f"pipeline GETs: {replies[PIPELINED:]}",
    )

    hashes(rc, replicas)


def hashes(rc, replicas):
    """Feast's Redis online store: an entity's features as the fields of one hash (HSET),
    served as a pipeline of HMGETs; the entities spread over every node."""
    features = [f"f{j}" for j in range(10)]
    entities = [f"entity:{e}" for e in range(32)]
    row = lambda e: {f: f"{e}.{f}" for f in features}  # noqa: E731
    for e in entities:
        check(rc.hset(e, mapping=row(e)) == 10, f"HSET {e}")
    owners = {rc.get_node_from_key(e).name for e in entities}
    check(len(owners) == 3, f"the hashes are on {len(owners)} nodes, not 3")
    for _ in range(replicas):
        pipe = rc.pipeline()
        for e in entities:
            pipe.hmget(e, features)
        rows = pipe.execute()
        want = [[row(e)[f] for f in features] for e in entities]
        check(rows == want, f"pipelined HMGETs: {rows[:2]}...")
    check(rc.hgetall(entities[0]) == row(entities[0]), "HGETALL")
    check(rc.hincrby(entities[1], "visits", 3) == 3, "HINCRBY")
    check(rc.hdel(entities[1], "visits", "f0") == 2, "HDEL")
    check(rc.hlen(entities[1]) == 9, "HLEN after HDEL")
    check(rc.type(entities[2]) == "hash", "TYPE of a hash")
    large_hash(rc, replicas)


def large_hash(rc, replicas):
    """A hash past the listpack's 512 entries is large (its fields in buckets, which go
    down its chain with it): every member reads it whole."""
    key = "entity:large"
    fields = {f"f{i}": f"v{i}" for i in range(LARGE_FIELDS)}
    check(rc.hset(key, mapping=fields) == LARGE_FIELDS, "HSET of a large hash")
    check(rc.hset(key, "f3", "changed") == 0, "HSET of one field of a large hash")
    fields["f3"] = "changed"
    names = [f"f{i}" for i in range(0, LARGE_FIELDS, 50)]
    for _ in range(replicas):
        check(rc.hgetall(key) == fields, "HGETALL of a large hash (from any member)")
        check(rc.hlen(key) == LARGE_FIELDS, "HLEN of a large hash (from any member)")
        got = rc.hmget(key, names)
        check(got == [fields[f] for f in names], f"HMGET of a large hash: {got[:3]}...")


if __name__ == "__main__":
    main()
