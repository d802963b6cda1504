// Package stats holds the distribution-free statistics the project's
// comparisons share, on gonum's stat and stat/distuv: nearest-rank
// quantiles and their order-statistic confidence intervals, the
// two-sample Kolmogorov–Smirnov test, exact binomial tests, and Holm's
// correction for a family of tests. The netem engine's validation
// (netem/validate), the simulator against real runs (analysis/crossval)
// and the trend across nights (analysis/trend) all use it, so one figure
// is judged one way everywhere.
//
// Samples passed as "sorted" must be sorted ascending (Sorted gives a
// sorted copy); an empty sample gives NaN.
package stats

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Sorted returns a sorted copy of x, leaving x alone.
func Sorted(x []float64) []float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s
}

// Quantile is the nearest-rank q-quantile (0 ≤ q ≤ 1) of sorted: the
// ⌈q·n⌉-th smallest value, the smallest value at or above a fraction q of
// the samples (gonum's stat.Empirical).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return stat.Quantile(min(max(q, 0), 1), stat.Empirical, sorted, nil)
}

// QuantileRanks are the 1-based ranks (l, u) of the order statistics
// that bound the q-quantile of n samples with probability at least level,
// whatever the (continuous) distribution: the number of samples below
// the true quantile is Binomial(n, q), so P(X₍ₗ₎ > ξ) = P(B ≤ l−1) and
// P(X₍ᵤ₎ < ξ) = P(B ≥ u), each kept at most (1−level)/2. l = 0 or
// u = n+1 means the sample is too small to bound that side.
func QuantileRanks(n int, q, level float64) (l, u int) {
	if n <= 0 {
		return 0, 1
	}
	a := (1 - level) / 2
	b := distuv.Binomial{N: float64(n), P: min(max(q, 0), 1)}
	cdf := func(k int) float64 { // P(B ≤ k), exact at the ends
		switch {
		case k < 0:
			return 0
		case k >= n:
			return 1
		case q <= 0:
			return 1
		case q >= 1:
			return 0
		}
		return b.CDF(float64(k))
	}
	// Largest l in [0, n] with P(B ≤ l−1) ≤ a: sort.Search finds the first
	// l whose CDF exceeds a.
	l = sort.Search(n+1, func(l int) bool { return cdf(l-1) > a }) - 1
	// Smallest u in [1, n+1] with P(B ≤ u−1) ≥ 1−a.
	u = 1 + sort.Search(n+1, func(i int) bool { return cdf(i) >= 1-a })
	return max(l, 0), min(u, n+1)
}

// QuantileCI is the distribution-free confidence interval of the
// q-quantile of sorted at level (0.99 for 99%): the order statistics of
// QuantileRanks, clamped to the smallest and largest sample where the
// sample is too small to bound a side (as a figure's printed interval).
func QuantileCI(sorted []float64, q, level float64) (lo, hi float64) {
	n := len(sorted)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	l, u := QuantileRanks(n, q, level)
	return sorted[min(max(l, 1), n)-1], sorted[min(max(u, 1), n)-1]
}

// QuantileBounds is QuantileCI without the clamping: −Inf or +Inf where
// the sample cannot bound that side at level, as a test must read it.
func QuantileBounds(sorted []float64, q, level float64) (lo, hi float64) {
	n := len(sorted)
	if n == 0 {
		return math.Inf(-1), math.Inf(1)
	}
	l, u := QuantileRanks(n, q, level)
	lo, hi = math.Inf(-1), math.Inf(1)
	if l >= 1 {
		lo = sorted[l-1]
	}
	if u <= n {
		hi = sorted[u-1]
	}
	return lo, hi
}

// LevelOfZ is the two-sided confidence level of the normal quantile z
// (2.576 gives 0.99).
func LevelOfZ(z float64) float64 { return 1 - 2*normalSurvival(z) }

// normalSurvival is 1−Φ(z), from erfc: gonum's UnitNormal.Survival is
// 1−Φ and reaches 0 near z = 8, where a p-value still has digits.
func normalSurvival(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// ZOfLevel is the normal quantile of the two-sided level (0.99 gives
// 2.576).
func ZOfLevel(level float64) float64 { return distuv.UnitNormal.Quantile(1 - (1-level)/2) }

// QuantileTest is the p-value of the hypothesis that samples a and b
// (sorted) have the same q-quantile, read from their distribution-free
// intervals: the intervals at normal quantiles z·√(m/(n+m)) for a (n
// samples) and z·√(n/(n+m)) for b (m samples) are disjoint exactly when
// the difference exceeds z standard errors of the difference (the
// spread of a quantile estimate goes as 1/√n under the hypothesis); p
// is 2(1−Φ(z)) at the largest such z. Equal sizes give z/√2 each, the
// overlap rule of analysis/crossval. Unlike a normal approximation of the
// quantile, it holds where the quantile sits between two modes.
func QuantileTest(a, b []float64, q float64) float64 {
	n, m := float64(len(a)), float64(len(b))
	if n == 0 || m == 0 {
		return math.NaN()
	}
	wa, wb := math.Sqrt(m/(n+m)), math.Sqrt(n/(n+m))
	disjoint := func(z float64) bool {
		la, ha := QuantileBounds(a, q, LevelOfZ(z*wa))
		lb, hb := QuantileBounds(b, q, LevelOfZ(z*wb))
		return ha < lb || hb < la
	}
	if !disjoint(0) {
		return 1
	}
	lo, hi := 0.0, 12.0
	if disjoint(hi) {
		return 2 * normalSurvival(hi)
	}
	for range 30 { // 12/2³⁰: far finer than the ranks' steps
		mid := (lo + hi) / 2
		if disjoint(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return 2 * normalSurvival(lo)
}
