package trend

import (
	"fmt"
	"math"
	"slices"

	"tokenbed/internal/stats"
)

// prepared is one night ready for a test: its sorted samples, or its
// count, and its own value of the figure.
type prepared struct {
	sorted   []float64
	events   int
	exposure float64
	value    float64
}

// tester is one kind's test of nights against a pooled baseline.
type tester struct {
	name  string
	value func(p prepared) float64
	// pvalue tests night n against the pooled baseline b.
	pvalue func(n, b prepared) float64
	// effect is the relative size of the change from b to n (nil:
	// the relative change of value).
	effect func(n, b prepared) float64
}

func testerFor(s Series) (tester, error) {
	switch s.Kind {
	case Quantile:
		if !(s.Q > 0 && s.Q < 1) {
			return tester{}, fmt.Errorf("quantile figure with q %v: want 0 < q < 1", s.Q)
		}
		q := s.Q
		return tester{
			name:   "quantile intervals",
			value:  func(p prepared) float64 { return stats.Quantile(p.sorted, q) },
			pvalue: func(n, b prepared) float64 { return stats.QuantileTest(n.sorted, b.sorted, q) },
		}, nil
	case Distribution:
		return tester{
			name:  "Kolmogorov–Smirnov",
			value: func(p prepared) float64 { return stats.Quantile(p.sorted, 0.5) },
			pvalue: func(n, b prepared) float64 {
				_, p := stats.KSTest(n.sorted, b.sorted)
				return p
			},
			effect: shiftEffect,
		}, nil
	case Count:
		return tester{
			name:   "conditional binomial",
			value:  func(p prepared) float64 { return float64(p.events) / p.exposure },
			pvalue: func(n, b prepared) float64 { return stats.CountTest(n.events, b.events, n.exposure, b.exposure) },
		}, nil
	}
	return tester{}, fmt.Errorf("unknown kind %q (known: %s, %s, %s)", s.Kind, Quantile, Distribution, Count)
}

func (t tester) prepare(n Night) prepared {
	p := prepared{sorted: stats.Sorted(n.Samples), events: n.Events, exposure: n.Exposure}
	if p.exposure <= 0 {
		p.exposure = 1
	}
	p.value = t.value(p)
	return p
}

// pool merges baseline nights into one.
func (t tester) pool(base []prepared) prepared {
	var b prepared
	for _, n := range base {
		b.sorted = append(b.sorted, n.sorted...)
		b.events += n.events
		b.exposure += n.exposure
	}
	slices.Sort(b.sorted)
	b.value = t.value(b)
	return b
}

// candidate tests the change at after[0], against base. The nights from
// it on, pooled, must differ from the pooled baseline, and so must the
// first of them alone and the latest alone (an intersection–union test:
// its p-value is the largest of the three), all in one direction; and
// every one of those
// nights must lie beyond every baseline night's own value, which places
// the change at its first night and keeps a single wild night, or
// nights that scatter more than their samples' noise, from reading as a
// change. A single low night after a change does not hide it, as
// testing every night alone would.
func (t tester) candidate(j int, base, after []prepared) candidate {
	b := t.pool(base)
	c := candidate{j: j, from: j - len(base), baseline: b.value, p: 1}
	latest := after[len(after)-1]
	c.dir = sign(latest.value - b.value)
	c.effect = relative(b.value, latest.value)
	if t.effect != nil {
		c.effect = t.effect(latest, b)
	}
	if c.dir == 0 {
		return c
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, n := range base {
		lo, hi = min(lo, n.value), max(hi, n.value)
	}
	for _, n := range after {
		if !((c.dir > 0 && n.value > hi) || (c.dir < 0 && n.value < lo)) {
			return c
		}
	}
	a := t.pool(after)
	if sign(a.value-b.value) != c.dir {
		return c
	}
	first := after[0]
	if sign(first.value-b.value) != c.dir {
		return c
	}
	pa, pf, pl := t.pvalue(a, b), t.pvalue(first, b), t.pvalue(latest, b)
	if math.IsNaN(pa) || math.IsNaN(pf) || math.IsNaN(pl) {
		return c
	}
	c.p = max(pa, pf, pl)
	if t.effect != nil && c.effect != 0 {
		// Reported the way the effect moved: a distribution whose median
		// rose while its tail shrank improved on the whole.
		c.dir = sign(c.effect)
	}
	return c
}

// shiftLevels is how many quantile levels shiftEffect compares.
const shiftLevels = 1000

// shiftTrim is the mass left out at each end by shiftEffect: the body of
// the distribution, its 5th to 95th percentile. The tail has its own
// series (the p99 Quantile figure), and within a distribution's effect a
// handful of passes across an outage outweigh everything else: on two
// quiet nights the real B>A latency of sim-vs-real (668 and 689 passes)
// moved its body by −1.5%, which Kolmogorov–Smirnov finds (p 1.8e-9),
// while two passes of seconds more across an outage made the untrimmed
// effect +41%, a regression that no pass but those two showed.
const shiftTrim = 0.05

// shiftEffect is a distribution's change from b to n as the mean
// distance between their quantile functions over the body (levels
// shiftTrim to 1−shiftTrim: a trimmed Wasserstein-1 distance, over
// shiftLevels levels) relative to b's mean over the same levels, signed
// as those means move. A whole distribution shifted by x moves by
// x/mean; one whose median only flips between two modes (a return time
// of two or three visits) moves by the small mass that changed mode,
// where the medians alone would read a jump of a whole mode; an outlier
// in the tail does not move it (the distribution's test is
// Kolmogorov–Smirnov, whose statistic sits in the body too).
func shiftEffect(n, b prepared) float64 {
	if len(n.sorted) == 0 || len(b.sorted) == 0 {
		return 0
	}
	var dist, mn, mb float64
	for i := range shiftLevels {
		u := shiftTrim + (1-2*shiftTrim)*(float64(i)+0.5)/shiftLevels
		qn, qb := stats.Quantile(n.sorted, u), stats.Quantile(b.sorted, u)
		dist += math.Abs(qn - qb)
		mn += qn
		mb += qb
	}
	if mb == 0 {
		return relative(0, dist)
	}
	return float64(sign(mn-mb)) * dist / math.Abs(mb)
}

// relative is the relative change from base to v: ±Inf from a zero base
// (a count that had no events), 0 when both are 0.
func relative(base, v float64) float64 {
	if base == 0 {
		if v == 0 {
			return 0
		}
		return math.Inf(sign(v))
	}
	return (v - base) / math.Abs(base)
}

func sign(x float64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
