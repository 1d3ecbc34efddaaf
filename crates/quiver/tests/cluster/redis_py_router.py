#!/usr/bin/env python3
"""redis-py's plain client (redis.Redis, no cluster support) against a `quiver router`.

    redis_py_router.py ROUTER_PORT NODE_PORT...

The client talks to the router alone; the nodes' ports serve only to check where keys landed
(DBSIZE and EXISTS asked of each node directly). Checks: MSET and MGET across the nodes, a
non-transactional pipeline of 200 mixed commands, a transactional pipeline on keys of one
hashtag, a transaction (and a WATCH) across nodes refused with CROSSSLOT (redis-py's
ClusterCrossSlotError) and applying nothing,
optimistic locking with WATCH through redis-py's `transaction()` helper (a conflicting write
forces a retry; then threads contending for one counter), scan_iter returning every key, and
Feast-style hashes (HSET of 10 fields per entity, a pipeline of 32 HMGETs over every node).
Exits 0 when everything matched; otherwise prints the first mismatch and exits 1. Run by the
cluster test binary (crates/quiver/tests/cluster); scripts/test_deps.sh installs redis-py.
"""

import sys
import threading

import redis
from redis.exceptions import ClusterCrossSlotError, ResponseError

KEYS = 300
PIPELINED = 50  # rounds of 4 commands: 200 in the pipeline
THREADS = 4
INCREMENTS = 25  # per thread


def check(ok, what):
    if not ok:
        print(f"redis_py_router.py: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    router = int(sys.argv[1])
    node_ports = [int(p) for p in sys.argv[2:]]
    check(len(node_ports) >= 2, "give the router's port and at least two nodes' ports")
    r = redis.Redis(host="127.0.0.1", port=router, decode_responses=True)
    nodes = [redis.Redis(host="127.0.0.1", port=p, decode_responses=True) for p in node_ports]
    try:
        run(r, router, nodes)
    finally:
        r.close()
        for n in nodes:
            n.close()


def node_of(nodes, key):
    """The index of the node holding `key` (asked of each node: EXISTS answers MOVED elsewhere)."""
    held = []
    for i, n in enumerate(nodes):
        try:
            if n.exists(key) == 1:
                held.append(i)
        except ResponseError:
            pass  # MOVED: not this node's key
    check(len(held) == 1, f"{key} is held by nodes {held}")
    return held[0]


def run(r, port, nodes):
    check(r.ping() is True, "PING")
    info = r.info("server")
    check(info.get("redis_mode") == "standalone", f"redis_mode: {info.get('redis_mode')}")

    # MSET and MGET across the nodes.
    keys = [f"py:{i}" for i in range(KEYS)]
    values = [f"value-{i}" for i in range(KEYS)]
    check(r.mset(dict(zip(keys, values))) is True, "MSET")
    sizes = [n.dbsize() for n in nodes]
    check(all(s > 0 for s in sizes), f"the MSET's keys per node: {sizes}")
    check(sum(sizes) == KEYS, f"the nodes hold {sizes}, not {KEYS} keys in all")
    check(r.dbsize() == KEYS, f"DBSIZE through the router: {r.dbsize()}")
    got = r.mget(keys + ["py:absent"])
    check(got == values + [None], f"MGET: {got[:5]}... differs from {values[:5]}...")

    # A pipeline without a transaction: 200 commands over every node, answers in order.
    pipe = r.pipeline(transaction=False)
    want = []
    for i in range(PIPELINED):
        pipe.set(f"pl:{i}", i)
        pipe.get(f"pl:{i}")
        pipe.incr(f"plc:{i}")
        pipe.exists(f"pl:{i}", f"py:{i}", "py:absent")
        want += [True, str(i), 1, 2]
    got = pipe.execute()
    check(len(want) == 200, "the pipeline has 200 commands")
    check(got == want, f"pipeline: {got[:8]}... differs from {want[:8]}...")
    check(r.get("plc:7") == "1", "a pipelined INCR applied once")

    # A transaction on keys of one hashtag (one node).
    pipe = r.pipeline(transaction=True)
    pipe.set("{user1}:name", "alice")
    pipe.incr("{user1}:visits")
    pipe.incr("{user1}:visits")
    pipe.get("{user1}:name")
    got = pipe.execute()
    check(got == [True, 1, 2, "alice"], f"MULTI/EXEC on {{user1}}: {got}")

    # Two keys on two nodes: a transaction across them is refused (CROSSSLOT), nothing applied.
    a = keys[0]
    home = node_of(nodes, a)
    b = next(k for k in keys if node_of(nodes, k) != home)
    pipe = r.pipeline(transaction=True)
    pipe.set(a, "in-cross-node-tx")
    pipe.set(b, "in-cross-node-tx")
    try:
        got = pipe.execute()
        check(False, f"a transaction over {a} and {b} (two nodes) answered {got}")
    except ResponseError as e:
        # redis-py makes a -CROSSSLOT reply a ClusterCrossSlotError (the code cut off the text).
        check(isinstance(e, ClusterCrossSlotError), f"a transaction across nodes: {e!r}")
    check(r.mget(a, b) == [values[0], values[keys.index(b)]], "the refused transaction wrote")
    # WATCH of keys on two nodes is refused too.
    with r.pipeline() as pipe:
        try:
            pipe.watch(a, b)
            check(False, f"WATCH {a} {b} (two nodes) accepted")
        except ResponseError as e:
            check(isinstance(e, ClusterCrossSlotError), f"WATCH across nodes: {e!r}")
    check(r.set(a, values[0]) is True, "SET after the refused WATCH")

    # Optimistic locking: a write to the watched key between WATCH and EXEC makes EXEC fail,
    # and redis-py's transaction() runs the function again.
    r.set("{tag}:counter", 5)
    calls = []

    def add_ten(pipe):
        calls.append(1)
        v = int(pipe.get("{tag}:counter"))
        if len(calls) == 1:
            r.incr("{tag}:counter")  # another connection: the first EXEC must fail
        pipe.multi()
        pipe.set("{tag}:counter", v + 10)

    got = r.transaction(add_ten, "{tag}:counter")
    check(len(calls) == 2, f"transaction(): {len(calls)} runs, wanted 2 (one conflict)")
    check(got == [True], f"transaction(): {got}")
    check(r.get("{tag}:counter") == "16", f"the counter: {r.get('{tag}:counter')}, wanted 16")

    # Threads contending for one counter, each increment a WATCH/GET/MULTI/SET/EXEC retried
    # until it applies: none lost.
    r.set("{tag}:shared", 0)
    failures = []

    def increment(pipe):
        v = int(pipe.get("{tag}:shared"))
        pipe.multi()
        pipe.set("{tag}:shared", v + 1)

    def contend():
        c = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        try:
            for _ in range(INCREMENTS):
                c.transaction(increment, "{tag}:shared")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=contend) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not failures, f"contending transactions failed: {failures[:3]}")
    shared = r.get("{tag}:shared")
    check(shared == str(THREADS * INCREMENTS), f"the shared counter: {shared}")

    # SCAN across the nodes (an opaque cursor): every key, none missing or invented.
    everything = set(keys) | {f"pl:{i}" for i in range(PIPELINED)}
    everything |= {f"plc:{i}" for i in range(PIPELINED)}
    everything |= {"{user1}:name", "{user1}:visits", "{tag}:counter", "{tag}:shared"}
    scanned = set(r.scan_iter(count=37))
    check(scanned == everything, f"scan_iter: missing {sorted(everything - scanned)[:5]}, "
          f"extra {sorted(scanned - everything)[:5]}")
    matched = set(r.scan_iter(match="py:*", count=100))
    check(matched == set(keys), f"scan_iter(match='py:*'): {len(matched)} keys")
    check(r.dbsize() == len(everything), f"DBSIZE {r.dbsize()}, keys {len(everything)}")
    hashes(r, nodes)


def hashes(r, nodes):
    """Feast's Redis online store through the router: an entity's features as the fields of
    one hash, served as a pipeline of HMGETs that spans the nodes."""
    features = [f"f{j}" for j in range(10)]
    entities = [f"entity:{e}" for e in range(32)]
    row = lambda e: {f: f"{e}.{f}" for f in features}  # noqa: E731
    pipe = r.pipeline(transaction=False)
    for e in entities:
        pipe.hset(e, mapping=row(e))
    check(pipe.execute() == [10] * len(entities), "pipelined HSETs of 10 fields")
    check(len({node_of(nodes, e) for e in entities}) >= 2, "the hashes are on one node")
    pipe = r.pipeline(transaction=False)
    for e in entities:
        pipe.hmget(e, features)
    rows = pipe.execute()
    check(rows == [[row(e)[f] for f in features] for e in entities], f"HMGETs: {rows[:2]}")
    check(r.hgetall(entities[3]) == row(entities[3]), "HGETALL through the router")
    check(r.type(entities[3]) == "hash", "TYPE through the router")


if __name__ == "__main__":
    main()
