package wandering

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// Seed 004's figures of the stabilization after a token loss: Fig. 1
// (operations running per time unit during one transient, N = 300) and
// §6's shares measured during the transients against stable operation.

// opSteps is the number of operations running over time.
func (r *Run) opSteps() []Step {
	from, to := make([]float64, len(r.Ops)), make([]float64, len(r.Ops))
	for i, o := range r.Ops {
		from[i], to[i] = o.Start, o.End
	}
	return steps(from, to, r.SpanS)
}

// durationsIn is durations restricted to the windows ws (sorted, not
// overlapping): the time the step function s had each value inside them.
func durationsIn(s []Step, end float64, ws []Transient) []float64 {
	var d []float64
	j := 0
	for i, st := range s {
		next := end
		if i+1 < len(s) {
			next = s[i+1].T
		}
		for j < len(ws) && ws[j].End <= st.T {
			j++
		}
		for w := j; w < len(ws) && ws[w].At < next; w++ {
			if o := min(next, ws[w].End) - max(st.T, ws[w].At); o > 0 {
				for len(d) <= st.V {
					d = append(d, 0)
				}
				d[st.V] += o
			}
		}
	}
	return d
}

// intervalsIn returns the intervals between successive operations of an
// agent whose second operation starts inside one of ws (all of them when
// ws is nil).
func (r *Run) intervalsIn(ws []Transient) []float64 {
	last := map[string]float64{}
	var out []float64
	for _, o := range r.Ops {
		if t, ok := last[o.Agent]; ok && (ws == nil || inWindows(o.Start, ws)) {
			out = append(out, o.Start-t)
		}
		last[o.Agent] = o.Start
	}
	return out
}

func inWindows(t float64, ws []Transient) bool {
	i, _ := slices.BinarySearchFunc(ws, t, func(w Transient, t float64) int {
		switch {
		case w.End <= t:
			return -1
		case w.At > t:
			return 1
		}
		return 0
	})
	return i < len(ws) && ws[i].At <= t && t < ws[i].End
}

// shareAbove is the share of d's total time with more than k.
func shareAbove(d []float64, k int) float64 {
	tot, above := 0.0, 0.0
	for v, x := range d {
		tot += x
		if v > k {
			above += x
		}
	}
	if tot == 0 {
		return math.NaN()
	}
	return above / tot
}

// fig1Row is what Fig. 1 shows of one transient, read off as numbers.
type fig1Row struct {
	duration            float64 // loss to stable again (NaN: unsettled)
	idle, two           float64 // shares of the transient with 0 and ≥ 2 operations
	maxOps, maxTokens   int
	generated, noTokenS float64
}

// fig1 reads the first transient of r.
func fig1(r *Run) (fig1Row, Transient, bool) {
	ts := r.Transients(600)
	if len(ts) == 0 {
		return fig1Row{}, Transient{}, false
	}
	t := ts[0]
	row := fig1Row{duration: math.NaN()}
	if t.Settled {
		row.duration = t.End - t.At
	}
	w := []Transient{t}
	d := durationsIn(r.opSteps(), r.SpanS, w)
	row.maxOps = len(d) - 1
	if len(d) > 0 {
		row.idle = 1 - shareAbove(d, 0)
		row.two = shareAbove(d, 1)
	}
	tc := durationsIn(r.TokenCount(), r.SpanS, w)
	row.maxTokens = len(tc) - 1
	if len(tc) > 0 {
		row.noTokenS = tc[0]
	}
	for _, l := range r.Tokens {
		if l.From > t.At && l.From < t.End {
			row.generated++
		}
	}
	return row, t, true
}

// fig1Section is 004 Fig. 1: the operations running during the
// stabilization after a loss at N = 300, plotted, and its numbers beside
// §5.1's description ("approx 20000 time units" to go back to normal).
func (rp *report) fig1Section() {
	runs := []struct{ name, label string }{{"f1-3way-fixed-n300", "Δgen fixed (K1 = 1)"}, {"f1-3way-adaptive-n300", "adaptive Δgen (K1 1.5, K2 0.05)"}}
	if rp.runs[runs[0].name] == nil && rp.runs[runs[1].name] == nil {
		return
	}
	w := rp.w
	w("## 004 Fig. 1: operations running during the stabilization after a loss, N = 300\n\n")
	w("004 §5.1: with N near Δmax/Δop the system \"shows instability when the token is lost ... It may take a long time before the system goes back to its normal behavior (approx 20000 time units)\"; the adaptive Δgen rule is introduced after the figure to cope with it, so Fig. 1 is read as the algorithm without it (Δgen fixed at Δmax). The adaptive run, same seed, is the other reading. 3-way exchange (004 §4), clock drift in ±10^-4 (§5.2), one loss (the holder crashes) after 10^4 stable time units; k_load = 2. Tolerance for the duration: a factor of 2 around 20000 (the text's \"approx\").\n\n")
	w("| run | duration of the transient | idle | ≥ 2 operations | most operations at once | most tokens | tokens made in it | time without a token |\n|---|---|---|---|---|---|---|---|\n")
	w("| paper (§5.1) | approx 20000 | | | | | | |\n")
	p := plot.New()
	p.Title.Text = "004 Fig. 1: operations running after a token loss (sim, N = 300)"
	p.X.Label.Text = "time units since the loss"
	p.Y.Label.Text = "operations running (mean over 250 time units)"
	for i, x := range runs {
		r := rp.runs[x.name]
		if r == nil {
			continue
		}
		row, t, ok := fig1(r)
		if !ok {
			w("| %s | no loss injected | | | | | | |\n", x.label)
			continue
		}
		dur := fmt.Sprintf("unsettled after %.0f", t.End-t.At)
		if !math.IsNaN(row.duration) {
			dur = fmt.Sprintf("%.0f", row.duration)
		}
		if i == 0 {
			dur += mark(!math.IsNaN(row.duration) && row.duration >= 10000 && row.duration <= 40000)
		}
		w("| %s | %s | %.1f%% | %.1f%% | %d | %d | %.0f | %.0f |\n", x.label, dur, 100*row.idle, 100*row.two, row.maxOps, row.maxTokens, row.generated, row.noTokenS)
		// The figure: the operations running per time unit, averaged
		// over bins of 250 time units (a plot of every time unit over
		// tens of thousands is a solid band), from 2000 before the loss
		// to 5000 after the transient.
		const bin = 250.0
		from, to := t.At-2000, min(r.SpanS, t.End+5000)
		var ws []Transient
		for b := from; b < to; b += bin {
			ws = append(ws, Transient{At: b, End: b + bin})
		}
		var pts plotter.XYs
		steps := r.opSteps()
		for _, b := range ws {
			d := durationsIn(steps, r.SpanS, []Transient{b})
			busy := 0.0
			for v, x := range d {
				busy += float64(v) * x
			}
			pts = append(pts, plotter.XY{X: b.At + bin/2 - t.At, Y: busy / bin})
		}
		if l, err := plotter.NewLine(pts); err == nil && len(pts) > 1 {
			l.Color = plotutil.Color(i)
			p.Add(l)
			p.Legend.Add(x.label, l)
		}
	}
	w("\n")
	p.Legend.Top = true
	rp.save(p, "fig1_004_stabilization.png")
}

func mark(ok bool) string {
	if ok {
		return " ✓"
	}
	return " ✗"
}

// sec6Figures measures §6's figures of one pair of runs: the transients
// of t5 (Table 5's runs) against the stable operation of t3.
type sec6Figures struct {
	twoStab, twoStable   float64 // share of time with ≥ 2 operations
	fiveStab, fiveStable float64 // share of time with > 5 operations
	longStab, longStable float64 // share of intervals > 3000 = 5·Δmin
	nStab, nStable       int     // intervals counted
}

func measure6(t5, t3 *Run) sec6Figures {
	f := sec6Figures{twoStab: math.NaN(), twoStable: math.NaN(), fiveStab: math.NaN(), fiveStable: math.NaN(), longStab: math.NaN(), longStable: math.NaN()}
	if t5 != nil {
		var ws []Transient
		for _, t := range t5.Transients(600) {
			if t.End > t.At {
				ws = append(ws, t)
			}
		}
		d := durationsIn(t5.opSteps(), t5.SpanS, ws)
		f.twoStab, f.fiveStab = shareAbove(d, 1), shareAbove(d, 5)
		ia := t5.intervalsIn(ws)
		f.nStab = len(ia)
		f.longStab = 1 - frac(ia, 3000.000001)
	}
	if t3 != nil {
		d := t3.Concurrency()
		f.twoStable, f.fiveStable = shareAbove(d, 1), shareAbove(d, 5)
		ia := t3.intervalsIn(nil)
		f.nStable = len(ia)
		f.longStable = 1 - frac(ia, 3000.000001)
	}
	return f
}
