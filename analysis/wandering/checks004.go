package wandering

import (
	"fmt"
	"math"
	"path"
	"strings"
)

// Check is one figure of seed 004 against its stated tolerance.
type Check struct {
	ID    string // e.g. "t3/t3-3way-p4-n150/k1"
	What  string
	Paper string
	Ours  string
	OK    bool
	// Known, when the figure is outside its tolerance, is why the docs
	// expect it there (docs/studies/wandering.md); a figure outside its
	// tolerance without a Known reason fails the study (ClaimsError).
	Known string
}

// known004 lists the 004 figures that do not match, with the reason
// docs/studies/wandering.md gives (ID patterns, path.Match syntax). Every
// other checked figure is claimed to match.
var known004 = []struct{ pattern, why string }{
	{"t3/t3-*-n300/k[1-4]", "N = 300: one token at k_load 2 keeps the resource busier than the paper's rows say (they add up to 53% idle; ours 16% on the 4-way, 29–41% on the 3-way at 10^-5–10^-4), and two at once is about 0.6 of the paper's on every exchange"},
	{"t4/t3-*-n300/*", "N = 300: the intervals' tail (≥ 1500) is 2 to 1000 times the paper's on every exchange; on the 3-way the first two bins come within tolerance when losses fall in the run"},
	{"t3/t3-w004-n150/k2", "two at once rarer than the paper's: most spurious tokens are discarded at their first receiver (§5's precedence rule)"},
	{"t3/t3-4way-p4-n150/k2", "as the 4-way without loss: the 4-way exchange retransmits a lost Commit, so the run is the loss-free one"},
	{"t4/t3-*-n150/b[345]", "the tail of Table 4 at N = 150 (≥ 2000) is about twice the paper's"},
	{"t3/t3-3way-p4-n150/k[234]", "at 10^-4 the transients after each lost Commit (12% to 21% of the time without a token at N = 150) add two to four operations at once that the paper's N = 150 run does not have: no one loss rate fits both N (docs)"},
	{"t4/t3-3way-p4-n150/*", "as k = 2 to 4 at 10^-4: the time without a token (21% at N = 150) lengthens the intervals, the first bin falls about 25% short and the tail grows"},
	{"t3/t3-3way-p5-n150/k[23]", "at 10^-5 one Commit was lost in 3·10^5 time units: two at once is the loss-free run's (under the paper's), three at once the one transient's (83 against 19, just beyond the counting noise)"},
	{"t5/t5-*-n150/median", "§5's reading ends most N = 150 transients with the first regenerated token (median under 1000 against about 20000)"},
	{"s6-two-stab-n300/4way", "inherits Table 3's N = 300 shortfall of two at once; during the transients the share is close to our stable one, as 004 says of its own"},
	{"s6-two-stable-n300/*", "Table 3 at N = 300 (k ≥ 2)"},
	{"s6-five-stab-n300/*", "more than five operations at once never happens in our transients (spurious tokens are removed at their first receiver)"},
	{"s6-five-stable-n300/*", "Table 3 at N = 300, rows 6 to 10: a few time units in a run"},
	{"s6-long-stab-n300/*", "an interval ending in a transient spans the time without a token after the loss, which is longer in ours"},
	{"s6-long-stable-n300/*", "Table 4's tail at N = 300"},
}

func knownWhy(id string) string {
	for _, k := range known004 {
		if ok, _ := path.Match(k.pattern, id); ok {
			return k.why
		}
	}
	return ""
}

// Checks004 gathers every 004 figure of runs (by scenario name, as
// studies/wandering names them): Tables 1, 3, 4 row by row, Table 5's
// medians, Fig. 1's duration and §6's shares.
func Checks004(runs map[string]*Run) []Check {
	rp := &report{runs: runs}
	var cs []Check
	add := func(id, what, paper, ours string, ok bool) {
		c := Check{ID: id, What: what, Paper: paper, Ours: ours, OK: ok}
		if !ok {
			c.Known = knownWhy(id)
		}
		cs = append(cs, c)
	}
	counts := func(table string, run string, paper []float64, get func(r *Run, i int) float64, label func(i int) string) {
		r := rp.runs[run]
		if r == nil {
			return
		}
		for i, p := range paper {
			v := get(r, i)
			add(fmt.Sprintf("%s/%s/%s", table, run, label(i)), fmt.Sprintf("004 Table %s, %s, %s", table[1:], run, label(i)), num(p), num(v), within004(p, v, r.SpanS))
		}
	}
	conc := func(r *Run, i int) float64 { return per1e6(r, at(r.Concurrency(), i+1)) }
	kLabel := func(i int) string { return fmt.Sprintf("k%d", i+1) }
	bLabel := func(i int) string { return fmt.Sprintf("b%d", i) }
	inter := func(r *Run, i int) float64 { return interBins(r)[i] }
	counts("t1", "t1-baseline-n300", paperT1N300, conc, kLabel)
	counts("t1", "t1-baseline-n150", paperT1N150, conc, kLabel)
	for _, n := range []int{300, 150} {
		p3, p4 := paperT3N300, paperT4N300
		if n == 150 {
			p3, p4 = paperT3N150, paperT4N150
		}
		for _, c := range t3Columns(n) {
			counts("t3", c.run, p3, conc, kLabel)
			counts("t4", c.run, p4, inter, bLabel)
		}
		for _, run := range []string{fmt.Sprintf("t5-w004-n%d", n), fmt.Sprintf("t5-3way-p5-n%d", n)} {
			if r := rp.runs[run]; r != nil {
				p := paperT5N300
				if n == 150 {
					p = paperT5N150
				}
				_, d, _ := t5hist(r)
				m, pm := median(d), binMedian(p)
				add("t5/"+run+"/median", "004 Table 5, "+run+", median duration", num(pm), num(m), m >= pm/2 && m <= 2*pm)
			}
		}
	}
	if r := rp.runs["f1-3way-fixed-n300"]; r != nil {
		row, t, ok := fig1(r)
		ours := "no loss"
		if ok {
			ours = fmt.Sprintf("unsettled after %.0f", t.End-t.At)
			if !math.IsNaN(row.duration) {
				ours = num(row.duration)
			}
		}
		add("f1/fixed/duration", "004 Fig. 1, transient with Δgen fixed, N = 300", "approx 20000", ours, ok && row.duration >= 10000 && row.duration <= 40000)
	}
	var figs [2][2]sec6Figures
	have := false
	for i, p := range [][2]string{{"t5-w004-n%d", "t3-w004-n%d"}, {"t5-3way-p5-n%d", "t3-3way-p5-n%d"}} {
		for j, n := range []int{150, 300} {
			t5, t3 := rp.runs[fmt.Sprintf(p[0], n)], rp.runs[fmt.Sprintf(p[1], n)]
			have = have || t5 != nil || t3 != nil
			figs[i][j] = measure6(t5, t3)
		}
	}
	if have {
		for _, row := range sec6Checks(figs) {
			for i, way := range []string{"4way", "3way"} {
				if row.have[i] {
					add(row.id+"/"+way, "004 §6, "+way+": "+row.what, row.paper, strings.TrimSuffix(strings.TrimSuffix(row.ours[i], " ✓"), " ✗"), row.ok[i])
				}
			}
		}
	}
	return cs
}

// Unexpected returns the checks outside their tolerance without a known
// reason: the figures the docs say match and that do not.
func Unexpected(cs []Check) []Check {
	var out []Check
	for _, c := range cs {
		if !c.OK && c.Known == "" {
			out = append(out, c)
		}
	}
	return out
}

// ClaimsError lists the 004 figures outside their tolerance that the
// docs say match.
type ClaimsError struct{ Failed []Check }

func (e *ClaimsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d figure(s) of seed 004 outside their tolerance, which docs/studies/wandering.md says match:", len(e.Failed))
	for _, c := range e.Failed {
		fmt.Fprintf(&b, "\n  %s: paper %s, ours %s", c.ID, c.Paper, c.Ours)
	}
	return b.String()
}

// checkSection writes every check, and returns a *ClaimsError for those
// that fail without a known reason.
func (rp *report) checkSection() error {
	cs := Checks004(rp.runs)
	if len(cs) == 0 {
		return nil
	}
	w := rp.w
	failed := Unexpected(cs)
	ok := 0
	for _, c := range cs {
		if c.OK {
			ok++
		}
	}
	known := len(cs) - ok - len(failed)
	w("## Seed 004: every figure against its tolerance\n\n")
	w("%d figures checked: %d within tolerance, %d outside with a known reason, %d outside that the docs say match (the study exits non-zero). Known ✗ (a figure listed here that comes back within tolerance is marked \"✓ (known ✗)\": update the docs):\n\n", len(cs), ok, known, len(failed))
	w("| figure | paper | ours | | reason |\n|---|---|---|---|---|\n")
	for _, c := range cs {
		switch {
		case !c.OK:
			why := c.Known
			if why == "" {
				why = "**not expected: the docs say it matches**"
			}
			w("| %s | %s | %s | ✗ | %s |\n", c.ID, c.Paper, c.Ours, why)
		case knownWhy(c.ID) != "":
			w("| %s | %s | %s | ✓ (known ✗) | |\n", c.ID, c.Paper, c.Ours)
		}
	}
	w("\n")
	if len(failed) > 0 {
		return &ClaimsError{Failed: failed}
	}
	return nil
}
