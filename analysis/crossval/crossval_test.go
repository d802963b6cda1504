package crossval

import (
	"encoding/json"
	"math"
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

func TestKS(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if d, p := KS(a, a); d != 0 || p != 1 {
		t.Errorf("identical samples: D %v p %v, want 0 and 1", d, p)
	}
	b := []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if d, p := KS(a, b); d != 1 || p > 1e-3 {
		t.Errorf("disjoint samples: D %v p %v, want 1 and < 0.001", d, p)
	}
	// Half the distance: the ECDFs differ by 0.5 at most.
	c := []float64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if d, _ := KS(a, c); d != 0.5 {
		t.Errorf("shifted by half: D %v, want 0.5", d)
	}
	// Ties across samples: the ECDFs step together.
	if d, _ := KS([]float64{1, 1, 2}, []float64{1, 2, 2}); math.Abs(d-1.0/3) > 1e-12 {
		t.Errorf("ties: D %v, want 1/3", d)
	}
}

// The Kolmogorov distribution's tail at its tabulated critical values.
func TestKolmogorovQ(t *testing.T) {
	for _, c := range []struct{ l, q float64 }{{1.3581, 0.05}, {1.6276, 0.01}, {1.2239, 0.10}} {
		if got := kolmogorovQ(c.l); math.Abs(got-c.q) > 2e-4 {
			t.Errorf("Q(%v) = %v, want %v", c.l, got, c.q)
		}
	}
}

func TestBinomialTwoSided(t *testing.T) {
	for _, c := range []struct {
		k, n int
		p    float64
	}{{0, 10, 2.0 / 1024}, {5, 10, 1}, {0, 0, 1}, {1, 11, 24.0 / 2048}, {3, 10, 2 * 176.0 / 1024}} {
		if got := BinomialTwoSided(c.k, c.n); math.Abs(got-c.p) > 1e-9 {
			t.Errorf("BinomialTwoSided(%d, %d) = %v, want %v", c.k, c.n, got, c.p)
		}
	}
}

// The quantile's interval covers its rank ± z·√(nq(1−q)).
func TestInterval(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i)
	}
	// n = 100, q = 0.5: sd of the rank 5, z = 2: the 40th and 60th.
	if lo, hi := interval(xs, 0.5, 2); lo != 39 || hi != 59 {
		t.Errorf("interval [%v, %v], want [39, 59]", lo, hi)
	}
	// Near the top the interval reaches the maximum.
	if _, hi := interval(xs, 0.99, 2); hi != 99 {
		t.Errorf("p99 interval ends at %v, want 99", hi)
	}
	if q := quantile(xs, 0.99); q != 98 {
		t.Errorf("p99 of 0..99 = %v, want 98 (the 99th smallest, as analysis reports)", q)
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
