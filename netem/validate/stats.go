package validate

import (
	"math"
	"slices"
)

// Z99 is the two-sided 99% standard normal quantile.
const Z99 = 2.5758293035489

// KSCoef01 is c(α) of the two-sample Kolmogorov–Smirnov test at α = 0.01:
// sqrt(-ln(α/2)/2).
var KSCoef01 = math.Sqrt(-math.Log(0.01/2) / 2)

// Percentile is the nearest-rank p-quantile (0 < p ≤ 1) of sorted
// samples: the ⌈p·n⌉-th smallest value.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p*float64(n))) - 1
	return sorted[min(max(k, 0), n-1)]
}

// PercentileCI is the distribution-free (order-statistic) confidence
// interval of the p-quantile from sorted samples at the two-sided level
// given by z (Z99 for 99%): the order statistics of ranks
// n·p ∓ z·sqrt(n·p·(1-p)), the normal approximation of the binomial
// number of samples below the true quantile.
func PercentileCI(sorted []float64, p, z float64) (lo, hi float64) {
	n := len(sorted)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	np := float64(n) * p
	h := z * math.Sqrt(np*(1-p))
	l := int(math.Floor(np-h)) - 1 // 0-based
	u := int(math.Ceil(np + h))    // 0-based rank of the (⌈np+h⌉+1)-th value
	return sorted[min(max(l, 0), n-1)], sorted[min(max(u, 0), n-1)]
}

// KS is the two-sample Kolmogorov–Smirnov statistic D = sup |F_a − F_b| of
// two sorted samples, with b shifted by shift (b+shift).
func KS(a, b []float64, shift float64) float64 {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return math.NaN()
	}
	i, j := 0, 0
	d := 0.0
	for i < n && j < m {
		x := min(a[i], b[j]+shift)
		for i < n && a[i] <= x {
			i++
		}
		for j < m && b[j]+shift <= x {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(n)-float64(j)/float64(m)))
	}
	return d
}

// KSShift is the smallest KS statistic over shifts of b in
// [-maxShift, +maxShift], tried on a grid of step (and at 0), and the shift
// that gives it.
func KSShift(a, b []float64, maxShift, step float64) (d, shift float64) {
	d = KS(a, b, 0)
	if step <= 0 || maxShift <= 0 {
		return d, 0
	}
	steps := int(math.Round(maxShift / step))
	for k := -steps; k <= steps; k++ {
		s := float64(k) * step
		if x := KS(a, b, s); x < d {
			d, shift = x, s
		}
	}
	return d, shift
}

// KSCritical is the two-sample KS critical value at α = 0.01 for samples
// of n and m: c(α)·sqrt((n+m)/(n·m)).
func KSCritical(n, m int) float64 {
	if n == 0 || m == 0 {
		return math.NaN()
	}
	return KSCoef01 * math.Sqrt(float64(n+m)/float64(n*m))
}

// Rate is an estimated proportion with its standard error.
type Rate struct {
	Events, Trials int
	P              float64
	SE             float64
}

// RateOf estimates the rate of the 0/1 indicator sequence x (in send
// order). Its standard error is the larger of the binomial one and the
// batch-means one (20 consecutive batches): correlated and bursty
// processes (correlated loss, the 4-state and Gilbert-Elliott models)
// have a variance far above the binomial, which batch means captures.
func RateOf(x []bool) Rate {
	n := len(x)
	r := Rate{Trials: n}
	if n == 0 {
		return r
	}
	for _, v := range x {
		if v {
			r.Events++
		}
	}
	r.P = float64(r.Events) / float64(n)
	r.SE = math.Sqrt(r.P * (1 - r.P) / float64(n))
	const batches = 20
	if n >= 5*batches {
		size := n / batches
		var means []float64
		for b := 0; b < batches; b++ {
			c := 0
			for _, v := range x[b*size : (b+1)*size] {
				if v {
					c++
				}
			}
			means = append(means, float64(c)/float64(size))
		}
		_, sd := meanSD(means)
		r.SE = max(r.SE, sd/math.Sqrt(batches))
	}
	return r
}

// DiffCI is the half-width of the 99% confidence interval of the
// difference of two independent rates.
func DiffCI(a, b Rate) float64 {
	return Z99 * math.Sqrt(a.SE*a.SE+b.SE*b.SE)
}

// TwoProportionCI is the half-width of the 99% confidence interval of the
// difference of two binomial proportions (k1 of n1, k2 of n2), unpooled.
func TwoProportionCI(k1, n1, k2, n2 int) float64 {
	p1, p2 := float64(k1)/float64(n1), float64(k2)/float64(n2)
	return Z99 * math.Sqrt(p1*(1-p1)/float64(n1)+p2*(1-p2)/float64(n2))
}

// Bursts returns the lengths of the runs of true in x.
func Bursts(x []bool) []float64 {
	var out []float64
	run := 0
	for _, v := range x {
		if v {
			run++
			continue
		}
		if run > 0 {
			out = append(out, float64(run))
		}
		run = 0
	}
	if run > 0 {
		out = append(out, float64(run))
	}
	return out
}

func meanSD(x []float64) (mean, sd float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)-1))
}

// sortedCopy returns x sorted, leaving x alone.
func sortedCopy(x []float64) []float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s
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
// Lévy-metric construction). Delta 0 gives KS(a, b, 0); a global shift of
// b by s with |s| ≤ delta costs nothing, so KSBand ≤ KSShift's minimum
// over shifts within ±delta, and differences of shape narrower than delta
// (two measurement noises of a few tens of µs) are forgiven too.
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
