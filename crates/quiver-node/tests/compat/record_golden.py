#!/usr/bin/env python3
"""Record the exact bytes a Redis-protocol server sends back for the sessions in cases.json.

    python3 record_golden.py --port N [--host 127.0.0.1] [--cases cases.json] [--out golden.json]

A raw socket is used on purpose (no redis-py): the golden file is about exact bytes, and a
client library would decode (and so hide) the differences we want to see.

Session kinds in cases.json (see README.md for the full format):
  {"name": ..., "commands": [[arg, ...], ...], "unchecked": [i, ...]}
      Sent one command at a time as RESP multibulk; exactly one complete reply is read per
      command. "unchecked" (optional) lists command indices whose reply content is not
      deterministic across servers (HELLO, CLIENT ID, ...): check_golden.py compares only the
      reply's first byte (its RESP type) for those.
  {"name": ..., "raw": bytes}
      The bytes are sent in one write; the reply is everything received until the server
      closes the connection or stays silent for --silence seconds (0.3 by default).

An argument (or the raw field, or an element of a raw list) is either a JSON string whose code
points 0..255 are the bytes (latin-1), or {"repeat": "<latin-1 string>", "times": N} for the
string repeated N times (so 1 MB values stay one line in cases.json). "raw" may also be a list
of such parts, concatenated.

A reply is stored as a latin-1 string of its exact bytes, or null when the connection was closed
(or timed out) before any byte of it arrived. Once a reply is cut short, the connection is given
up and the remaining commands of the session are recorded as null without being sent: their
replies could not be told apart any more.

Before every session, FLUSHALL is sent on a separate connection, so each session starts from an
empty database on a fresh connection (fresh protocol version, name, transaction state).
"""

import argparse
import json
import os
import socket
import sys
import time

DEFAULT_REPLY_TIMEOUT = 10.0  # seconds to wait for one complete reply (1 MB values included)
DEFAULT_SILENCE = 0.3  # raw sessions: this much silence ends the reply


# ---------------------------------------------------------------- case notation


def arg_bytes(arg):
    """One argument of cases.json as bytes: a latin-1 string or a {"repeat", "times"} object."""
    if isinstance(arg, str):
        return arg.encode("latin-1")
    if isinstance(arg, dict) and set(arg) == {"repeat", "times"}:
        return arg["repeat"].encode("latin-1") * int(arg["times"])
    raise ValueError(f"bad argument notation: {arg!r}")


def raw_bytes(raw):
    """A raw session's bytes: one argument notation, or a list of them concatenated."""
    if isinstance(raw, list):
        return b"".join(arg_bytes(part) for part in raw)
    return arg_bytes(raw)


def encode_multibulk(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n" % len(a))
        out.append(a)
        out.append(b"\r\n")
    return b"".join(out)


def to_text(data):
    """Bytes as the latin-1 string golden.json stores (None stays None)."""
    return None if data is None else data.decode("latin-1")


# ---------------------------------------------------------------- RESP reply reader


class Incomplete(Exception):
    """The buffer holds only the beginning of a reply."""


class BadReply(Exception):
    """The bytes are not RESP2/RESP3 (unknown type byte, bad length)."""


LINE_TYPES = b"+-:_,#("  # simple string, error, integer, RESP3 null, double, boolean, big number
BULK_TYPES = b"$!="  # bulk string, RESP3 blob error, RESP3 verbatim string
ARRAY_TYPES = b"*~>"  # array, RESP3 set, RESP3 push: N elements
PAIR_TYPES = b"%|"  # RESP3 map, RESP3 attribute: N key/value pairs


def _line_end(buf, pos):
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    return end


def _length(buf, pos):
    """The integer on the header line starting at pos (after the type byte) and the next position."""
    end = _line_end(buf, pos)
    text = buf[pos + 1 : end]
    try:
        return int(text), end + 2
    except ValueError:
        raise BadReply(f"bad length {text!r}") from None


def parse_one(buf, pos=0):
    """End position of the complete reply starting at buf[pos], or raise Incomplete/BadReply.

    An attribute (|) annotates the reply that follows it, so that reply is part of it.
    """
    if pos >= len(buf):
        raise Incomplete
    kind = buf[pos]
    if kind in LINE_TYPES:
        return _line_end(buf, pos) + 2
    if kind in BULK_TYPES:
        n, pos = _length(buf, pos)
        if n == -1 and kind == ord("$"):  # RESP2 null bulk string
            return pos
        if n < 0:
            raise BadReply(f"negative bulk length {n}")
        if len(buf) < pos + n + 2:
            raise Incomplete
        return pos + n + 2
    if kind in ARRAY_TYPES or kind in PAIR_TYPES:
        n, pos = _length(buf, pos)
        if n == -1 and kind == ord("*"):  # RESP2 null array
            return pos
        if n < 0:
            raise BadReply(f"negative aggregate length {n}")
        for _ in range(n * 2 if kind in PAIR_TYPES else n):
            pos = parse_one(buf, pos)
        if kind == ord("|"):
            pos = parse_one(buf, pos)
        return pos
    raise BadReply(f"unknown reply type byte {bytes([kind])!r}")


class Connection:
    """A raw socket with a receive buffer that hands out one complete reply at a time."""

    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        """False when the peer has gone away (we then read whatever it said before leaving)."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def fill(self, deadline):
        """Receive more bytes; False on close, reset or timeout."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except OSError:  # timeout or reset
            return False
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_reply(self):
        """(bytes of one complete reply, True) or (the partial bytes or None, False).

        A RESP3 push (>) may arrive out of band before the reply to the command; it is kept
        with the reply that follows it, so that "one reply per command" still holds.
        """
        deadline = time.monotonic() + self.timeout
        pos = 0
        while True:
            try:
                end = parse_one(self.buf, pos)
                if self.buf[pos] == ord(">"):
                    pos = end  # a push: the command's own reply comes next
                    continue
                reply, self.buf = self.buf[:end], self.buf[end:]
                return reply, True
            except Incomplete:
                if not self.fill(deadline):
                    partial, self.buf = self.buf, b""
                    return (partial or None), False
            except BadReply:
                # Not RESP: keep everything that arrives until silence, for the diff to show.
                while self.fill(time.monotonic() + DEFAULT_SILENCE):
                    pass
                partial, self.buf = self.buf, b""
                return partial, False


# ---------------------------------------------------------------- sessions


def flushall(host, port, timeout):
    conn = Connection(host, port, timeout)
    try:
        conn.send(encode_multibulk([b"FLUSHALL"]))
        reply, _ = conn.read_reply()
        if reply != b"+OK\r\n":
            raise RuntimeError(f"FLUSHALL answered {reply!r}")
    finally:
        conn.close()


def run_commands(host, port, commands, timeout):
    """The replies (bytes or None) to the commands, sent one by one on a fresh connection."""
    conn = Connection(host, port, timeout)
    replies = []
    alive = True
    try:
        for cmd in commands:
            if not alive:
                replies.append(None)
                continue
            conn.send(encode_multibulk([arg_bytes(a) for a in cmd]))
            reply, complete = conn.read_reply()
            replies.append(reply)
            alive = complete
    finally:
        conn.close()
    return replies


def run_raw(host, port, data, timeout, silence):
    """Everything received after sending data in one write, until close or silence."""
    conn = Connection(host, port, timeout)
    try:
        conn.send(data)  # a failed send is fine: the server may close before reading it all
        hard_deadline = time.monotonic() + timeout
        while time.monotonic() < hard_deadline and conn.fill(time.monotonic() + silence):
            pass
        return conn.buf
    finally:
        conn.close()


def run_session(session, host, port, timeout=DEFAULT_REPLY_TIMEOUT, silence=DEFAULT_SILENCE):
    """The recorded form of one session: the case plus its replies (as latin-1 strings)."""
    flushall(host, port, timeout)
    out = {"name": session["name"]}
    if "raw" in session:
        out["raw"] = session["raw"]
        out["reply"] = to_text(run_raw(host, port, raw_bytes(session["raw"]), timeout, silence))
    else:
        out["commands"] = session["commands"]
        if session.get("unchecked"):
            out["unchecked"] = session["unchecked"]
        replies = run_commands(host, port, session["commands"], timeout)
        out["replies"] = [to_text(r) for r in replies]
    return out


def load_cases(path):
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    names = [c["name"] for c in cases]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        raise SystemExit(f"duplicate session names: {sorted(dups)}")
    for c in cases:
        if ("raw" in c) == ("commands" in c):
            raise SystemExit(f"session {c['name']!r}: needs exactly one of 'raw' or 'commands'")
    return cases


def server_version(host, port, timeout):
    """'redis_version:x.y.z' from INFO server, for the golden file's header."""
    conn = Connection(host, port, timeout)
    try:
        conn.send(encode_multibulk([b"INFO", b"server"]))
        reply, _ = conn.read_reply()
    finally:
        conn.close()
    for line in (reply or b"").decode("latin-1").split("\r\n"):
        if line.startswith("redis_version:"):
            return line
    return "unknown"


def dump_json(obj, path):
    # indent=1 and ensure_ascii keep the file stable and 7-bit clean (bytes >= 0x80 become \u00XX).
    with open(path, "w", encoding="ascii") as f:
        json.dump(obj, f, indent=1, ensure_ascii=True)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cases", default=None, help="default: cases.json beside this script")
    ap.add_argument("--out", default=None, help="default: golden.json beside this script")
    ap.add_argument("--timeout", type=float, default=DEFAULT_REPLY_TIMEOUT)
    ap.add_argument("--silence", type=float, default=DEFAULT_SILENCE)
    args = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    cases_path = args.cases or f"{here}/cases.json"
    out_path = args.out or f"{here}/golden.json"

    cases = load_cases(cases_path)
    sessions = [run_session(c, args.host, args.port, args.timeout, args.silence) for c in cases]
    golden = {
        "recorded_with": server_version(args.host, args.port, args.timeout),
        "sessions": sessions,
    }
    dump_json(golden, out_path)
    print(f"recorded {len(sessions)} sessions ({golden['recorded_with']}) into {out_path}")


if __name__ == "__main__":
    sys.exit(main())
