package validate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tokenbed/internal/stats"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) {
		t.Errorf("%s = %v, want %v ± %v", name, got, want, tol)
	}
}

// The KS decisions Compare relies on (internal/stats holds the tests):
// samples of the same distribution pass the α=0.01 KS test (about 99% of
// the time; with this seed they do); a shift of 0.3σ with 2000 samples
// fails it, and so does a different shape with equal mean and variance.
func TestKSDecisions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	sample := func(f func() float64) []float64 {
		x := make([]float64, 2000)
		for i := range x {
			x[i] = f()
		}
		slices.Sort(x)
		return x
	}
	a := sample(r.NormFloat64)
	b := sample(r.NormFloat64)
	crit := stats.KSCritical(len(a), len(b), 0.01)
	if d := stats.KS(a, b); d > crit {
		t.Errorf("same distribution: D=%.4f > crit %.4f", d, crit)
	}
	c := sample(func() float64 { return r.NormFloat64() + 0.3 })
	if d := stats.KS(a, c); d <= crit {
		t.Errorf("shifted by 0.3σ: D=%.4f ≤ crit %.4f", d, crit)
	}
	// Allowing a shift of 0.3 recovers it.
	if d, _ := stats.KSMinShift(a, c, 0.35, 0.01); d > crit {
		t.Errorf("shift allowed: D=%.4f > crit", d)
	}
	u := sample(func() float64 { return (r.Float64() - 0.5) * math.Sqrt(12) })
	if d := stats.KS(a, u); d <= crit {
		t.Errorf("normal vs uniform: D=%.4f ≤ crit %.4f", d, crit)
	}
	// In delay terms: 10 ms vs 12 ms with 50 µs of noise fails even with
	// the ±0.5 ms band.
	k := sample(func() float64 { return 10 + 0.05*r.NormFloat64() })
	w := sample(func() float64 { return 12 + 0.05*r.NormFloat64() })
	if d := stats.KSBand(k, w, KSShiftMS); d < 0.99 {
		t.Errorf("10 ms vs 12 ms: band D=%.4f, want ≈1", d)
	}
}

func TestRatesAndCI(t *testing.T) {
	// The textbook two-proportion interval: 50/1000 vs 80/1000.
	want := 2.5758 * math.Sqrt(0.05*0.95/1000+0.08*0.92/1000)
	near(t, "TwoProportionCI", TwoProportionCI(50, 1000, 80, 1000), want, 1e-4)

	r := rand.New(rand.NewPCG(7, 8))
	bern := func(p float64, n int) []bool {
		x := make([]bool, n)
		for i := range x {
			x[i] = r.Float64() < p
		}
		return x
	}
	// Two Bernoulli(5%) sequences of 2000: the difference is inside the
	// 99% CI in ≥ 97% of 300 repetitions; 5% against 10% is outside in
	// nearly all.
	inside, outside := 0, 0
	for range 300 {
		a, b := RateOf(bern(0.05, 2000)), RateOf(bern(0.05, 2000))
		if math.Abs(a.P-b.P) <= DiffCI(a, b) {
			inside++
		}
		c := RateOf(bern(0.10, 2000))
		if math.Abs(a.P-c.P) > DiffCI(a, c) {
			outside++
		}
	}
	if inside < 291 {
		t.Errorf("same rate: inside the 99%% CI %d/300 times", inside)
	}
	if outside < 285 {
		t.Errorf("5%% vs 10%%: outside the CI only %d/300 times", outside)
	}

	// A bursty sequence (Gilbert: bursts of mean 10, 5% loss) has a
	// batch-means SE well above the binomial one.
	x := make([]bool, 2000)
	bad := false
	for i := range x {
		if bad {
			bad = r.Float64() >= 0.1
		} else {
			bad = r.Float64() < 0.1*0.05/0.95
		}
		x[i] = bad
	}
	g := RateOf(x)
	if binom := math.Sqrt(g.P * (1 - g.P) / 2000); g.SE < 1.5*binom {
		t.Errorf("bursty: SE %.4f, binomial %.4f: batch means should be larger", g.SE, binom)
	}
	b := Bursts(x)
	m, _ := meanSD(b)
	near(t, "mean burst", m, 10, 4)
}

func TestBurstsAndIndicators(t *testing.T) {
	got := Bursts([]bool{true, true, false, true, false, false, true, true, true})
	if !slices.Equal(got, []float64{2, 1, 3}) {
		t.Fatalf("Bursts = %v", got)
	}
	tr := &Trace{SentNS: make([]int64, 6), Arrivals: []Arrival{{Seq: 0}, {Seq: 2}, {Seq: 1}, {Seq: 2}, {Seq: 5}, {Seq: 3}}}
	lost, dup, reo := Indicators(tr)
	if !slices.Equal(lost, []bool{false, false, false, false, true, false}) {
		t.Errorf("lost %v", lost)
	}
	if !slices.Equal(dup, []bool{false, false, true, false, false, false}) {
		t.Errorf("dup %v", dup)
	}
	// First arrivals 0 2 1 5 3: 1 and 3 came after a higher number.
	if !slices.Equal(reo, []bool{false, false, true, false, true}) {
		t.Errorf("reordered %v", reo)
	}
}

// Compare on synthetic traces: identical behaviour passes, a 2 ms delay
// difference and a doubled loss rate fail.
func TestCompareSynthetic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	mk := func(delay time.Duration, loss float64) *Trace {
		tr := &Trace{SentNS: make([]int64, 2000)}
		for i := range tr.SentNS {
			tr.SentNS[i] = int64(i) * 2e6
			if r.Float64() < loss {
				continue
			}
			tr.Arrivals = append(tr.Arrivals, Arrival{Seq: uint32(i), RecvNS: tr.SentNS[i] + int64(delay) + int64(r.IntN(50000))})
		}
		return tr
	}
	ok := Compare("same", mk(10*time.Millisecond, 0.05), mk(10*time.Millisecond, 0.05), 0, 0)
	if !ok.Pass {
		t.Errorf("identical profiles failed: %v\n%s", ok.Failed(), Markdown([]Result{ok}))
	}
	bad := Compare("delay", mk(10*time.Millisecond, 0), mk(12*time.Millisecond, 0), 0, 0)
	if f := bad.Failed(); !slices.Contains(f, "delay p50") || !slices.Contains(f, "KS D") {
		t.Errorf("10 ms vs 12 ms: failed %v, want delay p50 and KS D", f)
	}
	// The calibration offsets are subtracted: 12 ms with 2 ms of overhead
	// equals 10 ms.
	if c := Compare("cal", mk(10*time.Millisecond, 0), mk(12*time.Millisecond, 0), 0, 2); !c.Pass {
		t.Errorf("calibrated: failed %v", c.Failed())
	}
	loss := Compare("loss", mk(10*time.Millisecond, 0.05), mk(10*time.Millisecond, 0.10), 0, 0)
	if f := loss.Failed(); !slices.Equal(f, []string{"loss rate"}) {
		t.Errorf("5%% vs 10%% loss: failed %v, want only loss rate", f)
	}
}
