#!/usr/bin/env python3
"""Replay golden.json against a server and diff the bytes it sends back.

    python3 check_golden.py --port N [--host 127.0.0.1] [--golden golden.json] [--only SUBSTRING]

Every session is run exactly as record_golden.py recorded it (FLUSHALL on a side connection,
then a fresh connection). A session whose replies differ from the recorded ones is printed as a
unified diff, expected (golden) against actual, one line per CRLF-terminated piece of each reply.
Replies listed in a session's "unchecked" field are compared by their first byte (the RESP type)
only, since their content legitimately differs between servers (HELLO's map, CLIENT ID, ...).

Exits 1 if any session differs. Ends with `golden: N sessions, M mismatches`.
"""

import argparse
import difflib
import hashlib
import json
import os
import sys

sys.dont_write_bytecode = True  # importing the recorder must not leave __pycache__ in the repo
from record_golden import DEFAULT_REPLY_TIMEOUT, DEFAULT_SILENCE, run_session  # noqa: E402

LONG_LINE = 200  # longer lines are shown abbreviated (1 MB values), with a digest of the whole


def show_line(text):
    """One diff line: a Python-style escaped string, abbreviated when very long."""
    shown = ascii(text.encode("latin-1"))[2:-1]  # bytes repr without the b'' wrapper
    if len(shown) <= LONG_LINE:
        return shown
    digest = hashlib.sha1(text.encode("latin-1")).hexdigest()[:12]
    return f"{shown[:120]}...[{len(text)} bytes, sha1 {digest}]...{shown[-40:]}"


def reply_lines(reply):
    """A reply (latin-1 text or None) as diff lines, split after each CRLF."""
    if reply is None:
        return ["<no reply: connection closed or timed out>"]
    if reply == "":
        return ["<empty>"]
    parts = reply.split("\r\n")
    lines = [p + "\r\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # an unterminated tail
    return [show_line(line) for line in lines]


def command_label(cmd):
    shown = []
    for arg in cmd:
        if isinstance(arg, dict):
            shown.append(f"<{arg['repeat']!r} x {arg['times']}>")
        elif arg == "" or " " in arg:
            shown.append('"' + show_line(arg) + '"')  # keep empty and spaced arguments visible
        else:
            shown.append(show_line(arg))
    return " ".join(shown)


def render(session, replies, unchecked):
    """The lines of a whole session for the diff: each command, then its reply."""
    if "raw" in session:
        return ["raw reply:"] + ["  " + line for line in reply_lines(replies)]
    lines = []
    for i, (cmd, reply) in enumerate(zip(session["commands"], replies)):
        lines.append(f"#{i} {command_label(cmd)}")
        if i in unchecked:
            kind = reply[:1] if reply else reply
            lines.append(f"  <unchecked reply of type {kind!r}>")
        else:
            lines.extend("  " + line for line in reply_lines(reply))
    return lines


def same_type(a, b):
    """Unchecked replies match when both exist and begin with the same RESP type byte."""
    if a is None or b is None:
        return a is b
    return a[:1] == b[:1]


def compare(expected, actual):
    """True when the actual recorded session matches the golden one."""
    if "raw" in expected:
        return expected["reply"] == actual["reply"]
    unchecked = set(expected.get("unchecked", []))
    for i, (e, a) in enumerate(zip(expected["replies"], actual["replies"])):
        if i in unchecked:
            if not same_type(e, a):
                return False
        elif e != a:
            return False
    return len(expected["replies"]) == len(actual["replies"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--golden", default=None, help="default: golden.json beside this script")
    ap.add_argument("--only", default=None, help="run only sessions whose name contains this")
    ap.add_argument(
        "--deviations",
        default=None,
        help="JSON object {session name: reason} of known, documented differences: skipped",
    )
    ap.add_argument("--timeout", type=float, default=DEFAULT_REPLY_TIMEOUT)
    ap.add_argument("--silence", type=float, default=DEFAULT_SILENCE)
    args = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    with open(args.golden or f"{here}/golden.json", encoding="ascii") as f:
        golden = json.load(f)

    deviations = {}
    if args.deviations:
        with open(args.deviations, encoding="utf-8") as f:
            deviations = json.load(f)
    unknown = set(deviations) - {s["name"] for s in golden["sessions"]}
    if unknown:
        print(f"deviations name sessions that do not exist: {sorted(unknown)}")
        return 1
    for name, reason in sorted(deviations.items()):
        print(f"known deviation, skipped: {name}: {reason}")

    sessions = [
        s
        for s in golden["sessions"]
        if (args.only is None or args.only in s["name"]) and s["name"] not in deviations
    ]
    mismatches = 0
    for expected in sessions:
        try:
            actual = run_session(expected, args.host, args.port, args.timeout, args.silence)
        except (OSError, RuntimeError) as e:  # refused, reset, or FLUSHALL not answered +OK
            mismatches += 1
            print(f"{expected['name']}: cannot run the session: {e}\n")
            continue
        if compare(expected, actual):
            continue
        mismatches += 1
        unchecked = set(expected.get("unchecked", []))
        key = "reply" if "raw" in expected else "replies"
        diff = difflib.unified_diff(
            render(expected, expected[key], unchecked),
            render(expected, actual[key], unchecked),
            fromfile=f"{expected['name']} (golden: {golden['recorded_with']})",
            tofile=f"{expected['name']} (actual)",
            lineterm="",
        )
        print("\n".join(diff))
        print()

    print(f"golden: {len(sessions)} sessions, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
