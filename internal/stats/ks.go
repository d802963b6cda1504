package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// KS is the two-sample Kolmogorov–Smirnov statistic D = sup |F_a − F_b|
// of sorted samples a and b (gonum's stat.KolmogorovSmirnov).
func KS(a, b []float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	return stat.KolmogorovSmirnov(a, nil, b, nil)
}

// KSShifted is KS of a against b shifted by shift (b+shift).
func KSShifted(a, b []float64, shift float64) float64 {
	if shift == 0 {
		return KS(a, b)
	}
	s := make([]float64, len(b))
	for i, v := range b {
		s[i] = v + shift
	}
	return KS(a, s)
}

// KSMinShift is the smallest KS statistic over shifts of b in
// [−maxShift, +maxShift], tried on a grid of step (and at 0), and the
// shift that gives it. A shift chosen after the fact makes the test's
// p-value optimistic: the statistic measures shape, not location.
func KSMinShift(a, b []float64, maxShift, step float64) (d, shift float64) {
	d = KS(a, b)
	if step <= 0 || maxShift <= 0 {
		return d, 0
	}
	steps := int(math.Round(maxShift / step))
	for k := -steps; k <= steps; k++ {
		s := float64(k) * step
		if x := KSShifted(a, b, s); x < d {
			d, shift = x, s
		}
	}
	return d, shift
}

// ecdf is the empirical CDF of sorted at v: the fraction of samples ≤ v.
func ecdf(sorted []float64, v float64) float64 {
	i, _ := slices.BinarySearchFunc(sorted, v, func(e, t float64) int {
		if e <= t {
			return -1
		}
		return 1
	})
	return float64(i) / float64(len(sorted))
}

// KSBand is the Kolmogorov–Smirnov statistic with a tolerance band of
// ±delta on the value axis: the smallest ε with
//
//	F_a(x−delta) − ε ≤ F_b(x) ≤ F_a(x+delta) + ε  for all x,
//
// that is, how much probability mass must move farther than delta (the
// Lévy-metric construction; gonum has no equivalent). Delta 0 gives
// KS(a, b); a global shift of b by s with |s| ≤ delta costs nothing, so
// KSBand ≤ KSMinShift's minimum over shifts within ±delta, and
// differences of shape narrower than delta are forgiven too.
func KSBand(a, b []float64, delta float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	d := 0.0
	// sup F_a(x−δ) − F_b(x): at the jumps of F_a(·−δ), x = a_i+δ.
	for _, v := range a {
		d = max(d, ecdf(a, v)-ecdf(b, v+delta))
	}
	// sup F_b(x) − F_a(x+δ): at the jumps of F_b, x = b_j.
	for _, v := range b {
		d = max(d, ecdf(b, v)-ecdf(a, v+delta))
	}
	return d
}

// KSPValue is the asymptotic p-value of the two-sample statistic d for
// samples of n and m: the Kolmogorov distribution's P(K > λ) at
// λ = (√nₑ + 0.12 + 0.11/√nₑ)·d, nₑ = nm/(n+m) (Stephens' correction for
// small samples). gonum has no Kolmogorov distribution. With ties
// (discrete values) the test is conservative.
func KSPValue(d float64, n, m int) float64 {
	if n == 0 || m == 0 || math.IsNaN(d) {
		return math.NaN()
	}
	ne := float64(n) * float64(m) / float64(n+m)
	return kolmogorovQ((math.Sqrt(ne) + 0.12 + 0.11/math.Sqrt(ne)) * d)
}

// kolmogorovQ is P(K > λ) of the Kolmogorov distribution:
// 2 Σ (−1)^(k−1) exp(−2k²λ²).
func kolmogorovQ(l float64) float64 {
	if l < 0.2 {
		return 1
	}
	s, sign := 0.0, 1.0
	for k := 1; k <= 100; k++ {
		term := sign * math.Exp(-2*float64(k*k)*l*l)
		s += term
		if math.Abs(term) < 1e-12 {
			break
		}
		sign = -sign
	}
	return min(1, max(0, 2*s))
}

// KSTest is KS of sorted a and b and its asymptotic p-value.
func KSTest(a, b []float64) (d, p float64) {
	d = KS(a, b)
	return d, KSPValue(d, len(a), len(b))
}

// KSCritical is the D above which the asymptotic two-sample test rejects
// at alpha for samples of n and m: c(α)·√((n+m)/(nm)), c(α) =
// √(−ln(α/2)/2) (1.628 at α = 0.01).
func KSCritical(n, m int, alpha float64) float64 {
	if n == 0 || m == 0 {
		return math.NaN()
	}
	return math.Sqrt(-math.Log(alpha/2)/2) * math.Sqrt(float64(n+m)/(float64(n)*float64(m)))
}
