package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tokenbed/analysis/wandering"
)

// TestShortReproduction runs two small scenarios on the simulator, as
// `make wandering` does, and checks their figures against generous
// tolerances: the baseline of 004 §2 against the Poisson law its Table 1
// follows, and a Wandering Token of 60 agents (003's formulas with
// N_max = 60: Δmin 120 s, γ 7,200 s) with a loss every 5,000 s against
// 003 §3's claims (idle well under 10% and rarely more than two
// operations at once; one token again after each loss).
func TestShortReproduction(t *testing.T) {
	dir := t.TempDir()
	base := Scenario{Name: "baseline", Role: "baseline", Section: base004, N: 150, Span: 200_000 * time.Second, Seed: 7}
	if _, err := Simulate(base, dir+"/baseline", nil); err != nil {
		t.Fatal(err)
	}
	r, err := wandering.Load(dir + "/baseline")
	if err != nil {
		t.Fatal(err)
	}
	c := r.Concurrency()
	lambda := 150 * 4.0 / 750
	for k := 0; k <= 3; k++ {
		want := r.SpanS * math.Exp(-lambda) * math.Pow(lambda, float64(k)) / math.Gamma(float64(k)+1)
		if k >= len(c) || math.Abs(c[k]-want) > 0.15*want {
			t.Errorf("baseline: %v s with %d operations, Poisson(%.1f) expects %.0f (±15%%)", c, k, lambda, want)
		}
	}
	if testing.Short() {
		t.Skip("the Wandering Token part passes tokens with real signatures (about 10 s)")
	}
	wt := Scenario{Name: "wt", Role: "wandering", Section: "{op: 4s, skip: 100ms, nmax: 60}", N: 60,
		Span: 20_000 * time.Second, Seed: 8, LossEvery: 5000 * time.Second}
	m, err := Simulate(wt, dir+"/wt", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Losses) != 3 {
		t.Fatalf("%d losses injected, want 3 (at 5000, 10000, 15000 s)", len(m.Losses))
	}
	r, err = wandering.Load(dir + "/wt")
	if err != nil {
		t.Fatal(err)
	}
	c = r.Concurrency()
	var more float64
	for k := 3; k < len(c); k++ {
		more += c[k]
	}
	if idle := c[0] / r.SpanS; idle > 0.25 {
		t.Errorf("idle %.1f%% of the time (with regenerations after 3 losses); want well under 25%%", 100*idle)
	}
	if more/r.SpanS > 0.02 {
		t.Errorf("more than two operations %.2f%% of the time, want under 2%%", 100*more/r.SpanS)
	}
	d, un := r.Stabilizations(120) // Δmin of this run
	if un != 0 || len(d) != 3 {
		t.Errorf("stabilizations %v, %d unsettled: every loss should end with one token again", d, un)
	}
}

// TestParallelSameBytes: scenarios run at once (-j) write, byte for
// byte, the logs they write one at a time; only the wall time in the
// manifest may differ.
func TestParallelSameBytes(t *testing.T) {
	todo := []Scenario{
		{Name: "base", Role: "baseline", Section: base004, N: 20, Span: 20_000 * time.Second, Seed: 3},
		{Name: "w004", Role: "wandering-004", Section: "{op: 4s, skip: 1s, min: 80s}", N: 20, Span: 4000 * time.Second, Seed: 4},
		{Name: "w004any", Role: "wandering-004", Section: "{op: 4s, skip: 1s, min: 80s, removal: any}", N: 20, Span: 4000 * time.Second, Seed: 4},
		{Name: "wt", Role: "wandering", Section: "{op: 4s, skip: 100ms, nmax: 20}", N: 20, Span: 4000 * time.Second, Seed: 5, LossEvery: 1000 * time.Second},
	}
	one, all := t.TempDir(), t.TempDir()
	if err := runAll(slices.Clone(todo), one, 1); err != nil {
		t.Fatal(err)
	}
	if err := runAll(slices.Clone(todo), all, len(todo)); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(one, "*", "logs", "*.jsonl"))
	if len(files) != 4*20 {
		t.Fatalf("%d logs, want %d", len(files), 4*20)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(one, f)
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(all, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: differs when the scenarios run at once (%v)", rel, err)
		}
	}
}

// TestWallLimit: a scenario that reaches its wall-time limit ends there,
// says so in its manifest, and records the span it simulated (the report
// scales counts by it), not the one asked for.
func TestWallLimit(t *testing.T) {
	s := Scenario{Name: "cut", Role: "baseline", Section: base004, N: 5, Span: 1e9 * time.Second, Seed: 9, WallLimit: time.Nanosecond}
	m, err := Simulate(s, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !m.CutShort || m.SpanS >= s.Span.Seconds() {
		t.Errorf("cut_short %v, span %.0f s of %.0f: want the run cut short with its simulated span", m.CutShort, m.SpanS, s.Span.Seconds())
	}
}
