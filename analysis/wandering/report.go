package wandering

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// The papers' numbers, as printed.
var (
	// 004 Table 1: random access, time units with k concurrent operations
	// in 10^6, k = 1..11.
	paperT1N300 = []float64{322428, 258358, 138910, 55138, 17644, 4670, 1017, 172, 26, 3, 2}
	paperT1N150 = []float64{360945, 144035, 38048, 7535, 1292, 149, 8, 1, 0, 0, 0}
	// 004 Table 3: wandering token (k = 1..10; "-" read as 0).
	paperT3N300 = []float64{378512, 80719, 8485, 616, 30, 0, 4, 0, 2, 2}
	paperT3N150 = []float64{661678, 4275, 19, 0, 0, 0, 0, 0, 0, 0}
	// 004 Table 4: intervals between successive operations, rows 500 ..
	// 4500 (read as the lower bound of a 500-wide bin: below 600 = Δmin
	// no interval can fall, yet the first row is the largest).
	paperT4N300 = []float64{64785, 41289, 17251, 3029, 134, 3, 3, 2, 1}
	paperT4N150 = []float64{123817, 35750, 6311, 585, 1, 0, 0, 0, 0}
	// 004 Table 5: stabilization after a loss, rows 10000 .. 80000 (read
	// as the upper bound of a 5000-wide bin; the first row takes all
	// below 10000), 100 transients each.
	paperT5N300 = []float64{1, 2, 2, 3, 12, 12, 22, 8, 14, 7, 6, 6, 2, 1, 1}
	paperT5N150 = []float64{39, 4, 13, 10, 10, 13, 7, 2, 2, 0, 0, 0, 0, 0, 0}
)

// Report analyses every run under dir (each a subdirectory with a
// manifest) and writes dir/report.md and dir/plots/.
func Report(dir string) (string, error) {
	ms, _ := filepath.Glob(filepath.Join(dir, "*", ManifestFile))
	sort.Strings(ms)
	rp := &report{runs: map[string]*Run{}, plots: filepath.Join(dir, "plots")}
	loaded, err := loadAll(ms)
	if err != nil {
		return "", err
	}
	for _, r := range loaded {
		rp.runs[r.Scenario] = r
		rp.names = append(rp.names, r.Scenario)
	}
	if len(rp.runs) == 0 {
		return "", fmt.Errorf("%s: no runs (no */%s)", dir, ManifestFile)
	}
	rp.runTable()
	if err := os.MkdirAll(rp.plots, 0o755); err != nil {
		return "", err
	}
	rp.concurrency("004 Table 1: random access (baseline, period Δmin + U[0, Δmin/2])", "t1-baseline-n300", "t1-baseline-n150", paperT1N300, paperT1N150,
		func(p, o, _ float64) bool { return within(p, o) }, func(n int) float64 { return float64(n) * 4 / 750 })
	rp.concurrency("004 Table 3: Wandering Token (wandering-004)", "t3-w004-n300", "t3-w004-n150", paperT3N300, paperT3N150,
		func(p, o, _ float64) bool { return within(p, o) }, nil)
	rp.table4()
	rp.table5()
	rp.own004()
	rp.fig1Section()
	rp.fig2()
	rp.fig3and4()
	rp.readings003()
	rp.fig5()
	claims := claims003(rp.runs)
	rp.claimTable("003: the paper's figures against ours", claims)
	checks004 := rp.checkSection() // seed 004's figures against their tolerances
	rp.w(notes)
	if err := writeClaims(dir, claims); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(rp.b.String()), 0o644); err != nil {
		return "", err
	}
	if len(rp.perr) > 0 {
		return path, errors.Join(fmt.Errorf("plots: %v", rp.perr), checks004)
	}
	return path, checks004
}

// report is report.md being written: one method per table or figure of
// the papers, each skipped when its runs are absent (a partial `make
// wandering` still reports what it ran).
type report struct {
	b     strings.Builder
	runs  map[string]*Run // by scenario name
	names []string        // scenario names, in the manifests' order
	plots string          // the plots directory
	perr  []error         // plots that could not be saved
}

func (rp *report) w(format string, a ...any) { fmt.Fprintf(&rp.b, format, a...) }

// save writes p into the plots directory and links it from the report;
// a plot that cannot be saved is reported at the end, not fatal.
func (rp *report) save(p *plot.Plot, name string) {
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(rp.plots, name)); err != nil {
		rp.perr = append(rp.perr, err)
		return
	}
	rp.w("![%s](plots/%s)\n\n", name, name)
}

// runTable is the report's head: what was simulated, beside what the
// paper ran, so that a shortened run is visible before its figures.
func (rp *report) runTable() {
	w := rp.w
	w("# The Wandering Token on the simulator (seeds 003 and 004)\n\n")
	w("Written by `analysis/wandering` from the runs below (`studies/wandering`, `make wandering`). Every figure is measured from the agents' `op_started`/`op_finished` events and token events; tolerances are stated per table and a row outside them is marked ✗, with the reason in the notes.\n\n")
	w("| run | role | N | paper s simulated | the paper ran | seed | losses injected | datagrams | wall s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range rp.names {
		r := rp.runs[n]
		ran := fmt.Sprintf("%.0f", r.SpanS)
		if r.CutShort {
			ran += " (cut short by the wall limit)"
		}
		w("| %s | %s %s | %d | %s | %s | %d | %d | %d | %.0f |\n", n, r.Role, r.Section, r.N, ran, paperLength(n), r.Seed, len(r.Losses), r.Datagrams, r.WallS)
	}
	w("\n")
}

// within is the tolerance of 004's count tables: relative 25%, or the
// counting noise of a rare row (3√paper + 10).
func within(paper, ours float64) bool {
	return math.Abs(ours-paper) <= max(0.25*paper, 3*math.Sqrt(paper)+10)
}

// concurrency is 004 Table 1 or Table 3: time units (per 10^6) with k
// operations running at once, for N = 300 and N = 150, beside the paper's
// row and, with lambda, the Poisson expectation; tol marks a row.
func (rp *report) concurrency(title, r300, r150 string, p300, p150 []float64, tol func(paper, ours, poisson float64) bool, lambda func(n int) float64) {
	w := rp.w
	a, c := rp.runs[r300], rp.runs[r150]
	if a == nil && c == nil {
		return
	}
	w("## %s\n\n", title)
	w("Time units (per 10^6) with k operations running at once. Poisson: the expectation if each of N agents ran A independently with probability Δop/period (N·Δop/750 for 004's mean period of 750). %s\n\n", rp.kloadNote())
	w("| k | paper N=300 | sim N=300 | Poisson N=300 | | paper N=150 | sim N=150 | Poisson N=150 | |\n|---|---|---|---|---|---|---|---|---|\n")
	get := func(r *Run, k int) (float64, bool) {
		if r == nil {
			return math.NaN(), false
		}
		c := r.Concurrency()
		if k >= len(c) {
			return 0, true
		}
		return c[k] * 1e6 / r.SpanS, true
	}
	for k := 1; k <= max(len(p300), len(p150)); k++ {
		row := []string{fmt.Sprint(k)}
		for _, x := range []struct {
			r *Run
			p []float64
			n int
		}{{a, p300, 300}, {c, p150, 150}} {
			pv := math.NaN()
			if k-1 < len(x.p) {
				pv = x.p[k-1]
			}
			ov, ok := get(x.r, k)
			po := math.NaN()
			if lambda != nil {
				l := lambda(x.n)
				po = 1e6 * math.Exp(-l) * math.Pow(l, float64(k)) / math.Gamma(float64(k)+1)
			}
			mark := ""
			if ok && !math.IsNaN(pv) {
				mark = "✓"
				if !tol(pv, ov, po) {
					mark = "✗"
				}
			}
			row = append(row, num(pv), num(ov), num(po), mark)
		}
		w("| %s |\n", strings.Join(row, " | "))
	}
	w("\n")
}

// table4 is 004 Table 4: intervals between successive operations of an
// agent, in 500-wide bins, per 10^6 time units.
func (rp *report) table4() {
	w := rp.w
	if a, c := rp.runs["t3-w004-n300"], rp.runs["t3-w004-n150"]; a != nil || c != nil {
		w("## 004 Table 4: intervals between successive operations of an agent (wandering-004)\n\n")
		w("Counts per 10^6 time units; the paper's row label read as the lower bound of a 500-wide bin (see notes). Tolerance as Table 3. %s\n\n", rp.kloadNote())
		w("| bin | paper N=300 | sim N=300 | | paper N=150 | sim N=150 | |\n|---|---|---|---|---|---|---|\n")
		bins := func(r *Run) []float64 {
			if r == nil {
				return nil
			}
			h := make([]float64, 9)
			for _, x := range r.InterArrivals() {
				i := int(x/500) - 1
				if i < 0 {
					i = 0 // below 500: with Δmin 600 there is none
				}
				if i < len(h) {
					h[i] += 1e6 / r.SpanS
				}
			}
			return h
		}
		ha, hc := bins(a), bins(c)
		for i := range 9 {
			row := []string{fmt.Sprintf("[%d, %d)", 500*(i+1), 500*(i+2))}
			for _, x := range []struct {
				h, p []float64
			}{{ha, paperT4N300}, {hc, paperT4N150}} {
				ov, mark := math.NaN(), ""
				if x.h != nil {
					ov, mark = x.h[i], "✓"
					if !within(x.p[i], ov) {
						mark = "✗"
					}
				}
				row = append(row, num(x.p[i]), num(ov), mark)
			}
			w("| %s |\n", strings.Join(row, " | "))
		}
		w("\n")
	}
}

// table5 is 004 Table 5: stabilization after a token loss, under both
// readings of the removal rule (§5's precedence: t5-*; Fig. 2 as
// printed: t5fig2-*).
func (rp *report) table5() {
	w := rp.w
	t5 := []*Run{rp.runs["t5-w004-n300"], rp.runs["t5fig2-w004-n300"], rp.runs["t5-w004-n150"], rp.runs["t5fig2-w004-n150"]}
	if slices.ContainsFunc(t5, func(r *Run) bool { return r != nil }) {
		w("## 004 Table 5: stabilization after a token loss (wandering-004)\n\n")
		w("A loss is injected once the system has been stable for 10^4 time units; the duration runs from the loss to the moment it is stable again for good (until the next loss): never without a token, and more than one only in spikes shorter than Δmin = 600 (spurious tokens are made and removed all the time in stable operation; most last one pass). Bins of 5000 up to the row's label (the first row: all below 10000). Counts as measured (the paper: 100 transients per N); no tolerance is claimed for a distribution this dispersed (the paper's own word), the medians are compared. Two readings of 004's removal rule, the same seeds: §5 (a token is discarded within Δmin of A when lasttoken precedes it; the default) and Fig. 2 as printed (any token other than lasttoken; `removal: any`). %s\n\n", rp.kloadNote())
		w("| duration ≤ | paper N=300 | §5 N=300 | Fig. 2 N=300 | paper N=150 | §5 N=150 | Fig. 2 N=150 |\n|---|---|---|---|---|---|---|\n")
		var hs, ds [4][]float64
		var us [4]int
		for i, r := range t5 {
			if r != nil {
				hs[i], ds[i], us[i] = t5hist(r)
			}
		}
		g := func(h []float64, i int) string {
			if h == nil {
				return num(math.NaN())
			}
			return num(h[i])
		}
		for i := range 15 {
			w("| %d | %s | %s | %s | %s | %s | %s |\n", 10000+5000*i, num(paperT5N300[i]), g(hs[0], i), g(hs[1], i), num(paperT5N150[i]), g(hs[2], i), g(hs[3], i))
		}
		med := func(i int) string {
			if t5[i] == nil {
				return num(math.NaN())
			}
			return num(median(ds[i]))
		}
		w("| median | %s | %s | %s | %s | %s | %s |\n", num(binMedian(paperT5N300)), med(0), med(1), num(binMedian(paperT5N150)), med(2), med(3))
		cnt := func(i int) string {
			if t5[i] == nil {
				return num(math.NaN())
			}
			if t5[i].CutShort && us[i] > 0 {
				// The wall limit ended the run during the last transient.
				return fmt.Sprintf("%d (%d; 1 more cut short)", len(ds[i]), us[i]-1)
			}
			return fmt.Sprintf("%d (%d)", len(ds[i]), us[i])
		}
		w("| transients measured (unsettled) | 100 | %s | %s | 100 | %s | %s |\n\n", cnt(0), cnt(1), cnt(2), cnt(3))
	}
}

// loadAll loads the runs of the manifests ms, one per CPU at a time (each
// run's logs are read by one goroutine, in order), in ms's order.
func loadAll(ms []string) ([]*Run, error) {
	runs := make([]*Run, len(ms))
	errs := make([]error, len(ms))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			runs[i], errs[i] = Load(filepath.Dir(m))
		}()
	}
	wg.Wait()
	return runs, errors.Join(errs...)
}

// paperLength is what the paper ran for a scenario (by its name's
// prefix), beside what was simulated: a shortened run says so here.
func paperLength(scenario string) string {
	switch {
	case strings.HasPrefix(scenario, "t1-"), strings.HasPrefix(scenario, "t3-"):
		return "1000000"
	case strings.HasPrefix(scenario, "t5"):
		return "100 transients"
	case strings.HasPrefix(scenario, "f2-"), strings.HasPrefix(scenario, "f3"):
		return "100000"
	case strings.HasPrefix(scenario, "r-"):
		return "100000 (the real run's length)"
	}
	return ""
}

func num(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return fmt.Sprintf("%.0f", x)
}

// pct prints a share; with want ≥ 0 it marks it against want ± tol.
func pct(x, want, tol float64) string {
	s := fmt.Sprintf("%.1f%%", 100*x)
	if want >= 0 {
		if math.Abs(x-want) <= tol {
			s += " ✓"
		} else {
			s += " ✗"
		}
	}
	return s
}

func frac(xs []float64, below float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	n := 0
	for _, x := range xs {
		if x < below {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// binMedian is the upper bound of the Table 5 bin holding the median.
func binMedian(h []float64) float64 {
	tot := 0.0
	for _, x := range h {
		tot += x
	}
	acc := 0.0
	for i, x := range h {
		acc += x
		if acc >= tot/2 {
			return float64(10000 + 5000*i)
		}
	}
	return math.NaN()
}

const notes = `## Notes

See docs/wandering.md and docs/studies/wandering.md for the readings of the papers chosen here and the explanation of every ✗.
`
