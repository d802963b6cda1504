package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis/wandering"
)

// TestShort004 is the short form of the 004 checks (make test; the full
// form is the study itself, which exits non-zero): 004's own protocol
// (3-way exchange, 10^-4 datagram loss, clock drift ±10^-4) at N = 150
// for 2·10^4 time units, the scenario of Tables 3 and 4 unchanged but
// its length. The bulk rows of Tables 3 and 4 (k = 1, the first three
// bins of Table 4), which the docs say match, must be within their
// tolerance for that length (wandering.Checks004), and the
// run must be what the scenario says: k_load 1, the agents on the 3-way
// exchange with drifting clocks.
func TestShort004(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 150 agents for 2·10^4 time units with real signatures (about 5 s of CPU); make test runs it")
	}
	var s Scenario
	for _, x := range scenarios004() {
		if x.Name == "t3-3way-p4-n150" {
			s = x
		}
	}
	if s.Name == "" {
		t.Fatal("no scenario t3-3way-p4-n150")
	}
	s.Span = 20_000 * time.Second
	dir := t.TempDir()
	m, err := Simulate(s, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.KLoad != 1 || m.Passing != passing3way || m.Drift != drift004 || m.Profile != lossP4 {
		t.Errorf("manifest k_load %v, passing %q, drift %v, profile %q: want 1, %q, %v, %q", m.KLoad, m.Passing, m.Drift, m.Profile, passing3way, drift004, lossP4)
	}
	r, err := wandering.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs := wandering.Checks004(map[string]*wandering.Run{s.Name: r})
	if len(cs) != 10+9 {
		t.Errorf("%d checks, want Table 3's 10 rows and Table 4's 9", len(cs))
	}
	// The bulk rows only: one operation at a time, and Table 4's first
	// three bins (97% of the intervals). Two or more at once come in
	// bursts after a loss (the regenerated tokens), so in 2·10^4 time
	// units one loss more or less moves them beyond a tolerance made for
	// counting noise; the full form checks them at 3·10^5 and more.
	bulk := map[string]bool{"t3/" + s.Name + "/k1": true, "t4/" + s.Name + "/b0": true, "t4/" + s.Name + "/b1": true, "t4/" + s.Name + "/b2": true}
	var checked []wandering.Check
	for _, c := range cs {
		if bulk[c.ID] {
			checked = append(checked, c)
		}
	}
	if len(checked) != len(bulk) {
		t.Fatalf("checks %v: want the bulk rows %v", cs, bulk)
	}
	for _, c := range wandering.Unexpected(checked) {
		t.Errorf("%s: paper %s, ours %s: outside its tolerance, and the docs say it matches", c.ID, c.Paper, c.Ours)
	}
}

// TestScenarios004 checks the experiment file the 004 scenarios write:
// the 3-way exchange in the agents' passing section, the loss in the
// profile, and each agent's drift within ±10^-4, not all equal, the same
// for the same seed.
func TestScenarios004(t *testing.T) {
	var s Scenario
	for _, x := range scenarios004() {
		if x.Name == "t3-3way-p5-n300" {
			s = x
		}
	}
	y := s.experimentYAML()
	for _, want := range []string{"    passing: " + passing3way + "\n", `profile: "` + lossP5 + `"`} {
		if !strings.Contains(y, want) {
			t.Errorf("experiment file lacks %q:\n%s", want, y[:400])
		}
	}
	seen := map[string]bool{}
	for i := range s.N {
		c := s.clockYAML(i)
		var d float64
		if _, err := fmt.Sscanf(c, ", clock: {drift: %g}", &d); err != nil || math.Abs(d) > drift004 {
			t.Fatalf("agent %d: clock %q (%v), want a drift within ±%g", i, c, err, drift004)
		}
		seen[c] = true
		if c != s.clockYAML(i) {
			t.Fatalf("agent %d: clock not a function of the seed", i)
		}
	}
	if len(seen) < s.N/2 {
		t.Errorf("%d distinct drifts among %d agents", len(seen), s.N)
	}
	if got := s.kload(); got != 2 {
		t.Errorf("k_load %v at N = 300, Δop 4, Δmin 600; want 2", got)
	}
}

// TestTrackerLostInTransit: on the 3-way exchange a token whose Commit is
// lost is released by its sender and acquired by nobody, and no event
// says it is gone. The tracker forgets it lostAfter its release, so the
// system can be stable again and Table 5's next loss comes; without that
// the two tokens it counts would never be one again.
func TestTrackerLostInTransit(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	now := at(0)
	tr := newTracker()
	tr.maxSpike = 600 * time.Second
	tr.now = func() time.Time { return now }
	ev := func(s float64, agent string, kind eventlog.Kind, tok string) {
		now = at(s)
		tr.observe(agent, eventlog.Event{Kind: kind, Token: tok})
	}
	ev(0, "a", eventlog.TokenAcquired, "T1")
	ev(10, "b", eventlog.TokenAcquired, "T2")
	ev(20, "b", eventlog.TokenReleased, "T2") // its Commit is lost
	if d := tr.stableFor(at(1000)); d != 0 {
		t.Errorf("stable for %v at 1000 after a spike of 990 s, want 0", d)
	}
	if n := tr.alive(); n != 1 {
		t.Errorf("%d tokens alive, want 1 (T2 lost in transit)", n)
	}
	if d := tr.stableFor(at(11000)); d != 10000*time.Second {
		t.Errorf("stable for %v at 11000, want 10000 s (one token since T2 was forgotten at 1000)", d)
	}
}
