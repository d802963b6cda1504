package wandering

import (
	"fmt"
	"math"
	"strings"
)

// Seed 004's tables with its own passing protocol (§4's 3-way exchange,
// where a lost Commit loses the token) beside the 4-way runs, §6's
// stabilization figures, and the checks of every 004 figure against its
// stated tolerance (checks004.go).

// kloadNote states 004 §3's k_load at N = 300 and 150, from the
// manifests of the 004 runs (Table 1's baseline has the same Δop, N and
// Δmin).
func (rp *report) kloadNote() string {
	var parts []string
	for _, n := range []int{300, 150} {
		for _, name := range rp.names {
			if r := rp.runs[name]; r.N == n && r.KLoad > 0 {
				parts = append(parts, fmt.Sprintf("%.3g at N = %d", r.KLoad, n))
				break
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "k_load = Δop·N/Δmin (004 §3): " + strings.Join(parts, ", ") + "."
}

// t3Column is one run of a Table 3/4 comparison.
type t3Column struct{ label, run string }

func t3Columns(n int) []t3Column {
	return []t3Column{
		{"4-way, no loss", fmt.Sprintf("t3-w004-n%d", n)},
		{"3-way, loss 10^-4", fmt.Sprintf("t3-3way-p4-n%d", n)},
		{"3-way, loss 10^-5", fmt.Sprintf("t3-3way-p5-n%d", n)},
		{"4-way, loss 10^-4", fmt.Sprintf("t3-4way-p4-n%d", n)},
	}
}

// within004 is within() for a run of span s (paper seconds), its counts
// scaled to 10^6: the counting noise of a rare row grows as the run
// shortens (3√(paper·f) + 10 counts in the run, f = s/10^6).
func within004(paper, ours, span float64) bool {
	f := span / 1e6
	return math.Abs(ours-paper) <= max(0.25*paper, (3*math.Sqrt(paper*f)+10)/f)
}

// noToken counts the stretches without any token after the first token
// appeared (the token lost, by the passing or a crash) and their time.
func noToken(r *Run) (n int, t float64) {
	s := r.TokenCount()
	started := false
	for i, st := range s {
		if st.T >= r.SpanS {
			break // the run's end, not a loss
		}
		if st.V > 0 {
			started = true
			continue
		}
		if started {
			n++
			next := r.SpanS
			if i+1 < len(s) {
				next = s[i+1].T
			}
			t += next - st.T
		}
	}
	return n, t
}

// vanished counts the tokens that ended neither discarded, nor by an
// injected loss, nor alive at the end: on the 3-way exchange, those
// whose Commit was lost (004 §4).
func vanished(r *Run) int {
	n := 0
	for _, l := range r.Tokens {
		if l.How == "vanished" {
			n++
		}
	}
	return n
}

// own004 writes 004 Tables 3 and 4 per N with every column, and Table 5
// and §6 with the 3-way exchange.
func (rp *report) own004() {
	rp.tables34own()
	rp.table5own()
	rp.sec6()
}

// tables34own is 004 Tables 3 and 4 per N: the paper, the 4-way runs and
// the 3-way ones.
func (rp *report) tables34own() {
	any3 := false
	for _, n := range []int{150, 300} {
		for _, c := range t3Columns(n)[1:] {
			any3 = any3 || rp.runs[c.run] != nil
		}
	}
	if !any3 {
		return
	}
	w := rp.w
	w("## 004 Tables 3 and 4 with 004's own protocol\n\n")
	w("004 §4 passes the token with a 3-way exchange (Move, Ack, Commit; both timeouts Δskip = 1): a lost Commit loses the token, which 002's 4-way exchange retransmits. Every direction loses a datagram with the probability given (netem `loss`), 1 ms delay; every agent's clock drifts at a rate drawn in ±10^-4 (§5.2). 004 does not state its loss rate: 10^-4 loses a pass's Commit about every 24,000 time units at N = 300 (about the length of its Table 5 transients), 10^-5 ten times less often. Counts per 10^6 time units; tolerance as Table 3, for the run's length (25%%, or (3√(paper·f) + 10)/f, f = span/10^6).\n\n")
	for _, n := range []int{300, 150} {
		cols := t3Columns(n)
		var runs []*Run
		for _, c := range cols {
			runs = append(runs, rp.runs[c.run])
		}
		w("### N = %d, k_load = %s\n\n", n, kloadOf(runs, n))
		head := "| k operations | paper |"
		sep := "|---|---|"
		for _, c := range cols {
			head += " " + c.label + " |"
			sep += "---|"
		}
		w("%s\n%s\n", head, sep)
		p3, p4 := paperT3N300, paperT4N300
		if n == 150 {
			p3, p4 = paperT3N150, paperT4N150
		}
		for k := 1; k <= len(p3); k++ {
			row := fmt.Sprintf("| %d | %s |", k, num(p3[k-1]))
			for _, r := range runs {
				row += " " + cell(r, func(r *Run) float64 { return per1e6(r, at(r.Concurrency(), k)) }, p3[k-1]) + " |"
			}
			w("%s\n", row)
		}
		for i := range p4 {
			row := fmt.Sprintf("| Table 4 [%d, %d) | %s |", 500*(i+1), 500*(i+2), num(p4[i]))
			for _, r := range runs {
				row += " " + cell(r, func(r *Run) float64 { return interBins(r)[i] }, p4[i]) + " |"
			}
			w("%s\n", row)
		}
		extra := []struct {
			label, paper string
			f            func(*Run) string
		}{
			{"idle (no operation)", pct1(1 - sumT(p3)/1e6), func(r *Run) string { return pct1(at(r.Concurrency(), 0) / r.SpanS) }},
			{"tokens lost by the passing (last seen in a pass, never discarded)", "not stated", func(r *Run) string { return fmt.Sprint(vanished(r)) }},
			{"tokens generated", "", func(r *Run) string { return fmt.Sprint(len(r.Tokens)) }},
			{"time without a token", "", func(r *Run) string { _, t := noToken(r); return pct1(t / r.SpanS) }},
			{"time units simulated", "10^6", func(r *Run) string { return fmt.Sprintf("%.0f", r.SpanS) }},
		}
		for _, e := range extra {
			row := fmt.Sprintf("| %s | %s |", e.label, e.paper)
			for _, r := range runs {
				v := ""
				if r != nil {
					v = e.f(r)
				}
				row += " " + v + " |"
			}
			w("%s\n", row)
		}
		w("\n")
	}
}

func kloadOf(runs []*Run, n int) string {
	for _, r := range runs {
		if r != nil && r.KLoad > 0 {
			return fmt.Sprintf("%.2g", r.KLoad)
		}
	}
	return fmt.Sprintf("%.2g (Δop·N/Δmin)", 4*float64(n)/600)
}

func at(xs []float64, k int) float64 {
	if k < len(xs) {
		return xs[k]
	}
	return 0
}

func per1e6(r *Run, x float64) float64 { return x * 1e6 / r.SpanS }

func sumT(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func pct1(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// cell prints f(r) marked against paper for r's length ("" without r).
func cell(r *Run, f func(*Run) float64, paper float64) string {
	if r == nil {
		return ""
	}
	v := f(r)
	return num(v) + mark(within004(paper, v, r.SpanS))
}

// interBins is Table 4's histogram of r per 10^6 time units (bins of
// 500 from 500, the label read as the lower bound).
func interBins(r *Run) []float64 {
	h := make([]float64, 9)
	for _, x := range r.InterArrivals() {
		i := max(int(x/500)-1, 0)
		if i < len(h) {
			h[i] += 1e6 / r.SpanS
		}
	}
	return h
}

// t5hist is Table 5's histogram of r (bins of 5000 up to the label, the
// first row all below 10000), the durations and the unsettled count.
func t5hist(r *Run) (h, d []float64, unsettled int) {
	d, unsettled = r.Stabilizations(600)
	h = make([]float64, 15)
	for _, x := range d {
		h[min(max(0, int(math.Ceil(x/5000))-2), 14)]++
	}
	return h, d, unsettled
}

// table5own is 004 Table 5 with the 3-way exchange beside the 4-way one
// (§5's removal rule both).
func (rp *report) table5own() {
	cols := []struct{ label, run string }{{"4-way", "t5-w004-n%d"}, {"3-way, loss 10^-5", "t5-3way-p5-n%d"}}
	if rp.runs["t5-3way-p5-n300"] == nil && rp.runs["t5-3way-p5-n150"] == nil {
		return
	}
	w := rp.w
	w("## 004 Table 5 with 004's own protocol\n\n")
	w("As Table 5 above (a loss injected once the system has been stable for 10^4), §5's removal rule, on the 3-way exchange with 10^-5 datagram loss and clock drift in ±10^-4; its own losses of a Commit add to the injected ones. Tolerance for the median: a factor of 2 of the paper's (the bin holding its median).\n\n")
	head, sep := "| duration ≤ |", "|---|"
	var runs []*Run
	var paper [][]float64
	for _, n := range []int{300, 150} {
		head += fmt.Sprintf(" paper N=%d |", n)
		sep += "---|"
		p := paperT5N300
		if n == 150 {
			p = paperT5N150
		}
		paper = append(paper, p)
		runs = append(runs, nil)
		for _, c := range cols {
			head += fmt.Sprintf(" %s N=%d |", c.label, n)
			sep += "---|"
			runs = append(runs, rp.runs[fmt.Sprintf(c.run, n)])
		}
	}
	w("%s\n%s\n", head, sep)
	hs := make([][]float64, len(runs))
	ds := make([][]float64, len(runs))
	us := make([]int, len(runs))
	for i, r := range runs {
		if r != nil {
			hs[i], ds[i], us[i] = t5hist(r)
		}
	}
	for b := range 15 {
		row := fmt.Sprintf("| %d |", 10000+5000*b)
		for i := range runs {
			switch {
			case i%3 == 0:
				row += " " + num(paper[i/3][b]) + " |"
			case hs[i] != nil:
				row += " " + num(hs[i][b]) + " |"
			default:
				row += " |"
			}
		}
		w("%s\n", row)
	}
	row, cnt := "| median |", "| transients measured (unsettled) |"
	for i, r := range runs {
		switch {
		case i%3 == 0:
			pm := binMedian(paper[i/3])
			row += " " + num(pm) + " |"
			cnt += " 100 |"
		case r != nil:
			m := median(ds[i])
			pm := binMedian(paper[i/3])
			row += " " + num(m) + mark(m >= pm/2 && m <= 2*pm) + " |"
			cnt += fmt.Sprintf(" %d (%d) |", len(ds[i]), us[i])
		default:
			row += " |"
			cnt += " |"
		}
	}
	w("%s\n%s\n\n", row, cnt)
}

// sec6 is §6's text on the stabilization transients, beside the paper.
func (rp *report) sec6() {
	w := rp.w
	type pair struct{ label, t5, t3 string }
	pairs := []pair{{"4-way", "t5-w004-n%d", "t3-w004-n%d"}, {"3-way", "t5-3way-p5-n%d", "t3-3way-p5-n%d"}}
	var figs [2][2]sec6Figures // [pair][N=150, 300]
	any := false
	for i, p := range pairs {
		for j, n := range []int{150, 300} {
			t5, t3 := rp.runs[fmt.Sprintf(p.t5, n)], rp.runs[fmt.Sprintf(p.t3, n)]
			any = any || t5 != nil || t3 != nil
			figs[i][j] = measure6(t5, t3)
		}
	}
	if !any {
		return
	}
	w("## 004 §6: operations during the stabilization transients\n\n")
	w("Measured inside the transients of the Table 5 runs (from each loss until stable again) and over the whole Table 3 runs (stable operation; the 3-way column is its 10^-5 run). Tolerances: ±3 points for the shares of time with two or more operations, a factor of 3 for the shares with more than five, ±5 points for the share of intervals above 3000.\n\n")
	w("| figure | paper | 4-way | 3-way |\n|---|---|---|---|\n")
	for _, c := range sec6Checks(figs) {
		w("| %s | %s | %s | %s |\n", c.what, c.paper, c.ours[0], c.ours[1])
	}
	w("\n")
}

// sec6Row is one §6 figure with its value in each pair of runs.
type sec6Row struct {
	id, what, paper string
	ours            [2]string
	ok              [2]bool
	have            [2]bool
}

func sec6Checks(figs [2][2]sec6Figures) []sec6Row {
	abs := func(want, tol float64) func(float64) bool {
		return func(x float64) bool { return math.Abs(x-want) <= tol }
	}
	factor := func(want, f float64) func(float64) bool {
		return func(x float64) bool { return x >= want/f && x <= want*f }
	}
	defs := []struct {
		id, what, paper string
		n               int
		get             func(sec6Figures) float64
		ok              func(float64) bool
		digits          int
	}{
		{"s6-two-stab-n150", "N=150: time with ≥ 2 operations, during stabilization", "3%", 0, func(f sec6Figures) float64 { return f.twoStab }, abs(0.03, 0.03), 1},
		{"s6-two-stab-n300", "N=300: time with ≥ 2 operations, during stabilization", "9%", 1, func(f sec6Figures) float64 { return f.twoStab }, abs(0.09, 0.03), 1},
		{"s6-two-stable-n150", "N=150: time with ≥ 2 operations, stable", "< 0.5%", 0, func(f sec6Figures) float64 { return f.twoStable }, func(x float64) bool { return x < 0.005 }, 2},
		{"s6-two-stable-n300", "N=300: time with ≥ 2 operations, stable", "10%", 1, func(f sec6Figures) float64 { return f.twoStable }, abs(0.10, 0.03), 1},
		{"s6-five-stab-n300", "N=300: time with > 5 operations, during stabilization", "0.015%", 1, func(f sec6Figures) float64 { return f.fiveStab }, factor(0.00015, 3), 4},
		{"s6-five-stable-n300", "N=300: time with > 5 operations, stable (Table 3: 8 in 10^6)", "0.0008%", 1, func(f sec6Figures) float64 { return f.fiveStable }, factor(0.000008, 3), 4},
		{"s6-long-stab-n300", "N=300: intervals > 3000 = 5·Δmin, during stabilization", "almost 15%", 1, func(f sec6Figures) float64 { return f.longStab }, abs(0.15, 0.05), 1},
		{"s6-long-stable-n300", "N=300: intervals > 3000, stable (Table 4: 9 of 127,497)", "0.007%", 1, func(f sec6Figures) float64 { return f.longStable }, factor(9.0/127497, 3), 4},
	}
	var out []sec6Row
	for _, d := range defs {
		row := sec6Row{id: d.id, what: d.what, paper: d.paper}
		for i := range 2 {
			v := d.get(figs[i][d.n])
			if math.IsNaN(v) {
				continue
			}
			row.have[i], row.ok[i] = true, d.ok(v)
			row.ours[i] = fmt.Sprintf("%.*f%%", d.digits, 100*v) + mark(row.ok[i])
		}
		out = append(out, row)
	}
	return out
}
