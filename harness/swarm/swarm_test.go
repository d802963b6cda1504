package swarm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
	_ "tokenbed/plugins/tokenpassing" // token passing: the run half and the analysis the swarm judges with
)

const testExperiment = "testdata/three-agents-swarm.yaml"

// load reads the test experiment, with agent C given fault (the planted
// bug) unless it is "".
func load(t testing.TB, fault string) *experiments.Experiment {
	t.Helper()
	b, err := os.ReadFile(testExperiment)
	if err != nil {
		t.Fatal(err)
	}
	if fault != "" {
		c := bytes.Replace(b, []byte("  - {name: C}\n"), []byte("  - {name: C, config: {fault: "+fault+"}}\n"), 1)
		if bytes.Equal(c, b) {
			t.Fatalf("%s has no line '  - {name: C}' to plant the bug in", testExperiment)
		}
		b = c
	}
	e, err := experiments.Parse(testExperiment, b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ddmin finds the faults that fail together, and only them.
func TestDdminFindsTheCulprits(t *testing.T) {
	var xs []Fault
	for i := range 10 {
		xs = append(xs, Fault{Kind: fmt.Sprint(i)})
	}
	for _, culprits := range [][]string{{"5"}, {"3", "7"}, {"0", "1", "9"}} {
		fails := func(c []Fault) bool {
			for _, k := range culprits {
				if !slices.ContainsFunc(c, func(f Fault) bool { return f.Kind == k }) {
					return false
				}
			}
			return true
		}
		got := ddmin(xs, func(cands [][]Fault) int { return slices.IndexFunc(cands, fails) })
		var kinds []string
		for _, f := range got {
			kinds = append(kinds, f.Kind)
		}
		if !slices.Equal(kinds, culprits) {
			t.Errorf("ddmin with culprits %v kept %v", culprits, kinds)
		}
	}
}

// A seed's faults are a function of the experiment and the seed, and
// every subset of them (what the shrinker tries) is a valid experiment
// file: a crash keeps its restart, and crashes do not overlap.
func TestDrawnFilesAreValidForEverySubset(t *testing.T) {
	e := load(t, "")
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		fs := Draw(e, seed)
		if !reflect.DeepEqual(fs, Draw(e, seed)) {
			t.Fatalf("seed %d: two draws differ", seed)
		}
		for _, f := range fs {
			kinds[f.Kind]++
		}
		for mask := 0; mask < 1<<min(len(fs), 8); mask++ {
			var sub []Fault
			for i, f := range fs {
				if mask&(1<<i) != 0 || i >= 8 {
					sub = append(sub, f)
				}
			}
			b, err := File(e.Raw, seed, sub)
			if err != nil {
				t.Fatal(err)
			}
			got, err := experiments.Parse("drawn", b)
			if err != nil {
				t.Fatalf("seed %d, faults %b: %v\n%s", seed, mask, err, b)
			}
			steps := 0
			for _, f := range sub {
				steps += len(f.Steps)
			}
			if got.Seed != seed || len(got.Schedule) != steps || got.Swarm == nil {
				t.Fatalf("seed %d: file has seed %d, %d steps; want %d steps", seed, got.Seed, len(got.Schedule), steps)
			}
		}
	}
	for _, k := range []string{"outage", "crash", "profile"} {
		if kinds[k] == 0 {
			t.Errorf("20 seeds drew no %s (drew %v)", k, kinds)
		}
	}
	if reflect.DeepEqual(Draw(e, 1), Draw(e, 2)) {
		t.Error("seeds 1 and 2 drew the same faults")
	}
}

// The swarm finds the planted bug: agent C with skip_ack_check gives the
// token away without waiting for the Ack, so a Move that does not arrive
// loses it (002 §3.1). C's first contacts are with peers that learnt its
// key, so the bug needs a fault to show: a peer that restarts without
// C's key, an outage. The swarm reports a failing seed with a file that
// replays it and shrinks its faults to a non-empty, 1-minimal set (drop
// any one fault and the seed passes); on the correct agent the same
// seeds find nothing.
func TestSwarmFindsThePlantedBug(t *testing.T) {
	const seeds = 4
	run := func(fault string) (*Swarm, []Result) {
		s, err := New(Options{Experiment: load(t, fault), Root: t.TempDir(), Workers: 2, Duration: 300 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var rs []Result
		s.Seeds(t.Context(), 1, seeds, func(r Result) { rs = append(rs, r) })
		if len(rs) != seeds {
			t.Fatalf("%d results for %d seeds", len(rs), seeds)
		}
		for i, r := range rs {
			if r.Err != nil || r.Seed != uint64(1+i) {
				t.Fatalf("seed %d (result %d): %v", r.Seed, i, r.Err)
			}
		}
		return s, rs
	}
	_, good := run("")
	for _, r := range good {
		if r.Fails() {
			t.Errorf("the correct agent fails seed %d: %v", r.Seed, r.Failed)
		}
	}
	s, bad := run("skip_ack_check")
	var failing []Result
	for _, r := range bad {
		if r.Fails() {
			failing = append(failing, r)
		}
	}
	if len(failing) == 0 {
		t.Fatal("the swarm did not find the planted bug")
	}
	r := failing[0]
	if !strings.HasPrefix(r.Failed[0], "loss: ") {
		t.Errorf("seed %d fails %v, want the loss invariant", r.Seed, r.Failed)
	}
	if b, err := os.ReadFile(r.Path); err != nil || !bytes.Equal(b, r.File) {
		t.Errorf("seed %d's replay file %s: %v", r.Seed, r.Path, err)
	}
	m, runs := s.Shrink(t.Context(), r)
	t.Logf("seed %d: %d faults shrunk to %d in %d replays:\n%s", r.Seed, len(r.Faults), len(m.Faults), runs, Schedule(m.Faults))
	if !m.Fails() || len(m.Faults) == 0 || len(m.Faults) > len(r.Faults) || runs == 0 {
		t.Fatalf("shrunk to %d of %d faults in %d replays, failing %v: want a failing, non-empty, smaller set", len(m.Faults), len(r.Faults), runs, m.Failed)
	}
	if filepath.Base(m.Path) != fmt.Sprintf("seed-%d-shrunk.yaml", r.Seed) {
		t.Errorf("shrunk file %s", m.Path)
	}
	// The shrunk file replays: the same failure.
	b, err := os.ReadFile(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := experiments.Parse(m.Path, b)
	if err != nil {
		t.Fatal(err)
	}
	if again := s.Run(t.Context(), e.Seed, m.Faults, "again"); !slices.Equal(again.Failed, m.Failed) {
		t.Errorf("the shrunk schedule replays as %v, want %v", again.Failed, m.Failed)
	}
	// 1-minimal: without any one of its faults the seed passes.
	for i := range m.Faults {
		less := slices.Delete(slices.Clone(m.Faults), i, i+1)
		if c := s.Run(t.Context(), r.Seed, less, fmt.Sprintf("less%d", i)); c.Fails() {
			t.Errorf("without fault %d (%s) the seed still fails: the shrunk set is not minimal", i, m.Faults[i].Kind)
		}
	}
}

// BenchmarkSeedsPerMinute is the swarm's speed: seeds per minute of a
// one-hour, three-agent experiment with drawn faults, on every CPU.
//
//	go test -run - -bench SeedsPerMinute -benchtime 8x ./harness/swarm
func BenchmarkSeedsPerMinute(b *testing.B) {
	s, err := New(Options{Experiment: load(b, ""), Root: b.TempDir(), Duration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	fails := 0
	s.Seeds(b.Context(), 1, b.N, func(r Result) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		if r.Fails() {
			fails++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Minutes(), "seeds/min")
	b.ReportMetric(float64(s.o.Workers), "workers")
	b.ReportMetric(float64(fails), "failing")
}
