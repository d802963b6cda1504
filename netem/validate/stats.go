package validate

import "math"

// Z99 is the two-sided 99% standard normal quantile.
const Z99 = 2.5758293035489

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
