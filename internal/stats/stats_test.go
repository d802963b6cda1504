package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func sample(n int, f func() float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = f()
	}
	slices.Sort(x)
	return x
}

func TestQuantileNearestRank(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0.1, 1}, {0.11, 2}, {1, 10}, {0, 1}} {
		near(t, "Quantile", Quantile(x, c.q), c.want, 0)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile of no samples is not NaN")
	}
}

// Exact ranks: for n = 10 and the median at 95%, the textbook interval is
// X(2)..X(9) (coverage 97.9%; X(3)..X(8) covers only 89%).
func TestQuantileRanksTextbook(t *testing.T) {
	if l, u := QuantileRanks(10, 0.5, 0.95); l != 2 || u != 9 {
		t.Errorf("n=10 median 95%%: ranks %d..%d, want 2..9", l, u)
	}
	// Five samples cannot bound the median at 99%: P(all five above) =
	// 1/32 > 0.005.
	if l, u := QuantileRanks(5, 0.5, 0.99); l != 0 || u != 6 {
		t.Errorf("n=5 median 99%%: ranks %d..%d, want 0..6 (unbounded)", l, u)
	}
	lo, hi := QuantileBounds([]float64{1, 2, 3, 4, 5}, 0.5, 0.99)
	if !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Errorf("bounds [%v, %v], want infinite", lo, hi)
	}
}

// The order-statistic interval covers the true quantile at least at its
// level: 400 seeded samples of 2000 exponentials, 99%.
func TestQuantileCICoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, q := range []float64{0.5, 0.9, 0.99} {
		truth := -math.Log(1 - q)
		cover := 0
		const reps = 400
		for range reps {
			x := sample(2000, r.ExpFloat64)
			if lo, hi := QuantileCI(x, q, 0.99); lo <= truth && truth <= hi {
				cover++
			}
		}
		// Binomial(400, 0.99): below 390 has probability < 0.3%.
		if cover < 390 {
			t.Errorf("p%g: covered %d/400, want about 99%%", q*100, cover)
		}
	}
}

func TestKSKnownValues(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5}
	b := []float64{3, 4, 5, 6, 7}
	near(t, "KS", KS(a, b), 0.4, 1e-12)
	near(t, "KS symmetric", KS(b, a), 0.4, 1e-12)
	near(t, "KS shifted into a", KSShifted(a, b, -2), 0, 1e-12)
	d, s := KSMinShift(a, b, 2, 0.5)
	near(t, "KSMinShift", d, 0, 1e-12)
	near(t, "KSMinShift shift", s, -2, 1e-12)
	near(t, "KS disjoint", KS([]float64{1, 2}, []float64{10, 11, 12}), 1, 1e-12)
	near(t, "KSBand 1", KSBand(a, b, 1), 0.2, 1e-12)
	near(t, "c(0.01)", KSCritical(1, 1, 0.01)/math.Sqrt2, 1.6276, 1e-4)
	// D at the critical value has p = α (up to Stephens' correction, which
	// vanishes for large samples).
	near(t, "p at critical", KSPValue(KSCritical(100000, 100000, 0.01), 100000, 100000), 0.01, 2e-4)
	if !math.IsNaN(KS(nil, a)) {
		t.Error("KS of an empty sample is not NaN")
	}
}

// Under the null, each test rejects at about its level; under a clear
// alternative, nearly always. 1000 seeded pairs each.
func TestNullRatesAndPower(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const reps, alpha = 1000, 0.01
	var ksNull, qNull, cNull, ksAlt, qAlt, cAlt int
	poisson := func(lambda float64) int {
		k, p := 0, math.Exp(-lambda)
		for u := r.Float64(); u > p; u *= r.Float64() {
			k++
		}
		return k
	}
	for range reps {
		a := sample(300, r.NormFloat64)
		b := sample(200, r.NormFloat64)
		c := sample(200, func() float64 { return r.NormFloat64() + 0.6 })
		if _, p := KSTest(a, b); p < alpha {
			ksNull++
		}
		if _, p := KSTest(a, c); p < alpha {
			ksAlt++
		}
		if QuantileTest(a, b, 0.5) < alpha {
			qNull++
		}
		if QuantileTest(a, c, 0.5) < alpha {
			qAlt++
		}
		// Counts: 5 nights of rate 4 against one night of rate 4, or 18.
		if CountTest(poisson(4), poisson(20), 1, 5) < alpha {
			cNull++
		}
		if CountTest(poisson(18), poisson(20), 1, 5) < alpha {
			cAlt++
		}
	}
	t.Logf("null rejections of %d at α=%g: KS %d, quantile %d, count %d; power: %d %d %d", reps, alpha, ksNull, qNull, cNull, ksAlt, qAlt, cAlt)
	// At α = 0.01 the expected count is 10; P(Binomial(1000, 0.01) ≥ 22)
	// < 0.1%. Discrete tests are conservative, so few is fine.
	limit := 22
	if BinomialUpper(limit, reps, alpha) > 0.001 {
		t.Fatalf("limit %d is not a 0.1%% bound", limit)
	}
	for name, n := range map[string]int{"KS": ksNull, "quantile": qNull, "count": cNull} {
		if n >= limit {
			t.Errorf("%s: %d false rejections of %d at α=%g", name, n, reps, alpha)
		}
	}
	for name, n := range map[string]int{"KS": ksAlt, "quantile": qAlt, "count": cAlt} {
		if n < reps*9/10 {
			t.Errorf("%s: power %d/%d, want ≥ 90%%", name, n, reps)
		}
	}
}

func TestBinomial(t *testing.T) {
	// 0 of 10 at 1/2: 2/1024 two-sided.
	near(t, "0/10", BinomialTwoSided(0, 10, 0.5), 2.0/1024, 1e-12)
	near(t, "5/10", BinomialTwoSided(5, 10, 0.5), 1, 1e-12)
	// Upper tail: P(B(10, 0.5) ≥ 9) = 11/1024.
	near(t, "≥9 of 10", BinomialUpper(9, 10, 0.5), 11.0/1024, 1e-12)
	near(t, "≥0", BinomialUpper(0, 10, 0.3), 1, 0)
	near(t, "p=0", BinomialTwoSided(0, 10, 0), 1, 1e-12)
	near(t, "p=0, k>0", BinomialTwoSided(1, 10, 0), 0, 1e-12)
	if !math.IsNaN(CountTest(1, 2, 0, 1)) {
		t.Error("CountTest with no exposure is not NaN")
	}
}

func TestHolm(t *testing.T) {
	p := []float64{0.01, 0.04, 0.03, math.NaN(), 0.005}
	rej, adj := Holm(p, 0.05)
	// Sorted 0.005, 0.01, 0.03, 0.04 against 0.05/4, /3, /2, /1: the first
	// two pass (0.0125, 0.0167), 0.03 > 0.025 stops.
	if want := []bool{true, false, false, false, true}; !slices.Equal(rej, want) {
		t.Errorf("reject %v, want %v", rej, want)
	}
	near(t, "adjusted 0.005", adj[4], 0.02, 1e-12)
	near(t, "adjusted 0.01", adj[0], 0.03, 1e-12)
	near(t, "adjusted 0.03", adj[2], 0.06, 1e-12)
	near(t, "adjusted 0.04", adj[1], 0.06, 1e-12)
	if !math.IsNaN(adj[3]) {
		t.Errorf("NaN p-value adjusted to %v", adj[3])
	}
}

func TestKSSmallSamples(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if d, p := KSTest(a, a); d != 0 || p != 1 {
		t.Errorf("identical samples: D %v p %v, want 0 and 1", d, p)
	}
	b := []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if d, p := KSTest(a, b); math.Abs(d-1) > 1e-12 || p > 1e-3 {
		t.Errorf("disjoint samples: D %v p %v, want 1 and < 0.001", d, p)
	}
	c := []float64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	near(t, "shifted by half", KS(a, c), 0.5, 1e-12)
	// Ties across samples: the ECDFs step together.
	near(t, "ties", KS([]float64{1, 1, 2}, []float64{1, 2, 2}), 1.0/3, 1e-12)
	if q := Quantile(Sorted([]float64{99, 98, 97, 1, 2, 3, 4, 5, 6, 7}), 0.9); q != 98 {
		t.Errorf("p90 = %v, want 98 (the 9th smallest)", q)
	}
}

// The Kolmogorov distribution's tail at its tabulated critical values.
func TestKolmogorovQ(t *testing.T) {
	for _, c := range []struct{ l, q float64 }{{1.3581, 0.05}, {1.6276, 0.01}, {1.2239, 0.10}} {
		near(t, "Q", kolmogorovQ(c.l), c.q, 2e-4)
	}
}

func TestBinomialTwoSidedHalf(t *testing.T) {
	for _, c := range []struct {
		k, n int
		p    float64
	}{{0, 10, 2.0 / 1024}, {5, 10, 1}, {0, 0, 1}, {1, 11, 24.0 / 2048}, {3, 10, 2 * 176.0 / 1024}} {
		near(t, "BinomialTwoSided", BinomialTwoSided(c.k, c.n, 0.5), c.p, 1e-9)
	}
}

// Disjoint samples give a tiny p-value, not 0: the tail comes from erfc.
func TestQuantileTestTail(t *testing.T) {
	a := sample(500, func() float64 { return 0 })
	b := sample(500, func() float64 { return 1 })
	if p := QuantileTest(a, b, 0.5); !(p > 0 && p < 1e-20) {
		t.Errorf("p = %v, want in (0, 1e-20)", p)
	}
	near(t, "survival(12)", normalSurvival(12), 1.776482112077679e-33, 1e-45)
}
