package crossval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tokenbed/analysis"
)

func load(t *testing.T, name string) *analysis.Samples {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var s analysis.Samples
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &s
}

// Literal runs (testdata/*.json, analysis.Samples) and the verdict each
// comparison must reach, with the figures that must fail.
func TestCompareVerdicts(t *testing.T) {
	for _, c := range []struct {
		a, b string
		fail []string
	}{
		// Two draws of the same distributions: every figure agrees.
		{"real.json", "sim.json", nil},
		// The model 0.5 ms fast per LAN pass (its spread is 0.3 ms, 60
		// passes): the LAN quantiles are outside their intervals, the
		// rest still agrees.
		{"real.json", "sim-fast-lan.json", []string{"A>B latency p50", "A>B latency p99"}},
		// Ten outages: all detected by the commit timeout in one run, all
		// by the ack timeout in the other.
		{"real-commit-timeouts.json", "sim-no-commit-timeouts.json", []string{"pass failures, ack timeout", "pass failures, commit timeout"}},
	} {
		tab := Compare(load(t, c.a), load(t, c.b), Options{})
		if got := tab.Failed(); !slices.Equal(got, c.fail) {
			t.Errorf("%s vs %s: failed %q, want %q\n%s", c.a, c.b, got, c.fail, tab.Markdown())
		}
		if tab.Pass() != (len(c.fail) == 0) {
			t.Errorf("%s vs %s: Pass() = %v", c.a, c.b, tab.Pass())
		}
	}
}

// Every figure the issue names has a row: latency p50 and p99 per
// direction, KS of the return times, failures by cause, acquisitions.
func TestCompareRows(t *testing.T) {
	tab := Compare(load(t, "real.json"), load(t, "sim.json"), Options{})
	var figs []string
	for _, r := range tab.Rows {
		figs = append(figs, r.Figure)
		if r.Tolerance == "" {
			t.Errorf("%s: no tolerance stated", r.Figure)
		}
	}
	want := []string{"A>B latency p50", "A>B latency p99", "A>C latency p50", "A>C latency p99", "return time of A (paper), KS",
		"pass failures, ack timeout", "pass failures, commit timeout", "acquisitions"}
	if !slices.Equal(figs, want) {
		t.Errorf("rows %q, want %q", figs, want)
	}
	md := tab.Markdown()
	if !strings.Contains(md, "| figure | tb000001 (netns) | tb000002 (sim) |") || !strings.Contains(md, "All figures within tolerance.") {
		t.Errorf("markdown:\n%s", md)
	}
}

// An allowance widens the latency tolerance, and is printed with its
// reason.
func TestAllowance(t *testing.T) {
	tab := Compare(load(t, "real.json"), load(t, "sim-fast-lan.json"), Options{Allowance: 0.0006, AllowanceWhy: "host cost per pass"})
	if !tab.Pass() {
		t.Errorf("a 0.6 ms allowance should cover a 0.5 ms shift:\n%s", tab.Markdown())
	}
	if !strings.Contains(tab.Markdown(), "Latency allowance 0.60 ms: host cost per pass.") {
		t.Errorf("the allowance is not stated:\n%s", tab.Markdown())
	}
}

// Return times are combs of narrow teeth at k visits: a millisecond per
// visit moves every tooth, and KS sees it; the allowance, as a shift per
// visit, absorbs it, and no more.
func TestReturnTimeShiftPerVisit(t *testing.T) {
	comb := func(visit float64) []float64 {
		var xs []float64
		for i := range 600 {
			k := 1 + i%5
			xs = append(xs, float64(k)*visit+float64(i%7)*1e-5)
		}
		return xs
	}
	a, b := comb(10.070), comb(10.069)
	if r := ksRow("A", a, b, 10.07, Options{}.withDefaults()); r.Pass {
		t.Errorf("1 ms per visit, no allowance: %s passed", r.Diff)
	}
	if r := ksRow("A", a, b, 10.07, Options{Allowance: 0.002}.withDefaults()); !r.Pass {
		t.Errorf("1 ms per visit, 2 ms allowance: %s failed", r.Diff)
	}
	if r := ksRow("A", a, comb(10.060), 10.07, Options{Allowance: 0.002}.withDefaults()); r.Pass {
		t.Errorf("10 ms per visit, 2 ms allowance: %s passed", r.Diff)
	}
}
