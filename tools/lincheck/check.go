package main

import (
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The results of a check, as the summary spells them.
const (
	resultOk      = "ok"
	resultIllegal = "illegal"
	resultUnknown = "unknown"
)

// summary is the JSON line printed on standard output.
type summary struct {
	Ops             int      `json:"ops"`
	Keys            int      `json:"keys"`
	Result          string   `json:"result"`
	IllegalKeys     []string `json:"illegal_keys"`
	UnknownOutcomes int      `json:"unknown_outcomes"`
	Failed          int      `json:"failed"`
}

// operations turns the history into porcupine's operations, one per key (an mset is split),
// leaving out fails and unknown gets. An unknown outcome returns after everything else: its
// effect, if any, may come at any point after its invocation.
func operations(history []op) []porcupine.Operation {
	end := int64(0)
	for _, o := range history {
		if o.invoke > end {
			end = o.invoke
		}
		if o.outcome == outcomeOk && o.ret > end {
			end = o.ret
		}
	}
	end++ // after every invocation and every known return
	var ops []porcupine.Operation
	for _, o := range history {
		if o.outcome == outcomeFail || (o.outcome == outcomeUnknown && o.kind == kindGet) {
			continue
		}
		out := output{unknown: o.outcome == outcomeUnknown, present: o.present, value: o.value, number: o.number}
		ret := o.ret
		if out.unknown {
			ret = end
		}
		for i, key := range o.keys {
			in := input{kind: o.kind, key: key, line: o.line}
			if o.kind == kindSet || o.kind == kindMset {
				in.kind = kindSet
				in.value = o.args[i]
			}
			ops = append(ops, porcupine.Operation{ClientId: o.client, Input: in, Call: o.invoke, Output: out, Return: ret})
		}
	}
	return ops
}

// check runs porcupine over the history (partitioned by key) within timeout; when it finds
// the history illegal, each key is checked again alone, within what is left of the timeout,
// to name the illegal ones.
func check(history []op, timeout time.Duration) (summary, porcupine.LinearizationInfo) {
	s := summary{Ops: len(history), IllegalKeys: []string{}}
	for _, o := range history {
		switch o.outcome {
		case outcomeUnknown:
			s.UnknownOutcomes++
		case outcomeFail:
			s.Failed++
		}
	}
	ops := operations(history)
	parts := partitionByKey(ops)
	s.Keys = len(parts)
	start := time.Now()
	result, info := porcupine.CheckOperationsVerbose(kvModel(), ops, timeout)
	switch result {
	case porcupine.Ok:
		s.Result = resultOk
	case porcupine.Illegal:
		s.Result = resultIllegal
		s.IllegalKeys = illegalKeys(parts, remaining(timeout, start))
	default:
		s.Result = resultUnknown
	}
	return s, info
}

// remaining is what is left of timeout since start (0 stays "no bound"; an exhausted one is
// a nanosecond, which porcupine takes as a bound).
func remaining(timeout time.Duration, start time.Time) time.Duration {
	if timeout == 0 {
		return 0
	}
	left := timeout - time.Since(start)
	if left <= 0 {
		return time.Nanosecond
	}
	return left
}

// illegalKeys checks each key's operations alone and returns the keys found illegal, sorted.
// A key whose check times out is not named.
func illegalKeys(parts [][]porcupine.Operation, timeout time.Duration) []string {
	keys := []string{}
	start := time.Now()
	for _, part := range parts {
		res := porcupine.CheckOperationsTimeout(keyModel(), part, remaining(timeout, start))
		if res == porcupine.Illegal {
			keys = append(keys, part[0].Input.(input).key)
		}
	}
	sort.Strings(keys)
	return keys
}

// writeVisualization writes porcupine's HTML view of the check.
func writeVisualization(info porcupine.LinearizationInfo, path string) error {
	return porcupine.VisualizePath(kvModel(), info, path)
}
