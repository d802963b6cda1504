package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// binomialPMF is P(B = k) of Binomial(n, p), exact at p = 0 and 1.
func binomialPMF(k, n int, p float64) float64 {
	switch {
	case k < 0 || k > n:
		return 0
	case p <= 0:
		return b2f(k == 0)
	case p >= 1:
		return b2f(k == n)
	}
	return distuv.Binomial{N: float64(n), P: p}.Prob(float64(k))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// BinomialTwoSided is the exact two-sided p-value of k successes in n
// trials of probability p: the probability of an outcome at most as
// likely as k.
func BinomialTwoSided(k, n int, p float64) float64 {
	if n == 0 {
		return 1
	}
	pk := binomialPMF(k, n, p)
	s := 0.0
	for i := 0; i <= n; i++ {
		if q := binomialPMF(i, n, p); q <= pk*(1+1e-9) {
			s += q
		}
	}
	return min(1, s)
}

// BinomialUpper is the exact one-sided p-value P(B ≥ k) of Binomial(n, p):
// the evidence that the rate is above p.
func BinomialUpper(k, n int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n:
		return 0
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	return distuv.Binomial{N: float64(n), P: p}.Survival(float64(k - 1))
}

// CountTest is the exact conditional test of two event counts: k events
// against kBase, over exposures (trials, or time) t and tBase. Given the
// total, k is Binomial(k+kBase, t/(t+tBase)) when both have the same rate
// (Poisson counts; binomial ones with a small rate). It returns the
// two-sided p-value.
func CountTest(k, kBase int, t, tBase float64) float64 {
	if t <= 0 || tBase <= 0 || math.IsNaN(t+tBase) {
		return math.NaN()
	}
	return BinomialTwoSided(k, k+kBase, t/(t+tBase))
}

// Holm is Holm's step-down correction of the family of p-values p at
// family-wise level alpha: reject[i] is true for the tests it rejects,
// and adjusted[i] is the adjusted p-value (compare with alpha). NaN
// p-values (tests not made) are never rejected and do not count in the
// family.
func Holm(p []float64, alpha float64) (reject []bool, adjusted []float64) {
	reject = make([]bool, len(p))
	adjusted = make([]float64, len(p))
	var idx []int
	for i, v := range p {
		adjusted[i] = math.NaN()
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case p[a] < p[b]:
			return -1
		case p[a] > p[b]:
			return 1
		}
		return 0
	})
	m := len(idx)
	run, stop := 0.0, false
	for j, i := range idx {
		run = max(run, min(1, float64(m-j)*p[i]))
		adjusted[i] = run
		if !stop && p[i] <= alpha/float64(m-j) {
			reject[i] = true
		} else {
			stop = true
		}
	}
	return reject, adjusted
}
