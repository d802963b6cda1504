// Package crossval compares two runs of one experiment: the simulator
// (harness/sim) against real processes, which run the same state
// machines, so the figures must agree. It is a pure function of the two runs' samples
// (analysis.ReadSamples), and each figure it compares carries a tolerance
// derived from the samples themselves, stated beside it:
//
//   - pass latency per direction, p50 and p99: each run's quantile has a
//     distribution-free confidence interval (the order statistics whose
//     ranks bound the q-quantile under Binomial(n, q): internal/stats);
//     at the level of z/√2 each, the two overlap unless the quantiles differ at the
//     99% level. Options.Allowance widens the gap allowed: a stated
//     budget for what the model leaves out (zero unless the caller
//     names one);
//   - the return-time distribution of each agent, in paper time: the
//     two-sample Kolmogorov–Smirnov statistic D and its asymptotic
//     p-value; the runs agree unless p < Options.Alpha. With an
//     allowance, D is the least over shifts of b by up to the allowance
//     per visit (the least of 41 statistics: the p-value is then a little
//     optimistic);
//   - tolerated pass failures by cause (ack timeout, commit timeout): the
//     exact two-sided binomial test of the split of their sum between the
//     runs (equal rates: each failure is in either run with probability
//     1/2); they agree unless p < Options.Alpha;
//   - acquisitions: the count of a renewal process of n visits varies
//     with standard deviation √n·cv (cv: the coefficient of variation of
//     the time between acquisitions, measured in each run), plus one per
//     replica for the visit cut by the end of the run.
//
// The samples of two runs with one seed are not independent (the agents'
// random walks and the links' loss draws are the same sequences): the
// tests above assume independence, so a difference they flag is real, and
// one they pass may still be smaller than the coupling would reveal.
package crossval

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"tokenbed/analysis"
	"tokenbed/internal/stats"
)

// Options are the comparison's confidence levels.
type Options struct {
	// Z is the normal quantile of the quantile intervals and the count
	// bound (default 2.576: 99%, two-sided).
	Z float64
	// Alpha is the level of the KS and binomial tests (default 0.01).
	Alpha float64
	// Allowance is added to every latency quantile's tolerance, in
	// seconds, and AllowanceWhy says what it budgets for (printed).
	Allowance    float64
	AllowanceWhy string
}

func (o Options) withDefaults() Options {
	if o.Z == 0 {
		o.Z = 2.576
	}
	if o.Alpha == 0 {
		o.Alpha = 0.01
	}
	return o
}

// Row is one compared figure.
type Row struct {
	Figure    string
	A, B      string // each run's value
	Diff      string // B − A, or the test statistic
	Tolerance string // what the difference must stay within, and why
	Pass      bool
}

// Table is the comparison of run A with run B.
type Table struct {
	A, B    string // the runs' names (run id and backend)
	Options Options
	Rows    []Row
	Notes   []string
}

// Pass reports whether every row is within tolerance.
func (t Table) Pass() bool {
	for _, r := range t.Rows {
		if !r.Pass {
			return false
		}
	}
	return len(t.Rows) > 0
}

// Failed lists the figures outside tolerance.
func (t Table) Failed() []string {
	var f []string
	for _, r := range t.Rows {
		if !r.Pass {
			f = append(f, r.Figure)
		}
	}
	return f
}

// Compare compares run b with run a (b − a).
func Compare(a, b *analysis.Samples, o Options) Table {
	o = o.withDefaults()
	t := Table{A: name(a), B: name(b), Options: o}
	if a.Info.Experiment != b.Info.Experiment || a.Info.Seed != b.Info.Seed {
		t.Notes = append(t.Notes, fmt.Sprintf("the runs are of different experiments or seeds (%s seed %d, %s seed %d)",
			a.Info.Experiment, a.Info.Seed, b.Info.Experiment, b.Info.Seed))
	}
	if a.Info.TimeScale != b.Info.TimeScale || a.Info.Replicas != b.Info.Replicas {
		t.Notes = append(t.Notes, fmt.Sprintf("the runs have different shapes (time scale %g and %g, replicas %d and %d)",
			a.Info.TimeScale, b.Info.TimeScale, a.Info.Replicas, b.Info.Replicas))
	}
	for _, d := range union(a.Latency, b.Latency) {
		for _, q := range []float64{0.5, 0.99} {
			t.Rows = append(t.Rows, quantileRow(d, q, a.Latency[d], b.Latency[d], o))
		}
	}
	visit := 0.0
	if len(a.Intervals) > 0 {
		visit = mean(a.Intervals)
	}
	for _, ag := range union(a.Return, b.Return) {
		t.Rows = append(t.Rows, ksRow(ag, a.Return[ag], b.Return[ag], visit, o))
	}
	ca, cb := causes(a), causes(b)
	for _, c := range []string{"ack_timeout", "commit_timeout"} {
		t.Rows = append(t.Rows, binomialRow("pass failures, "+strings.ReplaceAll(c, "_", " "), ca[c], cb[c], o))
	}
	t.Rows = append(t.Rows, countRow(a, b, o))
	return t
}

func name(s *analysis.Samples) string {
	return fmt.Sprintf("%s (%s)", s.Info.RunID, s.Info.Backend)
}

func union(a, b map[string][]float64) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func causes(s *analysis.Samples) map[string]int {
	m := map[string]int{}
	for _, f := range s.Failures {
		m[f.DetectedBy]++
	}
	return m
}

func ms(s float64) string { return fmt.Sprintf("%.2f ms", s*1000) }

// quantileRow compares the q-quantiles of a and b: each has its
// distribution-free interval at z/√2, and the two agree when the
// intervals overlap (within the allowance). For two estimates of equal
// spread, overlap at z/√2 is the test of their difference at z; unlike a
// normal approximation it holds where the quantile sits between two
// modes (a p99 at the edge of the retransmission tail).
func quantileRow(dir string, q float64, a, b []float64, o Options) Row {
	r := Row{Figure: fmt.Sprintf("%s latency p%g", dir, q*100)}
	if len(a) < 2 || len(b) < 2 {
		r.A, r.B = fmt.Sprintf("%d passes", len(a)), fmt.Sprintf("%d passes", len(b))
		r.Tolerance = "at least 2 passes in each run"
		return r
	}
	a, b = stats.Sorted(a), stats.Sorted(b)
	qa, qb := stats.Quantile(a, q), stats.Quantile(b, q)
	level := stats.LevelOfZ(o.Z / math.Sqrt2)
	la, ha := stats.QuantileCI(a, q, level)
	lb, hb := stats.QuantileCI(b, q, level)
	gap := max(0, lb-ha, la-hb)
	r.A = fmt.Sprintf("%s [%.2f, %.2f] (%d)", ms(qa), la*1000, ha*1000, len(a))
	r.B = fmt.Sprintf("%s [%.2f, %.2f] (%d)", ms(qb), lb*1000, hb*1000, len(b))
	r.Diff = fmt.Sprintf("%+.2f ms (gap %.2f ms)", (qb-qa)*1000, gap*1000)
	r.Tolerance = "intervals overlap (99% test of the difference)"
	if o.Allowance > 0 {
		r.Tolerance = fmt.Sprintf("gap ≤ allowance %s", ms(o.Allowance))
	}
	r.Pass = gap <= o.Allowance
	return r
}

// ksRow compares the return times of agent. With an allowance, b may be
// shifted by up to Allowance per visit (one pass per visit: a relative
// shift of Allowance over the mean visit of a): D is the least over
// such shifts. A return time is a whole number of visits, so its
// distribution is a comb of narrow teeth at k × (hold + pass), and a
// constant cost per pass moves every tooth: without the allowance, KS
// sees a millisecond per visit.
func ksRow(agent string, a, b []float64, visit float64, o Options) Row {
	r := Row{Figure: "return time of " + agent + " (paper), KS"}
	if len(a) < 2 || len(b) < 2 {
		r.A, r.B = fmt.Sprintf("%d returns", len(a)), fmt.Sprintf("%d returns", len(b))
		r.Tolerance = "at least 2 return times in each run"
		return r
	}
	a, b = stats.Sorted(a), stats.Sorted(b)
	d0, p0 := stats.KSTest(a, b)
	d, p := d0, p0
	r.Diff = fmt.Sprintf("D = %.4f, p = %.3g", d0, p0)
	if o.Allowance > 0 && visit > 0 {
		eps := o.Allowance / visit
		const steps = 40
		for i := 0; i <= steps; i++ {
			f := 1 - eps + 2*eps*float64(i)/steps
			bs := make([]float64, len(b))
			for j, x := range b {
				bs[j] = x * f
			}
			if di, pi := stats.KSTest(a, bs); di < d {
				d, p = di, pi
			}
		}
		r.Diff += fmt.Sprintf("; shifted ≤ %s per visit: D = %.4f, p = %.3g", ms(o.Allowance), d, p)
	}
	r.A = fmt.Sprintf("mean %.2f s, p99 %.2f s (%d)", mean(a), stats.Quantile(a, 0.99), len(a))
	r.B = fmt.Sprintf("mean %.2f s, p99 %.2f s (%d)", mean(b), stats.Quantile(b, 0.99), len(b))
	r.Tolerance = fmt.Sprintf("p ≥ %g (D ≤ %.4f)", o.Alpha, stats.KSCritical(len(a), len(b), o.Alpha))
	r.Pass = p >= o.Alpha
	return r
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func binomialRow(figure string, ka, kb int, o Options) Row {
	p := stats.BinomialTwoSided(ka, ka+kb, 0.5)
	return Row{Figure: figure, A: fmt.Sprint(ka), B: fmt.Sprint(kb), Diff: fmt.Sprintf("%+d (p = %.3g)", kb-ka, p),
		Tolerance: fmt.Sprintf("p ≥ %g (binomial, n = %d)", o.Alpha, ka+kb), Pass: p >= o.Alpha}
}

// countRow compares the acquisitions: each run's count varies as √n·cv.
func countRow(a, b *analysis.Samples, o Options) Row {
	sd := func(s *analysis.Samples) float64 {
		if len(s.Intervals) < 2 {
			return math.Sqrt(float64(s.Acquisitions)) // Poisson, without intervals to measure
		}
		m := mean(s.Intervals)
		v := 0.0
		for _, x := range s.Intervals {
			v += (x - m) * (x - m)
		}
		cv := math.Sqrt(v/float64(len(s.Intervals)-1)) / m
		return math.Sqrt(float64(s.Acquisitions)) * cv
	}
	stat := o.Z * math.Hypot(sd(a), sd(b))
	edge := float64(max(a.Info.Replicas, b.Info.Replicas, 1))
	tol := stat + edge
	diff := b.Acquisitions - a.Acquisitions
	return Row{Figure: "acquisitions", A: fmt.Sprint(a.Acquisitions), B: fmt.Sprint(b.Acquisitions), Diff: fmt.Sprintf("%+d", diff),
		Tolerance: fmt.Sprintf("±%.1f (z·√n·cv %.1f + %g replica ends)", tol, stat, edge), Pass: math.Abs(float64(diff)) <= tol}
}

// Markdown renders the table, its tolerances and its verdict.
func (t Table) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| figure | %s | %s | difference | tolerance | verdict |\n|---|---|---|---|---|---|\n", t.A, t.B)
	for _, r := range t.Rows {
		v := "PASS"
		if !r.Pass {
			v = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Figure, r.A, r.B, r.Diff, r.Tolerance, v)
	}
	if t.Options.Allowance > 0 {
		fmt.Fprintf(&b, "\nLatency allowance %s: %s.\n", ms(t.Options.Allowance), t.Options.AllowanceWhy)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(&b, "\nNote: %s.\n", n)
	}
	if t.Pass() {
		b.WriteString("\nAll figures within tolerance.\n")
	} else {
		fmt.Fprintf(&b, "\nOutside tolerance: %s.\n", strings.Join(t.Failed(), "; "))
	}
	return b.String()
}
