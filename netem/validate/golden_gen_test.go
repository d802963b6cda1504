package validate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// Temporary: the hand-written statistics' results on seeded samples, kept
// as internal/stats/testdata/validate-golden.json when they move.
func TestWriteGoldenValidate(t *testing.T) {
	if os.Getenv("WRITE_GOLDEN") == "" {
		t.Skip("WRITE_GOLDEN unset")
	}
	type pair struct {
		Name    string
		A, B    []float64
		P       map[string]float64 // Percentile of A at p
		CI      map[string][2]float64
		KS      float64
		KSAt    map[string]float64 // KS(a, b, shift)
		KSShift [2]float64
		Band    map[string]float64
		Crit    float64
	}
	r := rand.New(rand.NewPCG(2026, 24))
	gen := func(n int, f func() float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = f()
		}
		slices.Sort(x)
		return x
	}
	var out []pair
	for _, c := range []struct {
		name string
		a, b []float64
	}{
		{"normal 2000 vs normal+0.1 2000", gen(2000, r.NormFloat64), gen(2000, func() float64 { return r.NormFloat64() + 0.1 })},
		{"exp 500 vs exp 700", gen(500, r.ExpFloat64), gen(700, r.ExpFloat64)},
		{"delay 10ms±50us vs 10.3ms", gen(1000, func() float64 { return 10 + 0.05*r.NormFloat64() }), gen(1000, func() float64 { return 10.3 + 0.05*r.NormFloat64() })},
		{"ties 300 vs 250", gen(300, func() float64 { return float64(r.IntN(10)) }), gen(250, func() float64 { return float64(r.IntN(12)) })},
		{"small 20 vs 30", gen(20, r.NormFloat64), gen(30, r.NormFloat64)},
	} {
		p := pair{Name: c.name, A: c.a, B: c.b, P: map[string]float64{}, CI: map[string][2]float64{}, KSAt: map[string]float64{}, Band: map[string]float64{}}
		for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 1} {
			k := jsonKey(q)
			p.P[k] = Percentile(c.a, q)
			lo, hi := PercentileCI(c.a, q, Z99)
			p.CI[k] = [2]float64{lo, hi}
		}
		p.KS = KS(c.a, c.b, 0)
		for _, s := range []float64{-0.3, -0.1, 0.05, 0.2} {
			p.KSAt[jsonKey(s)] = KS(c.a, c.b, s)
		}
		d, s := KSShift(c.a, c.b, 0.5, 0.01)
		p.KSShift = [2]float64{d, s}
		for _, dl := range []float64{0, 0.05, 0.5} {
			p.Band[jsonKey(dl)] = KSBand(c.a, c.b, dl)
		}
		p.Crit = KSCritical(len(c.a), len(c.b))
		out = append(out, p)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("../../internal/stats/testdata/validate-golden.json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = math.Pi
}

func jsonKey(f float64) string { b, _ := json.Marshal(f); return string(b) }
