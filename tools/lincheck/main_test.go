package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// lincheck runs the command on a history given as lines; its exit code, summary and stderr.
func lincheck(t *testing.T, lines ...string) (int, summary, string) {
	t.Helper()
	return lincheckArgs(t, []string{"-"}, lines...)
}

func lincheckArgs(t *testing.T, args []string, lines ...string) (int, summary, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(strings.Join(lines, "\n")+"\n"), &stdout, &stderr)
	var s summary
	if code != exitBadInput {
		if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
			t.Fatalf("summary %q: %v (stderr %q)", stdout.String(), err, stderr.String())
		}
	}
	return code, s, stderr.String()
}

func expect(t *testing.T, code int, s summary, wantCode int, wantResult string, wantIllegal []string) {
	t.Helper()
	if code != wantCode || s.Result != wantResult || !reflect.DeepEqual(s.IllegalKeys, wantIllegal) {
		t.Fatalf("exit %d, summary %+v; want exit %d, result %s, illegal keys %v",
			code, s, wantCode, wantResult, wantIllegal)
	}
}

// Concurrent SETs and GETs whose reads all fit one order of the writes.
func TestConcurrentSetsAndGetsAreLinearizable(t *testing.T) {
	code, s, _ := lincheck(t,
		// C0: |---- set x=a ----|           |-- set x=c --|
		// C1:    |---- set x=b ----|
		// C2:       |- get x -> b -|  |- get x -> a -|
		// b read before a: b took effect first, a after it; both overlap the read of b.
		`{"client":0,"kind":"set","keys":["x"],"args":["a"],"invoke":10,"return":50,"outcome":"ok"}`,
		`{"client":1,"kind":"set","keys":["x"],"args":["b"],"invoke":20,"return":60,"outcome":"ok"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":30,"return":45,"outcome":"ok","result":"b"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":70,"return":80,"outcome":"ok","result":"a"}`,
		`{"client":0,"kind":"set","keys":["x"],"args":["c"],"invoke":90,"return":100,"outcome":"ok"}`,
		`{"client":3,"kind":"get","keys":["y"],"invoke":5,"return":200,"outcome":"ok","result":null}`,
		`{"client":3,"kind":"get","keys":["x"],"invoke":201,"return":210,"outcome":"ok","result":"c"}`,
	)
	expect(t, code, s, exitOk, resultOk, []string{})
	if s.Ops != 7 || s.Keys != 2 || s.UnknownOutcomes != 0 || s.Failed != 0 {
		t.Fatalf("counts: %+v", s)
	}
}

// A GET invoked after a SET of a newer value returned, which reads the older value.
func TestStaleReadIsIllegal(t *testing.T) {
	code, s, _ := lincheck(t,
		`{"client":0,"kind":"set","keys":["x"],"args":["old"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":0,"kind":"set","keys":["x"],"args":["new"],"invoke":30,"return":40,"outcome":"ok"}`,
		`{"client":1,"kind":"get","keys":["x"],"invoke":50,"return":60,"outcome":"ok","result":"old"}`,
		`{"client":1,"kind":"get","keys":["y"],"invoke":50,"return":60,"outcome":"ok","result":null}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"x"})
}

// Two INCRs, one after the other, that both return 1: one increment was lost.
func TestLostIncrIsIllegal(t *testing.T) {
	code, s, _ := lincheck(t,
		`{"client":0,"kind":"incr","keys":["n"],"invoke":10,"return":20,"outcome":"ok","result":1}`,
		`{"client":1,"kind":"incr","keys":["n"],"invoke":30,"return":40,"outcome":"ok","result":1}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"n"})
	// Concurrent, they must still return 1 and 2.
	code, s, _ = lincheck(t,
		`{"client":0,"kind":"incr","keys":["n"],"invoke":10,"return":40,"outcome":"ok","result":2}`,
		`{"client":1,"kind":"incr","keys":["n"],"invoke":20,"return":30,"outcome":"ok","result":1}`,
		`{"client":1,"kind":"get","keys":["n"],"invoke":50,"return":60,"outcome":"ok","result":"2"}`,
	)
	expect(t, code, s, exitOk, resultOk, []string{})
}

// A SET whose outcome is unknown may or may not have taken effect, even long after it was
// invoked: a later read of either value is linearizable, a read of a third one is not.
func TestUnknownSetMayOrMayNotHaveApplied(t *testing.T) {
	for _, read := range []string{`"before"`, `"maybe"`} {
		code, s, _ := lincheck(t,
			`{"client":0,"kind":"set","keys":["x"],"args":["before"],"invoke":10,"return":20,"outcome":"ok"}`,
			`{"client":1,"kind":"set","keys":["x"],"args":["maybe"],"invoke":30,"return":35,"outcome":"unknown"}`,
			`{"client":2,"kind":"get","keys":["x"],"invoke":100,"return":110,"outcome":"ok","result":`+read+`}`,
		)
		expect(t, code, s, exitOk, resultOk, []string{})
		if s.UnknownOutcomes != 1 {
			t.Fatalf("unknown outcomes: %+v", s)
		}
	}
	// Applied late: read as "before", then as "maybe" (it took effect between the reads).
	code, s, _ := lincheck(t,
		`{"client":0,"kind":"set","keys":["x"],"args":["before"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":1,"kind":"set","keys":["x"],"args":["maybe"],"invoke":30,"return":35,"outcome":"unknown"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":100,"return":110,"outcome":"ok","result":"before"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":120,"return":130,"outcome":"ok","result":"maybe"}`,
	)
	expect(t, code, s, exitOk, resultOk, []string{})
	// But not undone once seen.
	code, s, _ = lincheck(t,
		`{"client":0,"kind":"set","keys":["x"],"args":["before"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":1,"kind":"set","keys":["x"],"args":["maybe"],"invoke":30,"return":35,"outcome":"unknown"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":100,"return":110,"outcome":"ok","result":"maybe"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":120,"return":130,"outcome":"ok","result":"before"}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"x"})
	// Nor read before it was invoked.
	code, s, _ = lincheck(t,
		`{"client":1,"kind":"set","keys":["x"],"args":["maybe"],"invoke":30,"return":35,"outcome":"unknown"}`,
		`{"client":2,"kind":"get","keys":["x"],"invoke":10,"return":20,"outcome":"ok","result":"maybe"}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"x"})
}

// An unknown INCR may have counted: the next INCR returns 1 or 2, not 3.
func TestUnknownIncr(t *testing.T) {
	for _, tc := range []struct {
		next string
		want string
	}{{"1", resultOk}, {"2", resultOk}, {"3", resultIllegal}} {
		_, s, _ := lincheck(t,
			`{"client":0,"kind":"incr","keys":["n"],"invoke":10,"return":20,"outcome":"unknown"}`,
			`{"client":1,"kind":"incr","keys":["n"],"invoke":30,"return":40,"outcome":"ok","result":`+tc.next+`}`,
		)
		if s.Result != tc.want {
			t.Fatalf("next INCR %s: %+v, want %s", tc.next, s, tc.want)
		}
	}
}

// An INCR of a value that is not an integer is an error: it cannot succeed.
func TestIncrOfAString(t *testing.T) {
	code, s, _ := lincheck(t,
		`{"client":0,"kind":"set","keys":["n"],"args":["abc"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":0,"kind":"incr","keys":["n"],"invoke":30,"return":40,"outcome":"ok","result":1}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"n"})
	code, s, _ = lincheck(t,
		`{"client":0,"kind":"set","keys":["n"],"args":["41"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":0,"kind":"incr","keys":["n"],"invoke":30,"return":40,"outcome":"ok","result":42}`,
		`{"client":0,"kind":"set","keys":["m"],"args":["abc"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":0,"kind":"incr","keys":["m"],"invoke":30,"return":40,"outcome":"unknown"}`,
		`{"client":0,"kind":"get","keys":["m"],"invoke":50,"return":60,"outcome":"ok","result":"abc"}`,
	)
	expect(t, code, s, exitOk, resultOk, []string{})
}

// An MSET writes each of its keys; a fail is left out; DEL empties and counts.
func TestMsetFailAndDel(t *testing.T) {
	code, s, _ := lincheck(t,
		`{"client":0,"kind":"mset","keys":["a","b"],"args":["1","2"],"invoke":10,"return":20,"outcome":"ok"}`,
		`{"client":1,"kind":"set","keys":["a"],"args":["never"],"invoke":21,"outcome":"fail"}`,
		`{"client":1,"kind":"get","keys":["a"],"invoke":30,"return":40,"outcome":"ok","result":"1"}`,
		`{"client":1,"kind":"get","keys":["b"],"invoke":30,"return":40,"outcome":"unknown"}`,
		`{"client":2,"kind":"del","keys":["b"],"invoke":50,"return":60,"outcome":"ok","result":1}`,
		`{"client":2,"kind":"del","keys":["b"],"invoke":70,"return":80,"outcome":"ok","result":0}`,
		`{"client":2,"kind":"get","keys":["b"],"invoke":90,"return":95,"outcome":"ok","result":null}`,
	)
	expect(t, code, s, exitOk, resultOk, []string{})
	if s.Ops != 7 || s.Failed != 1 || s.UnknownOutcomes != 1 || s.Keys != 2 {
		t.Fatalf("counts: %+v", s)
	}
	// The refused SET, had it applied, would be read: the GET of its value is illegal.
	code, s, _ = lincheck(t,
		`{"client":1,"kind":"set","keys":["a"],"args":["never"],"invoke":21,"outcome":"fail"}`,
		`{"client":1,"kind":"get","keys":["a"],"invoke":30,"return":40,"outcome":"ok","result":"never"}`,
	)
	expect(t, code, s, exitIllegal, resultIllegal, []string{"a"})
}

// Bad input: exit 3 and the line named.
func TestBadInputNamesTheLine(t *testing.T) {
	good := `{"client":0,"kind":"set","keys":["x"],"args":["a"],"invoke":10,"return":20,"outcome":"ok"}`
	for _, bad := range []string{
		`not json`,
		`{"client":0,"kind":"cas","keys":["x"],"invoke":1,"return":2,"outcome":"ok"}`,
		`{"client":0,"kind":"get","keys":["x"],"invoke":1,"return":2,"outcome":"ok"}`,
		`{"client":0,"kind":"get","keys":["x"],"invoke":3,"return":2,"outcome":"ok","result":null}`,
		`{"client":0,"kind":"set","keys":["x"],"invoke":1,"return":2,"outcome":"ok"}`,
		`{"client":0,"kind":"mset","keys":["x","x"],"args":["1","2"],"invoke":1,"return":2,"outcome":"ok"}`,
		`{"client":0,"kind":"incr","keys":["x"],"invoke":1,"return":2,"outcome":"ok","result":"1"}`,
		`{"client":0,"kind":"get","keys":["x"],"invoke":1,"return":2,"outcome":"maybe"}`,
		`{"client":0,"kind":"get","keys":["x"],"invoke":1,"return":2,"outcome":"ok","result":null,"extra":1}`,
		`{"kind":"get","keys":["x"],"invoke":1,"return":2,"outcome":"ok","result":null}`,
	} {
		code, _, stderr := lincheck(t, good, bad)
		if code != exitBadInput || !strings.Contains(stderr, "line 2:") {
			t.Fatalf("%s: exit %d, stderr %q", bad, code, stderr)
		}
	}
}

// --visualize writes porcupine's HTML page.
func TestVisualize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.html")
	code, _, _ := lincheckArgs(t, []string{"--visualize", path, "-"},
		`{"client":0,"kind":"set","keys":["x"],"args":["new"],"invoke":30,"return":40,"outcome":"ok"}`,
		`{"client":1,"kind":"get","keys":["x"],"invoke":50,"return":60,"outcome":"ok","result":null}`,
	)
	if code != exitIllegal {
		t.Fatalf("exit %d", code)
	}
	page, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(page, []byte("<html")) {
		t.Fatalf("visualization: %v, %d bytes", err, len(page))
	}
}
