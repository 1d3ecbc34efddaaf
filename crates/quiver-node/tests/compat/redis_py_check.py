#!/usr/bin/env python3
"""Drive a server with redis-py, the way applications talk to Redis, and assert the results.

    python3 redis_py_check.py --port N [--host 127.0.0.1]

Every check starts from an empty database (FLUSHALL). The checks run twice when the installed
redis-py supports RESP3 (redis-py >= 5: `redis.Redis(protocol=3)`): once over RESP2, once over
RESP3. The first failing check is named and the script exits 1; on success it prints
`redis-py: N checks passed`.
"""

import argparse
import sys
import time
import traceback

import redis

CHECKS = []


def check(fn):
    """Register a check: a function of (r, r2) where r2 is a second, independent client."""
    CHECKS.append(fn)
    return fn


def expect(actual, expected, what=""):
    assert actual == expected, f"{what}: expected {expected!r}, got {actual!r}"


@check
def get_set(r, r2):
    expect(r.set("k", "v"), True, "SET")
    expect(r.get("k"), b"v", "GET")
    expect(r.get("missing"), None, "GET missing")
    expect(r.set("k", "w", nx=True), None, "SET NX on existing")
    expect(r.set("k", "w", xx=True), True, "SET XX on existing")
    expect(r.set("k", "x", get=True), b"w", "SET GET")
    expect(r.set("new", "1", xx=True), None, "SET XX on missing")
    expect(r.get("k"), b"x", "GET after SET GET")


@check
def mget_mset(r, r2):
    expect(r.mset({"a": "1", "b": "2", "c": "3"}), True, "MSET")
    expect(r.mget(["a", "b", "missing", "c"]), [b"1", b"2", None, b"3"], "MGET")
    expect(r.mget("a", "a"), [b"1", b"1"], "MGET repeated key")


@check
def pipeline_100(r, r2):
    pipe = r.pipeline(transaction=False)
    for i in range(50):
        pipe.set(f"p:{i}", i)
    for i in range(50):
        pipe.get(f"p:{i}")
    results = pipe.execute()
    expect(len(results), 100, "pipeline result count")
    expect(results[:50], [True] * 50, "pipelined SETs")
    expect(results[50:], [str(i).encode() for i in range(50)], "pipelined GETs")
    expect(r.dbsize(), 50, "DBSIZE after pipeline")


@check
def pipeline_with_error(r, r2):
    # An error inside a non-transactional pipeline must not disturb the replies around it.
    r.set("s", "abc")
    pipe = r.pipeline(transaction=False)
    pipe.set("a", "1").incr("s").incr("a")
    results = pipe.execute(raise_on_error=False)
    expect(results[0], True, "SET before error")
    assert isinstance(results[1], redis.ResponseError), f"INCR on text: {results[1]!r}"
    expect(results[2], 2, "INCR after error")


@check
def transaction_function(r, r2):
    # r.transaction() WATCHes, calls fn, and retries it when EXEC fails. The first attempt is
    # disturbed by a second client, so a server that ignored WATCH would lose r2's write.
    r.set("counter", "10")
    attempts = []

    def bump(pipe):
        value = int(pipe.get("counter"))
        if not attempts:
            r2.incrby("counter", 5)  # a concurrent change between WATCH and EXEC
        attempts.append(value)
        pipe.multi()
        pipe.set("counter", value + 1)

    result = r.transaction(bump, "counter")
    expect(result, [True], "transaction result")
    expect(attempts, [10, 15], "values seen by the attempts (one retry)")
    expect(r.get("counter"), b"16", "counter after transaction")


@check
def watch_multi_exec_conflict(r, r2):
    r.set("balance", "100")
    with r.pipeline() as pipe:
        pipe.watch("balance")
        balance = int(pipe.get("balance"))
        r2.set("balance", "0")  # a concurrent change from another connection
        pipe.multi()
        pipe.set("balance", balance - 30)
        try:
            pipe.execute()
            raise AssertionError("EXEC succeeded although a watched key changed")
        except redis.WatchError:
            pass
    expect(r.get("balance"), b"0", "the concurrent write survives")


@check
def watch_multi_exec_no_conflict(r, r2):
    r.set("balance", "100")
    r2.set("other", "x")  # a change to an unwatched key does not matter
    with r.pipeline() as pipe:
        pipe.watch("balance")
        balance = int(pipe.get("balance"))
        pipe.multi()
        pipe.set("balance", balance - 30)
        pipe.incr("ops")
        expect(pipe.execute(), [True, 1], "EXEC results")
    expect(r.get("balance"), b"70", "balance after EXEC")


@check
def multi_exec_runtime_error(r, r2):
    r.set("s", "abc")
    pipe = r.pipeline(transaction=True)
    pipe.set("a", "1").incr("s").incr("a")
    results = pipe.execute(raise_on_error=False)
    expect(results[0], True, "SET in EXEC")
    assert isinstance(results[1], redis.ResponseError), f"INCR on text in EXEC: {results[1]!r}"
    expect(results[2], 2, "INCR in EXEC")


@check
def scan_iter_500(r, r2):
    wanted = {f"user:{i}".encode() for i in range(500)}
    pipe = r.pipeline(transaction=False)
    for k in wanted:
        pipe.set(k, "1")
    for i in range(100):
        pipe.set(f"other:{i}", "1")  # must not be returned by MATCH user:*
    pipe.execute()
    seen = list(r.scan_iter(match="user:*", count=50))
    # SCAN may return a key more than once, but must return every key present throughout.
    expect(set(seen), wanted, "SCAN MATCH user:* key set")
    every = set(r.scan_iter(count=1000))
    expect(len(every), 600, "SCAN without MATCH")
    expect(set(r.scan_iter(match="nomatch*")), set(), "SCAN MATCH nothing")


@check
def counters(r, r2):
    expect(r.incr("n"), 1, "INCR missing")
    expect(r.incrby("n", 10), 11, "INCRBY")
    expect(r.decr("n"), 10, "DECR")
    expect(r.decrby("n", 20), -10, "DECRBY")
    expect(r.incrby("n", -5), -15, "INCRBY negative")
    expect(r.get("n"), b"-15", "GET counter")
    r.set("text", "abc")
    try:
        r.incr("text")
        raise AssertionError("INCR on a non-integer succeeded")
    except redis.ResponseError as e:
        expect(str(e), "value is not an integer or out of range", "INCR error text")
    r.set("max", str(2**63 - 1))
    try:
        r.incr("max")
        raise AssertionError("INCR past 2^63-1 succeeded")
    except redis.ResponseError as e:
        expect(str(e), "increment or decrement would overflow", "overflow error text")


@check
def binary_keys_and_values(r, r2):
    key = b"\x00key\r\nwith\x00nul\xff"
    value = b"\r\n\x00\x01\xfe\xff$3\r\n*1\r\n"
    expect(r.set(key, value), True, "SET binary")
    expect(r.get(key), value, "GET binary")
    expect(r.strlen(key), len(value), "STRLEN binary")
    expect(r.exists(key, b"\x00key"), 1, "EXISTS binary")
    expect(r.mget([key, b"\x00"]), [value, None], "MGET binary")
    expect(list(r.scan_iter(match=b"\x00key*")), [key], "SCAN binary")
    expect(r.delete(key), 1, "DEL binary")


@check
def empty_value(r, r2):
    expect(r.set("e", ""), True, "SET empty")
    expect(r.get("e"), b"", "GET empty")
    expect(r.strlen("e"), 0, "STRLEN empty")
    expect(r.exists("e"), 1, "EXISTS empty")
    expect(r.append("e", ""), 0, "APPEND empty")


@check
def one_mib_value(r, r2):
    value = bytes(range(256)) * 4096  # 1 MiB, every byte value
    expect(r.set("big", value), True, "SET 1 MiB")
    expect(r.get("big"), value, "GET 1 MiB")
    expect(r.strlen("big"), 1 << 20, "STRLEN 1 MiB")
    expect(r.append("big", b"!"), (1 << 20) + 1, "APPEND to 1 MiB")
    expect(r.getdel("big")[-1:], b"!", "GETDEL 1 MiB")


@check
def delete_and_exists(r, r2):
    r.mset({"a": "1", "b": "2", "c": "3"})
    expect(r.exists("a", "b", "c", "missing"), 3, "EXISTS several")
    expect(r.exists("a", "a"), 2, "EXISTS counts repeats")
    expect(r.delete("a", "b", "missing"), 2, "DEL several")
    expect(r.exists("a", "b", "c"), 1, "EXISTS after DEL")
    expect(r.unlink("c"), 1, "UNLINK")
    expect(r.dbsize(), 0, "DBSIZE after deletes")


@check
def setnx_getset_getdel_append_strlen(r, r2):
    expect(r.setnx("k", "v1"), True, "SETNX missing")
    expect(r.setnx("k", "v2"), False, "SETNX existing")
    expect(r.getset("k", "v3"), b"v1", "GETSET existing")
    expect(r.getset("fresh", "x"), None, "GETSET missing")
    expect(r.append("k", "-tail"), 7, "APPEND")
    expect(r.strlen("k"), 7, "STRLEN")
    expect(r.strlen("missing"), 0, "STRLEN missing")
    expect(r.getdel("k"), b"v3-tail", "GETDEL")
    expect(r.getdel("k"), None, "GETDEL missing")
    expect(r.append("k2", "abc"), 3, "APPEND missing")


@check
def msetnx(r, r2):
    expect(r.msetnx({"a": "1", "b": "2"}), True, "MSETNX new keys")
    expect(r.msetnx({"b": "x", "c": "3"}), False, "MSETNX with an existing key")
    expect(r.mget("a", "b", "c"), [b"1", b"2", None], "MSETNX all or nothing")


@check
def keys_type_and_connection(r, r2):
    r.set("only", "v")
    expect(r.keys("on*"), [b"only"], "KEYS")
    expect(r.type("only"), b"string", "TYPE")
    expect(r.type("missing"), b"none", "TYPE missing")
    expect(r.ping(), True, "PING")
    expect(r.echo("hi"), b"hi", "ECHO")
    expect(r.client_setname("py-check"), True, "CLIENT SETNAME")
    name = r.client_getname()  # redis-py decodes this reply itself (str), whatever the options
    expect(name.decode() if isinstance(name, bytes) else name, "py-check", "CLIENT GETNAME")
    expect(r.flushdb(), True, "FLUSHDB")
    expect(r.dbsize(), 0, "DBSIZE after FLUSHDB")


@check
def databases(r, r2):
    # redis.Redis(db=N) selects its database on every connection it opens (its pool's).
    kw = r.connection_pool.connection_kwargs
    r3 = redis.Redis(**{k: kw[k] for k in ("host", "port", "socket_timeout", "protocol") if k in kw}, db=3)
    try:
        r.set("k", "zero")
        r3.set("k", "three")
        expect(r.get("k"), b"zero", "GET in db 0")
        expect(r3.get("k"), b"three", "GET in db 3")
        pipe = r3.pipeline()
        pipe.set("a", "1").mset({"b": "2", "c": "3"}).incr("a").dbsize()
        expect(pipe.execute(), [True, True, 2, 4], "pipeline in db 3")
        expect(r.exists("a", "b", "c"), 0, "db 3's keys are not db 0's")
        expect(r3.move("a", 0), True, "MOVE to db 0")
        expect(r.get("a"), b"2", "moved key")
        expect(r.swapdb(0, 3), True, "SWAPDB")
        expect(r.mget("k", "b", "a"), [b"three", b"2", None], "db 0 after SWAPDB")
        expect(r3.mget("k", "b", "a"), [b"zero", None, b"2"], "db 3 after SWAPDB")
        expect(r.copy("k", "k2", destination_db=3), True, "COPY ... DB")
        expect(r3.get("k2"), b"three", "copied key")
        expect(r3.flushdb(), True, "FLUSHDB of db 3")
        expect(r3.dbsize(), 0, "DBSIZE of db 3")
        expect(r.dbsize(), 3, "db 0 untouched")
    finally:
        r3.close()


@check
def hashes(r, r2):
    expect(r.hset("user:1", mapping={"name": "ada", "visits": "1"}), 2, "HSET mapping")
    expect(r.hset("user:1", "name", "lovelace"), 0, "HSET existing field")
    expect(r.hget("user:1", "name"), b"lovelace", "HGET")
    expect(r.hmget("user:1", ["name", "nope", "visits"]), [b"lovelace", None, b"1"], "HMGET")
    expect(r.hgetall("user:1"), {b"name": b"lovelace", b"visits": b"1"}, "HGETALL")
    expect(r.hgetall("missing"), {}, "HGETALL missing")
    expect(r.hincrby("user:1", "visits", 41), 42, "HINCRBY")
    expect(r.hincrbyfloat("user:1", "score", 0.5), 0.5, "HINCRBYFLOAT")
    expect(r.hkeys("user:1"), [b"name", b"visits", b"score"], "HKEYS")
    expect(r.hlen("user:1"), 3, "HLEN")
    expect(r.hexists("user:1", "score"), True, "HEXISTS")
    expect(r.hsetnx("user:1", "name", "x"), False, "HSETNX existing")
    expect(r.hdel("user:1", "score", "nope"), 1, "HDEL")
    expect(dict(r.hscan_iter("user:1", match="n*")), {b"name": b"lovelace"}, "HSCAN")
    expect(r.hrandfield("user:1", 5), [b"name", b"visits"], "HRANDFIELD past the size")
    expect(r.type("user:1"), b"hash", "TYPE")
    r.set("s", "v")
    try:
        r.hget("s", "f")
        raise AssertionError("HGET of a string did not fail")
    except redis.ResponseError as e:
        expect(str(e).split()[0], "WRONGTYPE", "HGET of a string")


@check
def feast_style_online_read_and_write(r, r2):
    # Feast's Redis online store: one hash per entity, its features as fields (HSET), read
    # back as a pipeline of HMGETs.
    features = [f"f{j}" for j in range(10)]
    pipe = r.pipeline(transaction=False)
    for e in range(32):
        pipe.hset(f"entity:{e}", mapping={f: f"{e}.{f}" for f in features})
    expect(pipe.execute(), [10] * 32, "HSETs of 10 features")
    pipe = r.pipeline(transaction=False)
    for e in range(32):
        pipe.hmget(f"entity:{e}", features)
    rows = pipe.execute()
    expect(rows, [[f"{e}.{f}".encode() for f in features] for e in range(32)], "HMGETs")


@check
def publish_subscribe(r, r2):
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    seen = []
    deadline = time.monotonic() + 5
    # The two confirmations, then the messages PUBLISH counts.
    while len(seen) < 2 and time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m:
            seen.append(m["type"])
    expect(seen, ["subscribe", "psubscribe"], "confirmations")
    expect(r2.publish("news", "hi"), 2, "PUBLISH receivers")
    got = []
    while len(got) < 2 and time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m:
            got.append((m["type"], m["channel"], m["data"]))
    expect(
        sorted(got),
        [("message", b"news", b"hi"), ("pmessage", b"news", b"hi")],
        "messages",
    )
    expect(r2.pubsub_numsub("news"), [(b"news", 1)], "PUBSUB NUMSUB")
    p.close()


def run_pass(host, port, protocol):
    """Run every check over one protocol version; return the number passed (exit on failure)."""
    kwargs = {"host": host, "port": port, "socket_timeout": 10}
    if protocol == 3:
        kwargs["protocol"] = 3
    r = redis.Redis(**kwargs)
    r2 = redis.Redis(**kwargs)
    try:
        for fn in CHECKS:
            r.flushall()
            try:
                fn(r, r2)
            except Exception as e:  # an assertion or a client error: both fail the check
                traceback.print_exc()
                print(f"redis-py: check {fn.__name__} (RESP{protocol}) FAILED: {e}")
                sys.exit(1)
    finally:
        r.close()
        r2.close()
    return len(CHECKS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()

    passed = run_pass(args.host, args.port, 2)
    major = int(redis.__version__.split(".")[0])
    if major >= 5:
        passed += run_pass(args.host, args.port, 3)
    else:
        print(f"note: redis-py {redis.__version__} has no RESP3 support; RESP3 pass skipped")
    print(f"redis-py: {passed} checks passed")


if __name__ == "__main__":
    main()
