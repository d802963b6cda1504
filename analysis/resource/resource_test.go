package resource

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"tokenbed/agent/eventlog"
)

func read(t *testing.T, name string) []eventlog.Event {
	t.Helper()
	evs, err := eventlog.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The server's log gives one interval per connection; a connection still
// open at the end of the log is open until its last event.
func TestFromServer(t *testing.T) {
	ivs, err := FromServer("server.jsonl", read(t, "server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interval{{"A", "1@A", 1100, 5050, false}, {"B", "2@B", 3100, 7050, false}, {"C", "2@B", 8100, 9000, true}}
	if len(ivs) != len(want) {
		t.Fatalf("intervals %+v, want %+v", ivs, want)
	}
	for i := range want {
		if ivs[i] != want[i] {
			t.Errorf("interval %d: %+v, want %+v", i, ivs[i], want[i])
		}
	}
	_, err = FromServer("bad-server.jsonl", read(t, "bad-server.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "bad-server.jsonl: seq 2: A disconnected without connecting") {
		t.Errorf("error %v, want one naming the file, the line's seq and the client", err)
	}
}

// Two agents whose operations overlap for 2 µs of a 8 µs window: the
// agents' logs and the server's log (each connection 100 ns late, each
// disconnect 50 ns late: connection set-up and the FIN's trip) give the
// same histogram within those lags.
func TestAgentsAndServerAgree(t *testing.T) {
	var ops, holds []Interval
	for _, n := range []string{"A.jsonl", "B.jsonl"} {
		evs := read(t, n)
		ops = append(ops, FromAgent(evs)...)
		holds = append(holds, Holds(evs, 0)...)
	}
	srv, err := FromServer("server.jsonl", read(t, "server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	a := Concurrency(ops, 0, 8000, nil, 1, Levels)
	s := Concurrency(srv, 0, 8000, nil, 1, Levels)
	// Agents: level 0 on [0,1000) and [7000,8000); 1 on [1000,3000) and
	// [5000,7000); 2 on [3000,5000).
	for i, w := range []float64{2000.0 / 8000, 4000.0 / 8000, 2000.0 / 8000, 0} {
		if !near(a.Share[i], w) {
			t.Errorf("agents: level %d share %v, want %v (%v)", i, a.Share[i], w, a)
		}
	}
	// Server: 0 on [0,1100), [7050,8000); 1 on [1100,3100), [5050,7050); 2 on [3100,5050).
	for i, w := range []float64{2050.0 / 8000, 4000.0 / 8000, 1950.0 / 8000, 0} {
		if !near(s.Share[i], w) {
			t.Errorf("server: level %d share %v, want %v (%v)", i, s.Share[i], w, s)
		}
	}
	if d, lvl := Compare(a, s); !near(d, 50.0/8000) || (lvl != 0 && lvl != 2) {
		t.Errorf("largest difference %v at level %d, want %v at 0 or 2", d, lvl, 50.0/8000)
	}
	if a.Max != 2 {
		t.Errorf("max level %d, want 2", a.Max)
	}
	// In paper time (holds stretched 10×), idle time between the holds
	// shrinks: A holds [900,5000), B [2900,7000); outside, [0,900) and
	// [7000,8000) count once.
	p := Concurrency(ops, 0, 8000, holds, 10, Levels)
	total := 900.0 + 6100*10 + 1000
	for i, w := range []float64{(900 + 100*10 + 1000) / total, (2000*10 + 2000*10) / total, 2000 * 10 / total, 0} {
		if !near(p.Share[i], w) {
			t.Errorf("paper time: level %d share %v, want %v (%v)", i, p.Share[i], w, p)
		}
	}
}

// An operation without its op_finished (the agent crashed) ends at the
// log's last event, and is marked open; long holds stand for operations
// in logs without op_started, short ones (Δskip) do not.
func TestOpenOperationsAndHolds(t *testing.T) {
	ivs := FromAgent(read(t, "C.jsonl"))
	if len(ivs) != 1 || !ivs[0].Open || ivs[0].Start != 8050 || ivs[0].End != 8050 {
		t.Errorf("C's operations %+v, want one open at 8050", ivs)
	}
	// D crashed during an operation and was restarted in the same log:
	// the operation ends with the crash (its last event), not with the
	// restarted process's last event.
	d := FromAgent(read(t, "D.jsonl"))
	if len(d) != 2 || !d[0].Open || d[0].End != 1000 || d[1].Open || d[1].Start != 20000 || d[1].End != 24000 {
		t.Errorf("D's operations %+v, want [1000, 1000] cut by the crash and [20000, 24000]", d)
	}
	if hs := Holds(read(t, "D.jsonl"), 0); len(hs) != 2 || hs[0].End != 1000 || hs[1].Start != 20000 {
		t.Errorf("D's holds %+v, want the first cut by the crash at 1000", hs)
	}
	if hs := Holds(read(t, "A.jsonl"), 4000); len(hs) != 1 || hs[0].Start != 900 || hs[0].End != 5000 {
		t.Errorf("A's long holds %+v, want [900, 5000)", hs)
	}
	if hs := Holds(read(t, "A.jsonl"), 4200); len(hs) != 0 {
		t.Errorf("A's holds of at least 4200 ns: %+v, want none", hs)
	}
}
