package crossval

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// Temporary: the hand-written statistics' results on seeded samples, kept
// as internal/stats/testdata/crossval-golden.json when they move.
func TestWriteGoldenCrossval(t *testing.T) {
	if os.Getenv("WRITE_GOLDEN") == "" {
		t.Skip("WRITE_GOLDEN unset")
	}
	type pair struct {
		Name   string
		A, B   []float64
		KS     [2]float64
		CI     map[string][2]float64 // interval(A, q, 2.576/√2)
		Crit   float64
	}
	type binom struct{ K, N int; P float64 }
	r := rand.New(rand.NewPCG(2026, 25))
	gen := func(n int, f func() float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = f()
		}
		slices.Sort(x)
		return x
	}
	var out struct {
		Pairs    []pair
		Binomial []binom
	}
	for _, c := range []struct {
		name string
		a, b []float64
	}{
		{"normal 2000 vs normal+0.1 2000", gen(2000, r.NormFloat64), gen(2000, func() float64 { return r.NormFloat64() + 0.1 })},
		{"exp 60 vs exp 80", gen(60, r.ExpFloat64), gen(80, r.ExpFloat64)},
		{"return comb 400 vs 380", gen(400, func() float64 { return float64(1+r.IntN(5)) * (3 + 0.01*r.NormFloat64()) }), gen(380, func() float64 { return float64(1+r.IntN(5)) * (3 + 0.01*r.NormFloat64()) })},
		{"ties 300 vs 250", gen(300, func() float64 { return float64(r.IntN(10)) }), gen(250, func() float64 { return float64(r.IntN(12)) })},
		{"small 8 vs 12", gen(8, r.NormFloat64), gen(12, r.NormFloat64)},
	} {
		p := pair{Name: c.name, A: c.a, B: c.b, CI: map[string][2]float64{}}
		d, pv := KS(c.a, c.b)
		p.KS = [2]float64{d, pv}
		for _, q := range []float64{0.5, 0.9, 0.99} {
			lo, hi := interval(c.a, q, 2.576/math.Sqrt2)
			b, _ := json.Marshal(q)
			p.CI[string(b)] = [2]float64{lo, hi}
		}
		p.Crit = ksCritical(len(c.a), len(c.b), 0.01)
		out.Pairs = append(out.Pairs, p)
	}
	for _, kn := range [][2]int{{0, 0}, {0, 10}, {10, 10}, {3, 10}, {5, 10}, {12, 40}, {1, 1}, {50, 120}, {0, 7}} {
		out.Binomial = append(out.Binomial, binom{kn[0], kn[1], BinomialTwoSided(kn[0], kn[1])})
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("../../internal/stats/testdata/crossval-golden.json", b, 0o644); err != nil {
		t.Fatal(err)
	}
}
