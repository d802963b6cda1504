package dist

import (
	"errors"
	"math"
)

// Constants of iproute2's netem/maketable.c.
const (
	mtTableSize   = 16384 / 4
	mtDomain      = (math.MaxInt16 / Scale) + 1 // 4: entries cannot exceed 4 sigma
	mtGranularity = 50000
	mtDistSize    = mtDomain * mtGranularity * 2
)

// FromSamples builds a 4096-entry table from measured values (for example
// one-way delays in any unit) the way iproute2's maketable does: normalise
// by the samples' mean and standard deviation, histogram over [-4, 4) sigma
// at 1/50000 granularity, invert the cumulative histogram and fill gaps by
// linear interpolation. The result is a shape only: apply it with the
// measured mean as delay and standard deviation as jitter. It also returns
// the mean, standard deviation and lag-1 autocorrelation, which maketable
// computes (and prints under -DDEBUG) for choosing those parameters.
func FromSamples(x []float64) (table []int16, mu, sigma, rho float64, err error) {
	if len(x) < 2 {
		return nil, 0, 0, 0, errors.New("dist: FromSamples needs at least 2 samples")
	}
	mu, sigma, rho = arrayStats(x)
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return nil, mu, sigma, rho, errors.New("dist: samples have no spread (standard deviation is 0)")
	}
	hist := make([]int, mtDistSize)
	for _, v := range x {
		in := (v - mu) / sigma
		idx := int(math.RoundToEven((in + mtDomain) * mtGranularity))
		if idx < 0 {
			idx = 0
		}
		if idx >= mtDistSize {
			idx = mtDistSize - 1
		}
		hist[idx]++
	}
	total := 0
	for i := range hist {
		total += hist[i]
		hist[i] = total
	}
	inv := make([]int16, mtTableSize)
	for i := range inv {
		inv[i] = math.MinInt16
	}
	for i := 0; i < mtDistSize; i++ {
		findex := float64(i)/mtGranularity - mtDomain
		fvalue := float64(hist[i]) / float64(total)
		ii := int(math.RoundToEven(fvalue * mtTableSize))
		iv := int(math.RoundToEven(findex * Scale))
		if iv <= math.MinInt16 {
			iv = math.MinInt16 + 1
		}
		if iv > math.MaxInt16 {
			iv = math.MaxInt16
		}
		if ii >= mtTableSize {
			ii = mtTableSize - 1
		}
		inv[ii] = int16(iv)
	}
	interpolate(inv)
	return inv, mu, sigma, rho, nil
}

// arrayStats ports maketable.c's arraystats (sample standard deviation,
// lag-1 autocorrelation).
func arrayStats(x []float64) (mu, sigma, rho float64) {
	var sum, sumsq float64
	for _, v := range x {
		sumsq += v * v
		sum += v
	}
	n := float64(len(x))
	mu = sum / n
	sigma = math.Sqrt((sumsq - n*mu*mu) / (n - 1))
	var top, s2 float64
	for i := 1; i < len(x); i++ {
		top += (x[i] - mu) * (x[i-1] - mu)
		s2 += (x[i-1] - mu) * (x[i-1] - mu)
	}
	return mu, sigma, top / s2
}

// interpolate ports maketable.c's interpolatetable, including its C integer
// arithmetic (truncating division, short assignment).
func interpolate(t []int16) {
	last, lasti := math.MinInt16, -1
	limit := len(t)
	for i := 0; i < limit; i++ {
		if t[i] == math.MinInt16 {
			j := i
			for ; j < limit; j++ {
				if t[j] != math.MinInt16 {
					break
				}
			}
			if j < limit {
				t[i] = int16(last + (i-lasti)*(int(t[j])-last)/(j-lasti))
			} else {
				t[i] = int16(last + (i-lasti)*(math.MaxInt16-last)/(limit-lasti))
			}
		} else {
			last = int(t[i])
			lasti = i
		}
	}
}
