package trend

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"tokenbed/internal/stats"
)

// Notes of findings not judged, that readers may sort on.
const (
	// NoteMissingLatest: the figure has no value on the latest night (its
	// job failed, or no longer gives it).
	NoteMissingLatest = "no value on the latest night"
	// NoteFirstNight: the latest night is the figure's first.
	NoteFirstNight = "its first night: nothing earlier to compare with"
)

// candidate is one candidate change night and its test.
type candidate struct {
	j        int     // its index in the present nights
	from     int     // the index in the present nights of its first baseline night
	effect   float64 // the relative change baseline → latest
	p        float64 // the largest p-value of the nights from it on
	dir      int     // the direction of the latest night from its baseline
	baseline float64 // the figure over its baseline, pooled
}

// Analyze judges every series at its latest night, with Holm's
// correction over all of them, and returns one finding per series in the
// same order.
func Analyze(series []Series, o Options) []Finding {
	o = o.withDefaults()
	fs := make([]Finding, len(series))
	cands := make([][]candidate, len(series))
	ps := make([]float64, len(series))
	for i, s := range series {
		fs[i], cands[i] = judge(s, o)
		ps[i] = fs[i].P
	}
	reject, adjusted := stats.Holm(ps, o.Alpha)
	level := holmLevels(ps, o.Alpha)
	for i := range fs {
		f := &fs[i]
		f.PAdjusted = adjusted[i]
		if !reject[i] {
			continue
		}
		// The earliest candidate within the level the figure passed and
		// of at least the effect: the effect narrows what is reported,
		// not Holm's family (the p-values are those of every figure).
		k := float64(len(cands[i]))
		within := -1
		for ci, c := range cands[i] {
			if min(1, k*c.p) > level[i] {
				continue
			}
			if math.Abs(c.effect) >= o.MinEffect {
				within = -1
				settle(f, series[i], c)
				break
			}
			if within < 0 {
				within = ci
			}
		}
		if within >= 0 {
			// Shown against the baseline of its earliest significant
			// candidate, the change that was too small.
			f.WithinEffect = true
			setBaseline(f, series[i], cands[i][within])
		}
	}
	return fs
}

// holmLevels is the level each p-value faces in Holm's procedure:
// alpha/(m−j) at its place j in ascending order.
func holmLevels(p []float64, alpha float64) []float64 {
	var idx []int
	for i, v := range p {
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(p[a], p[b]) })
	out := make([]float64, len(p))
	for j, i := range idx {
		out[i] = alpha / float64(len(idx)-j)
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// settle marks f as moved at candidate c.
func settle(f *Finding, s Series, c candidate) {
	present := presentNights(s)
	at := s.Nights[present[c.j]]
	f.Moved = true
	f.Direction = c.dir
	setBaseline(f, s, c)
	f.Since, f.SinceRevision = at.Night, at.Revision
	if c.j > 0 {
		b := s.Nights[present[c.j-1]]
		f.Before, f.BeforeRevision = b.Night, b.Revision
	}
	f.NightsMoved = len(present) - c.j
	switch s.Better {
	case "lower":
		f.Regression = c.dir > 0
	case "higher":
		f.Regression = c.dir < 0
	default:
		f.Regression = true
	}
}

// setBaseline sets f's baseline from candidate c: its value, its nights,
// the relative change to the latest night, and the overrides in which the
// latest night differs from the last baseline night.
func setBaseline(f *Finding, s Series, c candidate) {
	present := presentNights(s)
	first, last := s.Nights[present[c.from]], s.Nights[present[c.j-1]]
	f.Baseline, f.Effect = c.baseline, c.effect
	f.BaselineFirst, f.BaselineLast, f.BaselineRevision = first.Night, last.Night, last.Revision
	f.OverridesDiffer = overridesDiffer(last.Overrides, s.Nights[present[len(present)-1]].Overrides)
}

// overridesDiffer lists the paths whose override differs between two
// nights' JSON objects, "path: old → new" ("-" where unset), sorted. An
// object that does not parse counts as a whole: "overrides: old → new".
func overridesDiffer(old, new string) []string {
	if old == new {
		return nil
	}
	var a, b map[string]any
	if json.Unmarshal([]byte(nonEmpty(old)), &a) != nil || json.Unmarshal([]byte(nonEmpty(new)), &b) != nil {
		return []string{fmt.Sprintf("overrides: %s → %s", old, new)}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		va, oka := a[k]
		vb, okb := b[k]
		if oka == okb && fmt.Sprint(va) == fmt.Sprint(vb) {
			continue
		}
		show := func(v any, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprint(v)
		}
		out = append(out, fmt.Sprintf("%s: %s → %s", k, show(va, oka), show(vb, okb)))
	}
	return out
}

func nonEmpty(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// has reports whether night n carries a value of kind k.
func has(k Kind, n Night) bool {
	if n.Missing {
		return false
	}
	return k == Count || len(n.Samples) > 0
}

func presentNights(s Series) []int {
	var out []int
	for i, n := range s.Nights {
		if has(s.Kind, n) {
			out = append(out, i)
		}
	}
	return out
}

// judge tests series s's candidate change nights; its P is NaN when it
// cannot be judged.
func judge(s Series, o Options) (Finding, []candidate) {
	f := Finding{Job: s.Job, Backend: s.Backend, Figure: s.Figure, Unit: s.Unit, Kind: s.Kind, P: math.NaN(), PAdjusted: math.NaN()}
	t, err := testerFor(s)
	if err != nil {
		f.Note = err.Error()
		return f, nil
	}
	f.Test = t.name
	if len(s.Nights) == 0 {
		f.Note = "no nights"
		return f, nil
	}
	last := s.Nights[len(s.Nights)-1]
	f.Night, f.Revision = last.Night, last.Revision
	if !has(s.Kind, last) {
		f.Note = NoteMissingLatest
		return f, nil
	}
	present := presentNights(s)
	if len(present) < o.MinBaseline+1 {
		f.Note = fmt.Sprintf("%d nights with a value: a baseline needs %d before the latest", len(present), o.MinBaseline)
		if len(present) == 1 {
			f.Note = NoteFirstNight
		}
		return f, nil
	}
	nights := make([]prepared, len(present))
	for j, i := range present {
		nights[j] = t.prepare(s.Nights[i])
	}
	f.Latest = nights[len(nights)-1].value
	var cands []candidate
	for j := max(o.MinBaseline, len(present)-o.Horizon); j < len(present); j++ {
		base := nights[max(0, j-o.Window):j]
		cands = append(cands, t.candidate(j, base, nights[j:]))
	}
	f.Judged = true
	f.Candidates = len(cands)
	best := cands[len(cands)-1]
	for _, c := range cands {
		if c.p < best.p {
			best = c
		}
	}
	f.P = min(1, float64(len(cands))*best.p)
	setBaseline(&f, s, cands[len(cands)-1])
	return f, cands
}
