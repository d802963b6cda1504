package trend

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// -rewrite regenerates testdata/*.json from the seeds below; the files
// are the literal series the tests read, with the verdicts they expect.
var rewrite = flag.Bool("rewrite", false, "regenerate testdata/*.json from their seeds")

// seriesFile is one testdata file: series and what Analyze must find.
type seriesFile struct {
	About  string   `json:"about"`
	Seed   uint64   `json:"seed"`
	Series []Series `json:"series"`
	Expect []expect `json:"expect"`
}

// expect is the verdict on one figure (by name).
type expect struct {
	Figure        string `json:"figure"`
	Judged        bool   `json:"judged"`
	Moved         bool   `json:"moved"`
	Regression    bool   `json:"regression"`
	SinceRevision string `json:"since_revision,omitempty"`
	// Before is the last night without the change, when it matters (a
	// missing night between).
	Before      string `json:"before,omitempty"`
	NightsMoved int    `json:"nights_moved,omitempty"`
	// WithinEffect: significant, but below Options.MinEffect.
	WithinEffect bool `json:"within_effect,omitempty"`
}

// gen draws literal series: nights n01.., revisions r01.., each night's
// samples from draw(night, rng) (ms, three decimals) or its events.
type gen struct{ r *rand.Rand }

func (g gen) samples(night, n int, draw func(night int, r *rand.Rand) float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = math.Round(draw(night, g.r)*1000) / 1000
	}
	return x
}

func (g gen) poisson(lambda float64) int {
	k, p := 0, math.Exp(-lambda)
	for u := g.r.Float64(); u > p; u *= g.r.Float64() {
		k++
	}
	return k
}

func nightName(i int) (string, string) { return fmt.Sprintf("n%02d", i), fmt.Sprintf("r%02d", i) }

func (g gen) sampleSeries(job, fig string, k Kind, q float64, nights, n int, draw func(int, *rand.Rand) float64) Series {
	s := Series{Job: job, Figure: fig, Unit: "ms", Kind: k, Q: q, Better: "lower"}
	for i := 1; i <= nights; i++ {
		name, rev := nightName(i)
		s.Nights = append(s.Nights, Night{Night: name, Revision: rev, Samples: g.samples(i, n, draw)})
	}
	return s
}

func (g gen) countSeries(job, fig string, nights int, rate func(int) float64) Series {
	s := Series{Job: job, Figure: fig, Kind: Count}
	for i := 1; i <= nights; i++ {
		name, rev := nightName(i)
		s.Nights = append(s.Nights, Night{Night: name, Revision: rev, Events: g.poisson(rate(i))})
	}
	return s
}

// latency is a pass latency in ms: a 10 ms link, 0.3 ms of exponential
// jitter, plus shift.
func latency(shift func(int) float64) func(int, *rand.Rand) float64 {
	return func(night int, r *rand.Rand) float64 { return 10 + shift(night) + 0.3*r.ExpFloat64() }
}

func flat(int) float64 { return 0 }

func testdataFiles() map[string]func() seriesFile {
	return map[string]func() seriesFile{
		"step.json": func() seriesFile {
			g := gen{rand.New(rand.NewPCG(101, 0))}
			step := func(n int) float64 {
				if n >= 11 {
					return 1
				}
				return 0
			}
			return seriesFile{
				About: "14 nights; the A>B latency +1 ms from night 11 (revision r11), the tolerated failures 5 → 20 a night from night 10; the return times unchanged",
				Seed:  101,
				Series: []Series{
					g.sampleSeries("three-agents", "latency_s.A>B p99", Quantile, 0.99, 14, 150, latency(step)),
					g.sampleSeries("three-agents", "latency_s.A>B", Distribution, 0, 14, 150, latency(step)),
					g.sampleSeries("three-agents", "return_time_s.A", Distribution, 0, 14, 150, latency(flat)),
					g.countSeries("three-agents", "network_failures.tolerated", 14, func(n int) float64 { return map[bool]float64{true: 20, false: 5}[n >= 10] }),
				},
				Expect: []expect{
					{Figure: "latency_s.A>B p99", Judged: true, Moved: true, Regression: true, SinceRevision: "r11", NightsMoved: 4},
					{Figure: "latency_s.A>B", Judged: true, Moved: true, Regression: true, SinceRevision: "r11", NightsMoved: 4},
					{Figure: "return_time_s.A", Judged: true},
					{Figure: "network_failures.tolerated", Judged: true, Moved: true, Regression: true, SinceRevision: "r10", NightsMoved: 5},
				},
			}
		},
		"noise.json": func() seriesFile {
			g := gen{rand.New(rand.NewPCG(102, 0))}
			return seriesFile{
				About: "14 nights of noise alone: nothing moves",
				Seed:  102,
				Series: []Series{
					g.sampleSeries("three-agents", "latency_s.A>B p50", Quantile, 0.5, 14, 150, latency(flat)),
					g.sampleSeries("three-agents", "latency_s.A>B p99", Quantile, 0.99, 14, 150, latency(flat)),
					g.sampleSeries("three-agents", "latency_s.A>B", Distribution, 0, 14, 150, latency(flat)),
					g.countSeries("three-agents", "network_failures.tolerated", 14, func(int) float64 { return 5 }),
					g.countSeries("three-agents", "duplications.count", 14, func(int) float64 { return 0 }),
				},
				Expect: []expect{
					{Figure: "latency_s.A>B p50", Judged: true},
					{Figure: "latency_s.A>B p99", Judged: true},
					{Figure: "latency_s.A>B", Judged: true},
					{Figure: "network_failures.tolerated", Judged: true},
					{Figure: "duplications.count", Judged: true},
				},
			}
		},
		"missing.json": func() seriesFile {
			g := gen{rand.New(rand.NewPCG(103, 0))}
			gap := g.sampleSeries("ftn", "latency_s.A>B p50", Quantile, 0.5, 12, 150, latency(flat))
			gap.Nights[6] = Night{Night: gap.Nights[6].Night, Revision: gap.Nights[6].Revision, Missing: true}
			gap.Nights[7] = Night{Night: gap.Nights[7].Night, Revision: gap.Nights[7].Revision, Missing: true}
			tonight := g.countSeries("ftn", "network_failures.tolerated", 12, func(int) float64 { return 5 })
			tonight.Nights[11] = Night{Night: "n12", Revision: "r12", Missing: true}
			step := g.sampleSeries("ftn", "latency_s.B>A p50", Quantile, 0.5, 12, 150, latency(func(n int) float64 {
				return map[bool]float64{true: 1, false: 0}[n >= 10]
			}))
			step.Nights[8] = Night{Night: "n09", Revision: "r09", Missing: true}
			return seriesFile{
				About:  "missing nights: two in the middle of an unchanged series (no flag), the latest night missing (not judged), and a step at r10 right after a missing night (flagged; the last night without it is n08)",
				Seed:   103,
				Series: []Series{gap, tonight, step},
				Expect: []expect{
					{Figure: "latency_s.A>B p50", Judged: true},
					{Figure: "network_failures.tolerated"},
					{Figure: "latency_s.B>A p50", Judged: true, Moved: true, Regression: true, SinceRevision: "r10", Before: "n08", NightsMoved: 3},
				},
			}
		},
		"effect.json": func() seriesFile {
			g := gen{rand.New(rand.NewPCG(106, 0))}
			tiny := latency(func(n int) float64 { return 0.03 * float64(n-1) }) // +0.3% of the ~10.2 ms median
			drop := func(n int) float64 { return map[bool]float64{true: 30, false: 100}[n == 2] }
			return seriesFile{
				About: "two nights of 30,000 samples, the second's latency +0.03 ms (+0.3%): significant, below the default effect of 5%; a count 100 → 30 a night (−70%): flagged",
				Seed:  106,
				Series: []Series{
					g.sampleSeries("endurance", "latency_s.A>B p50", Quantile, 0.5, 2, 30000, tiny),
					g.sampleSeries("endurance", "latency_s.A>B", Distribution, 0, 2, 30000, tiny),
					g.countSeries("endurance", "network_failures.tolerated", 2, drop),
				},
				Expect: []expect{
					{Figure: "latency_s.A>B p50", Judged: true, WithinEffect: true},
					{Figure: "latency_s.A>B", Judged: true, WithinEffect: true},
					{Figure: "network_failures.tolerated", Judged: true, Moved: true, Regression: true, SinceRevision: "r02", NightsMoved: 1},
				},
			}
		},
		"drift.json": func() seriesFile {
			g := gen{rand.New(rand.NewPCG(104, 0))}
			drift := func(n int) float64 { return 0.04 * float64(max(0, n-6)) }
			return seriesFile{
				About: "20 nights; the median latency drifts up 0.04 ms a night from night 7 on (0.13 of the jitter's spread a night, 0.4% of the median): at the latest night +1.4% over the last seven, significant but within the default effect of 5%",
				Seed:  104,
				Series: []Series{
					g.sampleSeries("three-agents", "latency_s.A>B p50", Quantile, 0.5, 20, 150, latency(drift)),
				},
				Expect: []expect{{Figure: "latency_s.A>B p50", Judged: true, WithinEffect: true}},
			}
		},
	}
}

var (
	numberList = regexp.MustCompile(`\[[-0-9.e,\s]+\]`)
	space      = regexp.MustCompile(`\s+`)
)

func TestRewriteTestdata(t *testing.T) {
	if !*rewrite {
		t.Skip("without -rewrite the testdata files are read, not written")
	}
	for name, f := range testdataFiles() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // "A>B" as written
		enc.SetIndent("", "  ")
		if err := enc.Encode(f()); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		// One night's samples a line, not one number a line.
		b = numberList.ReplaceAllFunc(b, func(m []byte) []byte { return space.ReplaceAll(m, nil) })
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
