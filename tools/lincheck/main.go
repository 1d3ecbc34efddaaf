// Command lincheck checks a history of operations on a Redis-protocol key-value store for
// linearizability, key by key, with porcupine (github.com/anishathalye/porcupine).
//
// Usage:
//
//	lincheck [--timeout 60s] [--visualize out.html] HISTORY
//
// HISTORY is a file of JSON lines ("-": standard input), one operation per line, as the
// Rust recorder (crates/quiver/tests/cluster/history.rs) writes it:
//
//	{"client":3,"kind":"set","keys":["{g0}r1"],"args":["c3-17"],"invoke":1200,"return":1530,"outcome":"ok"}
//	{"client":1,"kind":"get","keys":["{g0}r1"],"invoke":1300,"return":1490,"outcome":"ok","result":"c3-17"}
//	{"client":2,"kind":"get","keys":["{g0}r2"],"invoke":1310,"return":1420,"outcome":"ok","result":null}
//	{"client":4,"kind":"incr","keys":["{g0}n0"],"invoke":1500,"return":1600,"outcome":"ok","result":7}
//	{"client":5,"kind":"mset","keys":["{g0}r0","{g0}r2"],"args":["c5-2","c5-2"],"invoke":1700,"return":1800,"outcome":"unknown"}
//	{"client":6,"kind":"del","keys":["{g0}r0"],"invoke":1900,"return":1950,"outcome":"ok","result":1}
//	{"client":7,"kind":"set","keys":["{g1}r0"],"args":["c7-9"],"invoke":2000,"return":2001,"outcome":"fail"}
//
// Fields (every line is checked; any other field is refused):
//
//   - client: the recording client's id, an integer >= 0 (for the visualization).
//   - kind: get, set, incr, mset or del.
//   - keys: the keys, one for get / set / incr / del, one or more distinct keys for mset.
//   - args: the values written, one per key for set and mset; absent for the others.
//   - invoke, return: nanoseconds on one monotonic clock shared by all clients, read just
//     before the request was sent and just after its reply arrived. return >= invoke is
//     required for an ok outcome; for unknown and fail it is ignored (and may be absent).
//   - outcome:
//     ok: the reply was the command's normal reply.
//     unknown: the client cannot tell whether the command took effect (a connection error, a
//     timeout, an error reply of uncertain effect). The operation is given a return time
//     after the end of the history and any output (porcupine's way to model an operation that
//     may or may not have happened, at any point after its invocation). An unknown get tells
//     nothing and is left out.
//     fail: a definite refusal before any effect (MOVED, CROSSSLOT, CLUSTERDOWN, ...): the
//     operation is left out of the check.
//   - result: with outcome ok only. get: the value (a string) or null for a missing key;
//     incr: the new value (an integer); del: the number of keys removed (0 or 1); absent for
//     set and mset.
//
// Model (per key, porcupine's partition by key): a register holding a string or nothing.
// set writes; get reads; del empties (and says whether there was a value); incr reads a
// decimal 64-bit integer (nothing reads as 0) and writes and returns the next one; an incr of
// a value that is not such an integer (or at the largest one) is an error reply in Redis,
// so it cannot have an ok outcome and has no effect. mset is split into one set per key,
// each with the mset's invoke and return times: its per-key effects are checked, the
// atomicity across its keys is not (out of scope of a per-key check).
//
// Output: one JSON line on standard output,
//
//	{"ops":N,"keys":K,"result":"ok"|"illegal"|"unknown","illegal_keys":[...],"unknown_outcomes":U,"failed":F}
//
// ops: lines read; keys: keys checked; illegal_keys: the keys whose own history is not
// linearizable (each checked again alone, to name it); unknown_outcomes, failed: the lines of
// those outcomes. The exit code: 0 ok, 1 illegal, 2 unknown (the check timed out), 3 bad
// input (the message names the line), a bad command line or an I/O error.
//
// --visualize FILE writes porcupine's HTML visualization of the check (whatever its result;
// most useful for an illegal history: it shows the longest partial linearizations).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Exit codes (documented above; the Rust side reads them).
const (
	exitOk       = 0
	exitIllegal  = 1
	exitUnknown  = 2
	exitBadInput = 3
)

// defaultTimeout bounds the check: past it the result is "unknown".
const defaultTimeout = 60 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lincheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	timeout := flags.Duration("timeout", defaultTimeout, "bound on the check (0: none); past it the result is unknown")
	visualize := flags.String("visualize", "", "write porcupine's HTML visualization of the check to this file")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: lincheck [--timeout 60s] [--visualize out.html] HISTORY (a file of JSON lines, - for stdin)")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return exitBadInput
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return exitBadInput
	}
	path := flags.Arg(0)
	input := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "lincheck: %v\n", err)
			return exitBadInput
		}
		defer f.Close()
		input = f
	}
	history, err := readHistory(input)
	if err != nil {
		fmt.Fprintf(stderr, "lincheck: %s: %v\n", path, err)
		return exitBadInput
	}
	summary, info := check(history, *timeout)
	if *visualize != "" {
		if err := writeVisualization(info, *visualize); err != nil {
			fmt.Fprintf(stderr, "lincheck: --visualize: %v\n", err)
			return exitBadInput
		}
	}
	line, err := json.Marshal(summary)
	if err != nil {
		fmt.Fprintf(stderr, "lincheck: %v\n", err)
		return exitBadInput
	}
	fmt.Fprintln(stdout, string(line))
	switch summary.Result {
	case resultOk:
		return exitOk
	case resultIllegal:
		return exitIllegal
	default:
		return exitUnknown
	}
}
