package ftn

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/ftntest"
	"tokenbed/agent/ftn/msg"
	"tokenbed/analysis"
)

// render prints a report's verdicts and evidence, for golden files.
func render(r *Report) string {
	var b strings.Builder
	for _, n := range Names {
		q := r.Requirement(n)
		fmt.Fprintf(&b, "%s: %s (%s)\n  %s\n", n, q.Verdict, q.Value, q.Detail)
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestLiteralHistories judges the literal histories of testdata/*.txt
// (JSON lines in the eventlog schema: check), literal captures (capture)
// and both views of one run (compare) against their golden output.
func TestLiteralHistories(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			hist, wire, _ := strings.Cut(d.Input, "capture:\n")
			var r *Report
			if d.Cmd == "check" || d.Cmd == "compare" {
				var evs []eventlog.Event
				err := eventlog.Read(strings.NewReader(strings.TrimRight(hist, "\n")+"\n"), d.Pos, func(e eventlog.Event) error {
					evs = append(evs, e)
					return nil
				})
				if err == nil {
					r, err = Check(evs)
				}
				if err != nil {
					return "error: " + err.Error()
				}
			}
			switch d.Cmd {
			case "check":
				return render(r)
			case "capture":
				// A literal capture (analysis/ftn/ftnliteral), judged alone.
				return renderCapture(checkLiteralCapture(t, d.Input, d.Pos, 0))
			case "compare":
				// A history, "capture:", and the capture of the same run.
				return Compare(r, checkLiteralCapture(t, wire, d.Pos, r.BaseWall)).Markdown()
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// TestBrokenServerCaught: the server that serves reclaimed tokens
// without querying the clients (ftntest broken.txt) grants f to c1 while
// c0 holds it; the checker must say so, and must pass the same schedule
// with a correct server.
func TestBrokenServerCaught(t *testing.T) {
	for _, broken := range []bool{false, true} {
		o := ftntest.Options{Servers: 3, Clients: 2, Seed: 1}
		if broken {
			o.Broken = []int{2}
		}
		c, err := ftntest.New(o)
		if err != nil {
			t.Fatal(err)
		}
		c.Run(30)
		c.Invoke(0, client.Op{Kind: msg.Acquire, Name: "f", Mode: msg.Exclusive})
		c.Run(3)
		c.CrashServer(1)
		c.Invoke(1, client.Op{Kind: msg.Acquire, Name: "f", Mode: msg.Exclusive})
		c.Run(20)
		c.Invoke(0, client.Op{Kind: msg.Release, Name: "f"})
		c.Run(5)
		r, err := Check(c.Log())
		if err != nil {
			t.Fatal(err)
		}
		me := r.MutualExclusion
		if broken && (me.Verdict != analysis.VerdictFail || !strings.Contains(me.Detail, "f: c0")) {
			t.Errorf("broken server: mutual exclusion %+v, want a failure on f between c0 and c1", me)
		}
		if !broken && me.Verdict != analysis.VerdictPass {
			t.Errorf("correct server: mutual exclusion %+v, want a pass", me)
		}
		if !broken && r.Fencing.Verdict != analysis.VerdictPass {
			t.Errorf("correct server: fencing %+v, want a pass", r.Fencing)
		}
	}
}

// TestSwarm runs random fault schedules (seeded; a failing seed replays
// exactly) and wants no check failed with correct servers, and the
// broken server caught on some seed.
func TestSwarm(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	// Shared holders write too: the data check judges FCFS updates.
	w := ftntest.Workload{Names: 4, Shared: 0.3, Rate: 0.3, SharedWrites: true}
	caught := 0
	judged := map[string]int{}
	for seed := 1; seed <= seeds; seed++ {
		for _, broken := range []bool{false, true} {
			// Odd seeds with 5 servers: a minority of two with the
			// leader exists there.
			o := ftntest.Options{Servers: 3 + 2*(seed%2), Clients: 5, Seed: uint64(seed)}
			if broken {
				o.Broken = []int{0, 1, 2}
			}
			c, err := ftntest.Swarm(o, w, 400)
			if err != nil {
				t.Fatal(err)
			}
			// 200 rounds: several times the longest recovery the
			// timeouts allow (election, DOWN, query round: about 40).
			r, err := CheckWith(c.Log(), Options{AnswerWithin: 200 * time.Duration(ftntest.TickNS)})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range Names {
				q := r.Requirement(n)
				if broken {
					if n == "mutual-exclusion" && q.Verdict == analysis.VerdictFail {
						caught++
					}
					continue
				}
				if q.Verdict == analysis.VerdictFail {
					t.Errorf("seed %d: %s failed: %s", seed, n, q.Detail)
				}
				if q.Verdict == analysis.VerdictPass {
					judged[n]++
				}
			}
			if !broken {
				w, o := sharedWrites(r)
				judged["shared writes"] += w
				judged["overlapping shared writes"] += o
			}
		}
	}
	t.Logf("correct servers, %d seeds: checks passed %v; broken servers caught on %d seeds", seeds, judged, caught)
	if caught == 0 {
		t.Errorf("the broken servers were never caught in %d seeds", seeds)
	}
	// Overlapping shared writes are rare here (one round trip is one
	// round): TestSharedHolders judges them on a fixed schedule.
	for _, n := range append(slices.Clone(Names), "shared writes") {
		if judged[n] == 0 {
			t.Errorf("%s never judged: %v", n, judged)
		}
	}
}

// sharedWrites counts the set-data operations completed under a shared
// hold, and the pairs of them by two clients on one name that overlap
// in time (whose order only the server knows).
func sharedWrites(r *Report) (writes, overlapping int) {
	var ws []*Op
	for _, o := range r.Ops {
		if o.Kind != msg.SetData || o.Result != "ok" {
			continue
		}
		if slices.ContainsFunc(r.Holds, func(h Hold) bool {
			return h.Op.Client == o.Client && h.Op.Name == o.Name && h.Op.Mode == msg.Shared && h.Start <= o.Inv && o.Done <= h.End
		}) {
			ws = append(ws, o)
		}
	}
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if a.Name == b.Name && a.Client != b.Client && a.Inv < b.Done && b.Inv < a.Done {
				overlapping++
			}
		}
	}
	return len(ws), overlapping
}

// TestAdmittedWindow: the expiry scenario (ftntest expiry.txt). c0 is
// cut off while it holds a; the leader drops it and grants a to c1. The
// overlap is the window 001 admits: reported apart, not a failure, and
// detectable by fences.
func TestAdmittedWindow(t *testing.T) {
	c, err := ftntest.New(ftntest.Options{Servers: 3, Clients: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.Run(30)
	c.Invoke(0, client.Op{Kind: msg.Acquire, Name: "a", Mode: msg.Exclusive})
	c.Run(3)
	c.Invoke(1, client.Op{Kind: msg.Acquire, Name: "a", Mode: msg.Exclusive})
	c.Partition([]string{"c0"}, []string{"s0", "s1", "s2"})
	c.Run(70) // longer than ClientDownTicks (60)
	c.Heal()
	c.Run(4)
	c.Invoke(0, client.Op{Kind: msg.Release, Name: "a"})
	c.Run(4)
	r, err := Check(c.Log())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Overlaps) != 1 || !r.Overlaps[0].Admitted || !strings.Contains(r.Overlaps[0].Evidence, "detectable: fence") {
		t.Fatalf("overlaps %v, want one admitted window detectable by fences", r.Overlaps)
	}
	if r.MutualExclusion.Verdict != analysis.VerdictPass || r.Fencing.Verdict != analysis.VerdictPass {
		t.Errorf("mutual exclusion %+v, fencing %+v: want passes", r.MutualExclusion, r.Fencing)
	}
}

// TestSharedHolders: the schedule of ftntest shared.txt. Two shared
// holders of k write it in the same round (their writes overlap; the
// server applies them FCFS) while an exclusive request waits behind
// them; the data check judges every read against both writes, and every
// check passes. The same history with the later read changed to the
// value the server overwrote fails the data check.
func TestSharedHolders(t *testing.T) {
	c, err := ftntest.New(ftntest.Options{Servers: 3, Clients: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	op := func(j int, k msg.Kind, mode msg.Mode, data string) {
		o := client.Op{Kind: k, Name: "k", Mode: mode}
		if k == msg.SetData {
			o.Data = []byte(data)
		}
		c.Invoke(j, o)
	}
	c.Run(30)
	op(0, msg.Acquire, msg.Shared, "")
	op(1, msg.Acquire, msg.Shared, "")
	c.Run(3)
	op(2, msg.Acquire, msg.Exclusive, "")
	c.Run(3)
	op(1, msg.SetData, 0, "from-c1")
	op(0, msg.SetData, 0, "from-c0")
	c.Run(3)
	op(1, msg.GetData, 0, "")
	c.Run(3)
	op(0, msg.Release, 0, "")
	op(1, msg.Release, 0, "")
	c.Run(3)
	op(2, msg.GetData, 0, "")
	c.Run(3)
	op(2, msg.Release, 0, "")
	c.Run(3)
	log := c.Log()
	r, err := Check(log)
	if err != nil {
		t.Fatal(err)
	}
	if w, o := sharedWrites(r); w != 2 || o != 1 {
		t.Fatalf("%d shared writes, %d overlapping pairs: want 2 and 1", w, o)
	}
	for _, n := range Names {
		if q := r.Requirement(n); q.Verdict != analysis.VerdictPass {
			t.Errorf("%s: %s %s", n, q.Verdict, q.Detail)
		}
	}
	// c2's read after both writes must see the server's later one
	// ("from-c0", which arrived second); "" was overwritten by both.
	bad := slices.Clone(log)
	changed := false
	for i, e := range bad {
		if e.Agent == "c2" && e.Kind == ftnlog.Complete && string(e.Extra["op"]) == `"get-data"` && string(e.Extra["data"]) == `"from-c0"` {
			bad[i].Extra = maps.Clone(e.Extra)
			bad[i].Extra["data"] = json.RawMessage(`""`)
			changed = true
		}
	}
	if !changed {
		t.Fatal("no get-data of c2 reading from-c0 in the history")
	}
	r, err = Check(bad)
	if err != nil {
		t.Fatal(err)
	}
	if r.Data.Verdict != analysis.VerdictFail {
		t.Errorf("a read of an overwritten value: data %+v, want a failure", r.Data)
	}
}
