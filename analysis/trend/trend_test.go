package trend

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tokenbed/internal/stats"
)

func readSeries(t *testing.T, name string) seriesFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f seriesFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Series) == 0 || len(f.Series) != len(f.Expect) {
		t.Fatalf("%s: %d series, %d expectations", name, len(f.Series), len(f.Expect))
	}
	return f
}

func check(t *testing.T, file string, fs []Finding, want []expect) {
	t.Helper()
	for i, w := range want {
		f := fs[i]
		if f.Figure != w.Figure {
			t.Fatalf("%s: finding %d is %q, want %q", file, i, f.Figure, w.Figure)
		}
		got := expect{Figure: f.Figure, Judged: f.Judged, Moved: f.Moved, Regression: f.Regression, WithinEffect: f.WithinEffect}
		if w.SinceRevision != "" {
			got.SinceRevision, got.NightsMoved = f.SinceRevision, f.NightsMoved
		}
		if w.Before != "" {
			got.Before = f.Before
		}
		if got != w {
			t.Errorf("%s: %s: got %+v, want %+v\n%s", file, w.Figure, got, w, Text([]Finding{f}))
		}
	}
}

// The literal series and their verdicts: a step change (flagged, with
// the revision it came in), noise alone (no flag), missing nights
// (handled: no flag, the latest missing not judged, a step after a gap
// named from the last night present).
func TestLiteralSeries(t *testing.T) {
	for _, name := range []string{"step.json", "noise.json", "missing.json", "effect.json"} {
		f := readSeries(t, name)
		fs := Analyze(f.Series, Options{})
		check(t, name, fs, f.Expect)
		if t.Failed() {
			t.Logf("%s:\n%s", name, Text(fs))
		}
	}
}

// The effect filter narrows what is reported, not the tests: the tiny
// shifts of effect.json, within effect at the default 5%, are flagged
// with the filter off (harness trend --min-effect 0), with the same
// p-values.
func TestMinEffectOff(t *testing.T) {
	f := readSeries(t, "effect.json")
	def := Analyze(f.Series, Options{})
	off := Analyze(f.Series, Options{MinEffect: -1})
	for i := range 2 {
		d, o := def[i], off[i]
		if !o.Moved || !o.Regression || o.WithinEffect || o.P != d.P || o.PAdjusted != d.PAdjusted {
			t.Errorf("%s with no effect filter: moved %v regression %v within %v p %g/%g, want moved at p %g/%g",
				o.Figure, o.Moved, o.Regression, o.WithinEffect, o.P, o.PAdjusted, d.P, d.PAdjusted)
		}
		if e := o.Effect; !(e > 0 && e < 0.01) {
			t.Errorf("%s: effect %g, want the planted +0.3%%", o.Figure, e)
		}
	}
}

// A slow drift is flagged by the tests, some nights after it starts: the
// test replays the nights one at a time, as the nightly run sees them,
// with no effect filter (the tests' power), and reports when. At the
// default effect of 5% the drift, 0.4% a night, stays within effect
// (drift.json's expectation): the baseline slides with it.
func TestDrift(t *testing.T) {
	f := readSeries(t, "drift.json")
	s := f.Series[0]
	const start = 7 // the drift's first night (drift.json's about)
	first := 0
	for k := start; k <= len(s.Nights); k++ {
		p := s
		p.Nights = s.Nights[:k]
		fs := Analyze([]Series{p}, Options{MinEffect: -1})
		if k < start+1 && fs[0].Moved {
			t.Errorf("flagged at night %d, before the drift could show", k)
		}
		if fs[0].Moved && first == 0 {
			first = k
			t.Logf("drift of 0.04 ms/night flagged at night %d (%d nights after it began; %.2f ms above the start), since %s, p_adj %.2g",
				k, k-start+1, 0.04*float64(k-start+1), fs[0].SinceRevision, fs[0].PAdjusted)
		}
	}
	check(t, "drift.json", Analyze(f.Series, Options{}), f.Expect)
	// 0.04 ms a night against a median whose standard error is ~0.025 ms
	// over 150 samples: flagged on the drift's third night; a change to
	// the test that needs more than five is a loss of power.
	if first == 0 || first-start+1 > 5 {
		t.Errorf("drift flagged after %d nights (never, if %d), want ≤ 5", first-start+1, 1-start)
	}
}

// Noise alone, over many seeded nights of five figures each: the nights
// with any false flag stay within the family-wise level Alpha (Holm over
// the figures, Bonferroni over the candidate change nights).
func TestNoiseFalseFlagRate(t *testing.T) {
	reps := 300
	if testing.Short() {
		reps = 60
	}
	const seed = 2026
	g := gen{rand.New(rand.NewPCG(seed, 1))}
	// A larger level, so that the count says something in 300 nights;
	// no effect filter, so that the count is the tests' level.
	o := Options{Alpha: 0.05, MinEffect: -1}
	flagged, figures := 0, 0
	for range reps {
		ss := []Series{
			g.sampleSeries("j", "p50", Quantile, 0.5, 10, 100, latency(flat)),
			g.sampleSeries("j", "p99", Quantile, 0.99, 10, 100, latency(flat)),
			g.sampleSeries("j", "dist", Distribution, 0, 10, 100, latency(flat)),
			g.countSeries("j", "failures", 10, func(int) float64 { return 5 }),
			g.countSeries("j", "rare", 10, func(int) float64 { return 0.5 }),
		}
		any := false
		for _, f := range Analyze(ss, o) {
			if f.Moved {
				any = true
				figures++
			}
		}
		if any {
			flagged++
		}
	}
	t.Logf("seed %d: %d of %d noise nights had a false flag (%d figures), nominal at most %.0f", seed, flagged, reps, figures, o.Alpha*float64(reps))
	// More than this has probability < 0.1% at the nominal level.
	if p := stats.BinomialUpper(flagged, reps, o.Alpha); p < 0.001 {
		t.Errorf("%d of %d nights falsely flagged: p = %.2g at the nominal %.2f", flagged, reps, p, o.Alpha)
	}
}

// What cannot be judged says why, and never counts in Holm's family.
func TestNotJudged(t *testing.T) {
	ss := []Series{
		{Figure: "short", Kind: Count, Nights: []Night{{Night: "n1", Events: 1}}},
		{Figure: "gap", Kind: Count, Nights: []Night{{Night: "n1", Missing: true}, {Night: "n2", Events: 9}}},
		{Figure: "badq", Kind: Quantile, Q: 1.5, Nights: []Night{{Night: "n1", Samples: []float64{1}}}},
		{Figure: "bogus", Kind: "mean", Nights: []Night{{Night: "n1"}}},
		{Figure: "empty", Kind: Count},
	}
	for _, f := range Analyze(ss, Options{}) {
		if f.Judged || f.Moved || f.Note == "" || !math.IsNaN(f.P) {
			t.Errorf("%s: judged %v moved %v note %q p %v", f.Figure, f.Judged, f.Moved, f.Note, f.P)
		}
	}
}

// Two nights are enough: the second with the latency 1 ms up is flagged
// at its revision; two nights of noise are not.
func TestTwoNights(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(105, 0))}
	up := g.sampleSeries("j", "latency_s.A>B p50", Quantile, 0.5, 2, 150, latency(func(n int) float64 { return float64(n - 1) }))
	same := g.sampleSeries("j", "latency_s.B>A p50", Quantile, 0.5, 2, 150, latency(flat))
	dist := g.sampleSeries("j", "latency_s.B>A", Distribution, 0, 2, 150, latency(flat))
	fs := Analyze([]Series{up, same, dist}, Options{})
	check(t, "two nights", fs, []expect{
		{Figure: "latency_s.A>B p50", Judged: true, Moved: true, Regression: true, SinceRevision: "r02", Before: "n01", NightsMoved: 1},
		{Figure: "latency_s.B>A p50", Judged: true},
		{Figure: "latency_s.B>A", Judged: true},
	})
}

// A finding names the campaign overrides in which the latest night
// differs from the last baseline night: an override may have moved it.
func TestOverridesDiffer(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(107, 0))}
	s := g.countSeries("j", "passes", 2, func(int) float64 { return 100 })
	s.Nights[0].Overrides = `{"defaults.profile":"lan","seeds":3}`
	s.Nights[1].Overrides = `{"defaults.profile":"wan","seeds":3,"x":1}`
	f := Analyze([]Series{s}, Options{})[0]
	want := []string{"defaults.profile: lan → wan", "x: - → 1"}
	if !slices.Equal(f.OverridesDiffer, want) {
		t.Errorf("overrides differ %q, want %q", f.OverridesDiffer, want)
	}
	if !strings.Contains(Text([]Finding{f}), "overrides differ: defaults.profile: lan → wan, x: - → 1") {
		t.Errorf("not on the line: %s", Text([]Finding{f}))
	}
}

// A distribution's effect is its quantile functions' mean distance over
// the baseline's mean: a whole shift counts in full, a median that flips
// between two modes counts only by the mass that changed mode.
func TestShiftEffect(t *testing.T) {
	lumpy := func(n int, low float64) []float64 {
		var out []float64
		for i := range n {
			if float64(i) < low*float64(n) {
				out = append(out, 20.67)
			} else {
				out = append(out, 30.16)
			}
		}
		return out
	}
	prep := func(x []float64) prepared { return prepared{sorted: stats.Sorted(x)} }
	// 49.8% then 50.2% at the lower mode: the median jumps from 30.16 to
	// 20.67 (−31%); 0.4% of the mass moved 9.49 s, 0.15% of the mean.
	b, n := prep(lumpy(30000, 0.498)), prep(lumpy(30000, 0.502))
	if got := shiftEffect(n, b); !(got < 0 && got > -0.005) {
		t.Errorf("flipping median: effect %v, want within (−0.5%%, 0)", got)
	}
	var base, shifted []float64
	for i := range 30000 {
		x := 0.008 + 0.0002*float64(i%100)/100
		base, shifted = append(base, x), append(shifted, x+0.004)
	}
	got := shiftEffect(prep(shifted), prep(base))
	if want := 0.004 / 0.0081; math.Abs(got-want) > 0.01 {
		t.Errorf("shift by 4 ms on a mean of 8.1 ms: effect %v, want %v", got, want)
	}
	if got := shiftEffect(prep(base), prep(shifted)); got >= 0 {
		t.Errorf("shift down: effect %v, want negative", got)
	}
	// sim-vs-real's real B>A on two quiet nights: about 670 passes near
	// 9.6 ms, the second night's body 1.5% lower but with two more passes
	// of 3 s across an outage (the tail has its p99 series).
	var quiet, outage []float64
	for i := range 670 {
		x := 0.0094 + 0.0004*float64(i)/670
		quiet, outage = append(quiet, x), append(outage, x*0.985)
	}
	outage[0], outage[1] = 3.0, 3.1
	if got := shiftEffect(prep(outage), prep(quiet)); !(got < 0 && got > -0.02) {
		t.Errorf("body −1.5%% and two outage passes: effect %v, want within (−2%%, 0)", got)
	}
}
