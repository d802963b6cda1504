package trend

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"tokenbed/internal/resultsdb"
)

// Selection picks the series Read builds.
type Selection struct {
	// Job and Experiment, Backend select runs (empty: all).
	Job, Experiment, Backend string
	// Figure keeps the series whose figure name contains it (empty: all).
	Figure string
	// Since keeps the latest Since nights (0: all).
	Since int
	// Scalars name figures (by a part of the name) that are one measured
	// value a run, such as the simulator's speed (paper_s_per_wall_s): each
	// becomes a Distribution series whose samples are the values of the
	// night's runs.
	Scalars []string
}

// SampleQuantiles are the quantiles Read makes a Quantile series of, for
// every stored sample.
var SampleQuantiles = []float64{0.5, 0.99}

// Read builds the series of the database's nights. A night is a campaign;
// a job's runs of one night (its seeds, its replicas) are pooled: their
// samples joined, their counts summed over as many units of exposure. A
// job whose runs are on several backends (sim-vs-real runs real
// processes and the simulator) has a series per backend (Series.Backend):
// pooling them would mix two different measurements.
// Each job has, per stored sample (samples table), a Distribution series
// named as the sample and a Quantile series per SampleQuantiles ("NAME
// p99"); and per figure whose every value is a whole number ≥ 0 with no
// unit (passes, tolerated failures, duplications, token losses), a Count
// series. Figures that Selection.Scalars names give a Distribution series
// of their runs' values. Other figures (one measured number a run, such as
// wall_seconds) give no series: a test on one value a night needs many
// nights to reach a useful level, and each series judged widens Holm's
// family. A night on which a job has no
// run, or only runs that errored or were interrupted, is Missing.
func Read(db *resultsdb.DB, sel Selection) ([]Series, error) {
	runs, err := db.Runs(resultsdb.RunFilter{Job: sel.Job, Experiment: sel.Experiment, Backend: sel.Backend})
	if err != nil {
		return nil, err
	}
	camps, err := db.Campaigns()
	if err != nil {
		return nil, err
	}
	slices.Reverse(camps) // oldest first
	byCamp := map[string][]resultsdb.Run{}
	for _, r := range runs {
		if r.Campaign != "" && r.Job != "" {
			byCamp[r.Campaign] = append(byCamp[r.Campaign], r)
		}
	}
	var nights []resultsdb.Campaign
	for _, c := range camps {
		if len(byCamp[c.ID]) > 0 {
			nights = append(nights, c)
		}
	}
	if sel.Since > 0 && len(nights) > sel.Since {
		nights = nights[len(nights)-sel.Since:]
	}
	b := builder{db: db, sel: sel, nights: nights, series: map[key]*Series{}, backends: map[string]map[string]bool{}}
	for _, c := range nights {
		for _, r := range byCamp[c.ID] {
			if b.backends[r.Job] == nil {
				b.backends[r.Job] = map[string]bool{}
			}
			b.backends[r.Job][r.Backend] = true
		}
	}
	for i, c := range nights {
		for _, r := range byCamp[c.ID] {
			if err := b.add(i, c, r); err != nil {
				return nil, err
			}
		}
	}
	return b.finish(), nil
}

type key struct{ job, backend, figure string }

type builder struct {
	db     *resultsdb.DB
	sel    Selection
	nights []resultsdb.Campaign
	series map[key]*Series
	order  []key
	// backends: each job's backends over the nights read.
	backends map[string]map[string]bool
	// notCount: figures seen with a value that is not a count.
	notCount map[key]bool
}

// night returns series k's night i, creating the series (with every
// night Missing) as needed.
func (b *builder) night(k key, kind Kind, q float64, unit string, i int) *Night {
	s := b.series[k]
	if s == nil {
		s = &Series{Job: k.job, Backend: k.backend, Figure: k.figure, Kind: kind, Q: q, Unit: unit, Nights: make([]Night, len(b.nights))}
		if strings.HasPrefix(k.figure, "latency") {
			s.Better = "lower"
		}
		for j, c := range b.nights {
			s.Nights[j] = Night{Night: c.ID, Started: c.Started, Missing: true}
		}
		b.series[k] = s
		b.order = append(b.order, k)
	}
	return &s.Nights[i]
}

func (b *builder) add(i int, c resultsdb.Campaign, r resultsdb.Run) error {
	if r.Status == resultsdb.RunError || r.Status == resultsdb.RunInterrupted || r.Status == resultsdb.RunRunning {
		return nil
	}
	backend := ""
	if len(b.backends[r.Job]) > 1 {
		backend = r.Backend
	}
	mark := func(nt *Night) {
		if nt.Missing {
			*nt = Night{Night: c.ID, Run: r.ID, Revision: revision(r), Started: c.Started, Overrides: r.Overrides}
		}
	}
	names, err := b.db.SampleNames(r.ID)
	if err != nil {
		return err
	}
	for _, name := range names {
		vals, err := b.db.Samples(r.ID, name)
		if err != nil {
			return err
		}
		for _, s := range b.sampleSeries(name) {
			nt := b.night(key{r.Job, backend, s.figure}, s.kind, s.q, sampleUnit(name), i)
			mark(nt)
			nt.Samples = append(nt.Samples, vals...)
		}
	}
	figs, err := b.db.Figures(r.ID)
	if err != nil {
		return err
	}
	for _, f := range figs {
		k := key{r.Job, backend, f.Name}
		if b.sel.Figure != "" && !strings.Contains(f.Name, b.sel.Figure) {
			continue
		}
		if b.scalar(f.Name) {
			if f.Value.Valid && !math.IsNaN(f.Value.V) {
				nt := b.night(k, Distribution, 0, f.Unit, i)
				mark(nt)
				nt.Samples = append(nt.Samples, f.Value.V)
			}
			continue
		}
		if !isCount(f) {
			if b.notCount == nil {
				b.notCount = map[key]bool{}
			}
			b.notCount[k] = true
			continue
		}
		nt := b.night(k, Count, 0, "", i)
		mark(nt)
		nt.Events += int(f.Value.V)
		nt.Exposure++
	}
	return nil
}

func (b *builder) scalar(name string) bool {
	for _, s := range b.sel.Scalars {
		if s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

type sampleFigure struct {
	figure string
	kind   Kind
	q      float64
}

// sampleSeries are the series a stored sample gives, as the selection
// keeps them.
func (b *builder) sampleSeries(name string) []sampleFigure {
	all := []sampleFigure{{name, Distribution, 0}}
	for _, q := range SampleQuantiles {
		all = append(all, sampleFigure{name + " p" + strconv.FormatFloat(q*100, 'f', -1, 64), Quantile, q})
	}
	var out []sampleFigure
	for _, s := range all {
		if b.sel.Figure == "" || strings.Contains(s.figure, b.sel.Figure) {
			out = append(out, s)
		}
	}
	return out
}

// sampleUnit reads a sample's unit from its name ("latency_s.A>B").
func sampleUnit(name string) string {
	base, _, _ := strings.Cut(name, ".")
	if strings.HasSuffix(base, "_s") {
		return "s"
	}
	return ""
}

// isCount: a whole number ≥ 0 without a unit.
func isCount(f resultsdb.Figure) bool {
	v := f.Value.V
	return f.Value.Valid && f.Unit == "" && v >= 0 && v == math.Trunc(v) && v < 1<<31
}

func revision(r resultsdb.Run) string {
	if r.Dirty {
		return r.Revision + "-dirty"
	}
	return r.Revision
}

// finish returns the series in a stable order (job, figure), leaving out
// figures that were not a count on every night.
func (b *builder) finish() []Series {
	var out []Series
	for _, k := range b.order {
		s := b.series[k]
		if s.Kind == Count && b.notCount[k] {
			continue
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, c Series) int {
		if x := strings.Compare(a.Job, c.Job); x != 0 {
			return x
		}
		if x := strings.Compare(a.Backend, c.Backend); x != 0 {
			return x
		}
		return strings.Compare(a.Figure, c.Figure)
	})
	return out
}
