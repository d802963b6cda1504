package stats

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
)

// The golden files hold what the hand-written statistics this package
// replaced (netem/validate's and analysis/crossval's) computed on seeded
// samples; the samples are in the files. The gonum-based functions must
// give the same statistics, p-values and quantiles; the quantile
// intervals, now exact binomial ranks instead of the normal
// approximation of the binomial, must lie within maxRankGap order
// statistics of the old ones.

func readGolden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func key(t *testing.T, k string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(k, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) != math.IsNaN(want) {
		t.Errorf("%s = %v, want %v ± %v", name, got, want, tol)
	}
}

// rankOf is the 1-based rank range of v in sorted (ties give a range).
func rankOf(sorted []float64, v float64) (first, last int) {
	first = 1 + slices.IndexFunc(sorted, func(x float64) bool { return x == v })
	last = first
	for last < len(sorted) && sorted[last] == v {
		last++
	}
	return first, last
}

// maxRankGap is how many ranks apart the new and old intervals may be:
// the normal approximation misplaces the ranks of a tail quantile (q =
// 0.01, 0.99), where the binomial is skewed, by up to two.
const maxRankGap = 2

// withinRanks: new and old are order statistics of sorted at most
// maxRankGap ranks apart.
func withinRanks(sorted []float64, got, want float64) bool {
	gf, gl := rankOf(sorted, got)
	wf, wl := rankOf(sorted, want)
	return gf > 0 && wf > 0 && gf <= wl+maxRankGap && wf <= gl+maxRankGap
}

func TestGoldenValidate(t *testing.T) {
	var pairs []struct {
		Name    string
		A, B    []float64
		P       map[string]float64
		CI      map[string][2]float64
		KS      float64
		KSAt    map[string]float64
		KSShift [2]float64
		Band    map[string]float64
		Crit    float64
	}
	readGolden(t, "validate-golden.json", &pairs)
	if len(pairs) == 0 {
		t.Fatal("no golden pairs")
	}
	for _, p := range pairs {
		for k, want := range p.P {
			near(t, p.Name+" quantile "+k, Quantile(p.A, key(t, k)), want, 0)
		}
		for k, want := range p.CI {
			lo, hi := QuantileCI(p.A, key(t, k), 0.99)
			if !withinRanks(p.A, lo, want[0]) || !withinRanks(p.A, hi, want[1]) {
				t.Errorf("%s CI p%s = [%v, %v], old [%v, %v]: more than maxRankGap ranks apart", p.Name, k, lo, hi, want[0], want[1])
			}
		}
		near(t, p.Name+" KS", KS(p.A, p.B), p.KS, 1e-12)
		for k, want := range p.KSAt {
			near(t, p.Name+" KS shifted "+k, KSShifted(p.A, p.B, key(t, k)), want, 1e-12)
		}
		d, s := KSMinShift(p.A, p.B, 0.5, 0.01)
		near(t, p.Name+" KSMinShift D", d, p.KSShift[0], 1e-12)
		// The grid's argmin may differ where two shifts tie to rounding.
		if KSShifted(p.A, p.B, s) > p.KSShift[0]+1e-12 {
			t.Errorf("%s: shift %v does not reach the old minimum %v", p.Name, s, p.KSShift[0])
		}
		for k, want := range p.Band {
			near(t, p.Name+" band "+k, KSBand(p.A, p.B, key(t, k)), want, 1e-12)
		}
		near(t, p.Name+" critical", KSCritical(len(p.A), len(p.B), 0.01), p.Crit, 1e-12)
	}
}

func TestGoldenCrossval(t *testing.T) {
	var g struct {
		Pairs []struct {
			Name string
			A, B []float64
			KS   [2]float64
			CI   map[string][2]float64
			Crit float64
		}
		Binomial []struct {
			K, N int
			P    float64
		}
	}
	readGolden(t, "crossval-golden.json", &g)
	if len(g.Pairs) == 0 || len(g.Binomial) == 0 {
		t.Fatal("empty golden file")
	}
	level := LevelOfZ(2.576 / math.Sqrt2)
	for _, p := range g.Pairs {
		d, pv := KSTest(p.A, p.B)
		near(t, p.Name+" KS D", d, p.KS[0], 1e-12)
		near(t, p.Name+" KS p", pv, p.KS[1], 1e-9)
		for k, want := range p.CI {
			lo, hi := QuantileCI(p.A, key(t, k), level)
			if !withinRanks(p.A, lo, want[0]) || !withinRanks(p.A, hi, want[1]) {
				t.Errorf("%s CI q%s = [%v, %v], old [%v, %v]: more than maxRankGap ranks apart", p.Name, k, lo, hi, want[0], want[1])
			}
		}
		near(t, p.Name+" critical", KSCritical(len(p.A), len(p.B), 0.01), p.Crit, 1e-12)
	}
	for _, b := range g.Binomial {
		got := BinomialTwoSided(b.K, b.N, 0.5)
		near(t, "binomial "+strconv.Itoa(b.K)+"/"+strconv.Itoa(b.N), got, b.P, 1e-9*max(b.P, 1e-300))
	}
}
