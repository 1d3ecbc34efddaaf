package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// maxLineBytes bounds one line of the history (an mset of a few keys takes well under 1 KiB).
const maxLineBytes = 1 << 20

// The kinds of operation.
const (
	kindGet  = "get"
	kindSet  = "set"
	kindIncr = "incr"
	kindMset = "mset"
	kindDel  = "del"
)

// The outcomes of an operation.
const (
	outcomeOk      = "ok"
	outcomeUnknown = "unknown"
	outcomeFail    = "fail"
)

// record is one line of the history, as written (see the format in main.go).
type record struct {
	Client  *int            `json:"client"`
	Kind    string          `json:"kind"`
	Keys    []string        `json:"keys"`
	Args    []string        `json:"args"`
	Invoke  *int64          `json:"invoke"`
	Return  *int64          `json:"return"`
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result"`
}

// op is one checked line: a record whose fields agree with its kind and outcome.
type op struct {
	line    int // 1-based, for messages and the visualization
	client  int
	kind    string
	keys    []string
	args    []string
	invoke  int64
	ret     int64 // meaningful for an ok outcome only
	outcome string
	// The ok outcome's result: get's value (present false: null), incr's and del's integer.
	present bool
	value   string
	number  int64
}

// readHistory reads and checks every line; the error names the first bad line.
func readHistory(r io.Reader) ([]op, error) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64*1024), maxLineBytes)
	var ops []op
	line := 0
	for scanner.Scan() {
		line++
		text := bytes.TrimSpace(scanner.Bytes())
		if len(text) == 0 {
			continue
		}
		o, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		o.line = line
		ops = append(ops, o)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("after line %d: %v", line, err)
	}
	return ops, nil
}

// parseLine decodes one line strictly (unknown fields refused) and checks it.
func parseLine(text []byte) (op, error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return op{}, fmt.Errorf("not a JSON operation: %v", err)
	}
	if dec.More() {
		return op{}, fmt.Errorf("more than one JSON value on the line")
	}
	if rec.Client == nil || *rec.Client < 0 {
		return op{}, fmt.Errorf("client: an integer >= 0 is required")
	}
	if rec.Invoke == nil {
		return op{}, fmt.Errorf("invoke: required")
	}
	o := op{client: *rec.Client, kind: rec.Kind, keys: rec.Keys, args: rec.Args, invoke: *rec.Invoke, outcome: rec.Outcome}
	if err := checkShape(&rec); err != nil {
		return op{}, err
	}
	switch rec.Outcome {
	case outcomeOk:
		if rec.Return == nil || *rec.Return < *rec.Invoke {
			return op{}, fmt.Errorf("return: required for an ok outcome, and not before invoke")
		}
		o.ret = *rec.Return
		if err := parseResult(&o, rec.Result); err != nil {
			return op{}, err
		}
	case outcomeUnknown, outcomeFail:
		if len(rec.Result) != 0 {
			return op{}, fmt.Errorf("result: only an ok outcome has one")
		}
	default:
		return op{}, fmt.Errorf("outcome %q: ok, unknown or fail expected", rec.Outcome)
	}
	return o, nil
}

// checkShape checks the kind, its keys and its arguments.
func checkShape(rec *record) error {
	for _, k := range rec.Keys {
		if k == "" {
			return fmt.Errorf("keys: an empty key")
		}
	}
	switch rec.Kind {
	case kindGet, kindIncr, kindDel:
		if len(rec.Keys) != 1 || rec.Args != nil {
			return fmt.Errorf("%s: one key and no args expected", rec.Kind)
		}
	case kindSet:
		if len(rec.Keys) != 1 || len(rec.Args) != 1 {
			return fmt.Errorf("set: one key and one arg expected")
		}
	case kindMset:
		if len(rec.Keys) == 0 || len(rec.Args) != len(rec.Keys) {
			return fmt.Errorf("mset: one or more keys and one arg per key expected")
		}
		seen := make(map[string]bool, len(rec.Keys))
		for _, k := range rec.Keys {
			if seen[k] {
				// Two writes of one key at the same instant have no order to check.
				return fmt.Errorf("mset: key %q given twice", k)
			}
			seen[k] = true
		}
	default:
		return fmt.Errorf("kind %q: get, set, incr, mset or del expected", rec.Kind)
	}
	return nil
}

// parseResult reads an ok outcome's result as its kind wants it.
func parseResult(o *op, raw json.RawMessage) error {
	switch o.kind {
	case kindGet:
		if len(raw) == 0 {
			return fmt.Errorf("result: a get's ok outcome needs one (a string, or null)")
		}
		if string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, &o.value); err != nil {
			return fmt.Errorf("result: a string or null expected: %v", err)
		}
		o.present = true
	case kindIncr, kindDel:
		if len(raw) == 0 || json.Unmarshal(raw, &o.number) != nil {
			return fmt.Errorf("result: an %s's ok outcome needs an integer", o.kind)
		}
		if o.kind == kindDel && o.number != 0 && o.number != 1 {
			return fmt.Errorf("result: a del of one key removes 0 or 1, not %d", o.number)
		}
	default:
		if len(raw) != 0 {
			return fmt.Errorf("result: a %s has none", o.kind)
		}
	}
	return nil
}
