package main

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// input is one key's operation, as the model sees it (an mset becomes one set per key).
type input struct {
	kind  string // get, set, incr or del
	key   string
	value string // set's
	line  int    // the history line, for descriptions
}

// output is what the operation returned.
type output struct {
	// unknown: the outcome is not known; any output is allowed (porcupine's way to model an
	// operation that may or may not have taken effect, together with a return time at the
	// end of the history).
	unknown bool
	present bool   // get: a value was returned (false: null)
	value   string // get's value
	number  int64  // incr's new value, del's count
}

// register is the state of one key: a string, or nothing. Comparable, so porcupine's default
// equality (==) is the right one.
type register struct {
	present bool
	value   string
}

// parseInteger reads a register as INCR does: nothing is 0, otherwise a decimal 64-bit
// integer written canonically (as Redis's string2ll accepts it: no sign but '-', no leading
// zero, no space). ok is false for anything else.
func parseInteger(r register) (n int64, ok bool) {
	if !r.present {
		return 0, true
	}
	n, err := strconv.ParseInt(r.value, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != r.value {
		return 0, false
	}
	return n, true
}

// step is the sequential specification of one key.
func step(state, in, out interface{}) (bool, interface{}) {
	st := state.(register)
	i := in.(input)
	o := out.(output)
	switch i.kind {
	case kindGet:
		legal := o.unknown || (o.present == st.present && (!st.present || o.value == st.value))
		return legal, st
	case kindSet:
		return true, register{present: true, value: i.value}
	case kindDel:
		removed := int64(0)
		if st.present {
			removed = 1
		}
		return o.unknown || o.number == removed, register{}
	case kindIncr:
		n, ok := parseInteger(st)
		if !ok || n == math.MaxInt64 {
			// An error reply and no effect: only an unknown outcome can have been one.
			return o.unknown, st
		}
		next := n + 1
		return o.unknown || o.number == next, register{present: true, value: strconv.FormatInt(next, 10)}
	}
	panic(fmt.Sprintf("unknown kind %q", i.kind))
}

// hashRegister is the model's Hash (equal registers hash equal).
func hashRegister(state interface{}) uint64 {
	st := state.(register)
	if !st.present {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(st.value))
	return h.Sum64() | 1
}

// describeOperation is an operation's text in the visualization.
func describeOperation(in, out interface{}) string {
	i := in.(input)
	o := out.(output)
	var result string
	switch {
	case o.unknown:
		result = " -> unknown"
	case i.kind == kindGet && o.present:
		result = fmt.Sprintf(" -> %q", o.value)
	case i.kind == kindGet:
		result = " -> nil"
	case i.kind == kindIncr || i.kind == kindDel:
		result = fmt.Sprintf(" -> %d", o.number)
	}
	if i.kind == kindSet {
		return fmt.Sprintf("set(%q, %q)%s [line %d]", i.key, i.value, result, i.line)
	}
	return fmt.Sprintf("%s(%q)%s [line %d]", i.kind, i.key, result, i.line)
}

// describeState is a register's text in the visualization.
func describeState(state interface{}) string {
	st := state.(register)
	if !st.present {
		return "nil"
	}
	return strconv.Quote(st.value)
}

// partitionByKey splits a history into one history per key, in key order (porcupine checks
// each alone: a key-value history is linearizable if and only if each key's is).
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := make(map[string][]porcupine.Operation)
	for _, o := range history {
		key := o.Input.(input).key
		byKey[key] = append(byKey[key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, byKey[k])
	}
	return parts
}

// keyModel is the model of one key (no partition: for a history of one key).
func keyModel() porcupine.Model {
	return porcupine.Model{
		Init:              func() interface{} { return register{} },
		Step:              step,
		Hash:              hashRegister,
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
}

// kvModel is the model of the whole store: keys independent, partitioned by key.
func kvModel() porcupine.Model {
	m := keyModel()
	m.Partition = partitionByKey
	return m
}
