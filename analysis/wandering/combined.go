package wandering

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis/resource"
	"tokenbed/internal/results"
)

// RealRun is a finished harness run of the Wandering Token with real
// agent processes and the shared resource server (make wandering-real):
// its concurrency from the agents' logs and from the server's own log
// (analysis/resource), and its intervals between successive operations of
// an agent.
type RealRun struct {
	Dir       string
	Info      results.RunInfo
	N         int // agents (the resource server not counted)
	Resource  *resource.Replica
	Ops       int
	Intervals []float64 // paper seconds: policy time, wall × time scale
	Crashes   int       // agent_started after the first, i.e. restarts
	// Quiet is the longest stretch without any operation running, and
	// QuietAt when it began (paper s from the first operation), in policy
	// time: a host too loaded to run the agents shows here.
	Quiet, QuietAt float64
	// SpanS is the first operation's start to the last one's end, in
	// policy time (the harness's paper clock ran Info.PaperSeconds).
	SpanS float64
}

// LoadReal reads a finished real run directory (run.json, topology.json,
// logs/): replica 0 only, the one the wandering-real experiments have.
func LoadReal(dir string) (*RealRun, error) {
	r := &RealRun{Dir: dir}
	if err := results.ReadJSON(dir, results.RunFile, &r.Info); err != nil {
		return nil, err
	}
	var top results.Topology
	if err := results.ReadJSON(dir, results.TopologyFile, &top); err != nil {
		return nil, err
	}
	res, err := resource.AnalyzeRun(dir)
	if err != nil {
		return nil, err
	}
	for i := range res.Replicas {
		if res.Replicas[i].Replica == 0 {
			r.Resource = &res.Replicas[i]
		}
	}
	if r.Resource == nil {
		return nil, fmt.Errorf("%s: no resource server log for replica 0", dir)
	}
	scale := r.Info.TimeScale
	if scale <= 0 {
		scale = 1
	}
	var all []resource.Interval
	for _, a := range top.Agents {
		if a.Replica != 0 {
			continue
		}
		r.N++
		evs, err := eventlog.ReadFile(filepath.Join(dir, a.Log))
		if err != nil {
			return nil, err
		}
		starts := 0
		for _, e := range evs {
			if e.Kind == eventlog.AgentStarted {
				starts++
			}
		}
		r.Crashes += max(0, starts-1)
		ops := resource.FromAgent(evs)
		slices.SortFunc(ops, func(a, b resource.Interval) int { return int(a.Start - b.Start) })
		r.Ops += len(ops)
		all = append(all, ops...)
		for i := 1; i < len(ops); i++ {
			// The agents' timers run at wall × scale (the policy's time):
			// that is the clock of Δmin and the paper's 1200 s.
			r.Intervals = append(r.Intervals, float64(ops[i].Start-ops[i-1].Start)*scale/1e9)
		}
	}
	if r.N == 0 {
		return nil, fmt.Errorf("%s: %s lists no agent in replica 0", dir, results.TopologyFile)
	}
	var ops []Op
	for _, o := range all {
		ops = append(ops, Op{Start: float64(o.Start) * scale / 1e9, End: float64(o.End) * scale / 1e9})
	}
	r.Quiet, r.QuietAt, r.SpanS = quiet(ops)
	return r, nil
}

// twin is the name of the simulated run that mirrors a real run of n
// agents (studies/wandering: the same parameters, length and seed,
// one loss at half time).
func twin(n int) string { return fmt.Sprintf("r-wandering-n%d", n) }

// Combined writes simDir/combined.md (and plots/combined_*.png): for
// each real run, its concurrency (idle, 1, 2, >2) and intervals between
// successive operations beside the paper's claims (003 §3), the
// simulated twin's and, where it was run, the 003 Fig. 3 simulation at
// the same N (a loss every 10^4 s).
func Combined(simDir string, realDirs []string) (string, error) {
	if len(realDirs) == 0 {
		return "", fmt.Errorf("combined report: no real run directory given")
	}
	c := &combined{}
	for _, d := range realDirs {
		r, err := LoadReal(d)
		if err != nil {
			return "", err
		}
		c.reals = append(c.reals, r)
	}
	slices.SortStableFunc(c.reals, func(a, b *RealRun) int { return a.N - b.N })
	var err error
	if c.sims, err = loadTwins(simDir, c.reals); err != nil {
		return "", err
	}
	c.runTable()
	c.shares()
	pc := c.intervals()
	plots := filepath.Join(simDir, "plots")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return "", err
	}
	pc.Legend.Top, pc.Legend.Left = false, false
	// After the lines (Add widens the axes): the body of the curves, not
	// the stalls' tail.
	pc.X.Min, pc.X.Max = 0, 6000
	if err := pc.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(plots, "combined_interarrival_cdf.png")); err != nil {
		return "", err
	}
	c.w("![combined_interarrival_cdf.png](plots/combined_interarrival_cdf.png)\n\n")
	c.w(combinedNotes)
	path := filepath.Join(simDir, "combined.md")
	return path, os.WriteFile(path, []byte(c.b.String()), 0o644)
}

// loadTwins loads, for every real run, the simulated runs of simDir at
// its N that exist: its twin and 003 Fig. 3's run.
func loadTwins(simDir string, reals []*RealRun) (map[string]*Run, error) {
	sims := map[string]*Run{}
	for _, r := range reals {
		for _, name := range []string{twin(r.N), fmt.Sprintf("f3-wandering-n%d", r.N)} {
			if _, done := sims[name]; done {
				continue
			}
			if _, err := os.Stat(filepath.Join(simDir, name, ManifestFile)); err != nil {
				continue
			}
			s, err := Load(filepath.Join(simDir, name))
			if err != nil {
				return nil, err
			}
			sims[name] = s
		}
	}
	return sims, nil
}

// combined is combined.md being written: one method per section, each
// over every real run.
type combined struct {
	b     strings.Builder
	reals []*RealRun      // sorted by N
	sims  map[string]*Run // the simulated runs loadTwins found, by scenario
}

func (c *combined) w(format string, a ...any) { fmt.Fprintf(&c.b, format, a...) }

// runTable is the head: what each real run was, beside its simulated twin.
func (c *combined) runTable() {
	w := c.w
	w("# The Wandering Token: paper | simulator | real agents (seed 003)\n\n")
	w("Written by `analysis/wandering` (`studies/wandering -real DIR,...`, `make wandering-compare`) from finished real runs (`make wandering-real`: `experiments/wandering-real-N.yaml`, agent processes in network namespaces, the protected operation a download from the shared resource server) and the simulated runs in this directory. The simulated twin `r-wandering-nN` has the real run's parameters, length and seed: 003's Table 1 (N_max 300, Δop 4 s, Δskip 0.1 s), 10^5 s, one loss at 50,000 s (the real holder restarts 100 s after its crash, the simulated one at once). `f3-wandering-nN` is 003 Fig. 3's run at the same N (a loss every 10^4 s), where it exists.\n\n")
	w("| real run | experiment | N | time scale | paper s | status | operations | restarts | sim twin | sim operations |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range c.reals {
		tw, ops := "not run", ""
		if s := c.sims[twin(r.N)]; s != nil {
			tw, ops = fmt.Sprintf("%s (seed %d)", s.Scenario, s.Seed), fmt.Sprint(len(s.Ops))
		}
		w("| %s | %s | %d | %g | %.0f | %s | %d | %d | %s | %s |\n", r.Dir, r.Info.Experiment, r.N, r.Info.TimeScale, r.Info.PaperSeconds, r.Info.Status, r.Ops, r.Crashes, tw, ops)
	}
	w("\n")
}

// shares is 003 Figs. 2 and 3 per real run: the share of time with 0, 1,
// 2, >2 operations at once, seen three ways (agents in wall and paper
// time, the resource server), beside the simulations at the same N.
func (c *combined) shares() {
	w := c.w
	w("## 003 Figs. 2 and 3: share of time with 0, 1, 2, >2 operations at once\n\n")
	w("Real runs three ways (analysis/resource): the agents' `op_started`/`op_finished` in wall time (which is the policies' time divided by the time scale); the same weighted in paper time (holds stretched by the scale, passes at real speed: internal/results.PaperClock); the resource server's own connect/disconnect log in wall time. The agents' and the server's views must agree within %.0f points (resource.Tolerance: the same operations seen from two processes). Sim against real: ±5 points per level is the stated tolerance (marked ✓/✗ on the paper-weighted row, the one on the simulator's clock); the paper's figures are 003 §3's text for N = 300 (idle < 10%%, two at once 5%%, more 0.3%%) and \"does not exceed 10%%\" for ≥ 2 from 70%% to 120%% of N_max.\n\n", 100*resource.Tolerance)
	shareRow := func(s [4]float64) string {
		return fmt.Sprintf("%.1f%% | %.1f%% | %.1f%% | %.2f%% | %.1f%%", 100*s[0], 100*s[1], 100*s[2], 100*s[3], 100*(s[2]+s[3]))
	}
	hist := func(h resource.Histogram) (s [4]float64) {
		for k, x := range h.Share {
			s[min(k, 3)] += x
		}
		return
	}
	for _, r := range c.reals {
		w("### N = %d (%.0f%% of N_max = 300)\n\n", r.N, 100*float64(r.N)/300)
		w("| source | idle | 1 | 2 | >2 | ≥2 |\n|---|---|---|---|---|---|\n")
		if r.N == 300 {
			w("| paper (003 §3, Fig. 2) | < 10%% | | 5%% | 0.3%% | ≤ 10%% |\n")
		} else if r.N >= 210 {
			w("| paper (003 §3, Fig. 3) | | | | | ≤ 10%% |\n")
		} else {
			w("| paper | no figure below 70%% of N_max | | | | |\n")
		}
		var twinShares *[4]float64
		for _, name := range []string{twin(r.N), fmt.Sprintf("f3-wandering-n%d", r.N)} {
			if s := c.sims[name]; s != nil {
				sh := simShares(s)
				if name == twin(r.N) {
					twinShares = &sh
				}
				w("| sim, %s (%s) | %s |\n", name, lossWords(s), shareRow(sh))
			}
		}
		pap := hist(r.Resource.Paper)
		mark := ""
		if twinShares != nil {
			mark = " ✓"
			for k := range 4 {
				if math.Abs(pap[k]-twinShares[k]) > 0.05 {
					mark = " ✗"
				}
			}
		}
		w("| real, agents' logs, paper time%s | %s |\n", mark, shareRow(pap))
		w("| real, agents' logs, wall time | %s |\n", shareRow(hist(r.Resource.Agents)))
		w("| real, resource server, wall time | %s |\n", shareRow(hist(r.Resource.Server)))
		agree := "agree"
		if r.Resource.Diff > resource.Tolerance {
			agree = "DISAGREE"
		}
		if s := c.sims[twin(r.N)]; s != nil {
			q, at, _ := quiet(s.Ops)
			w("\nLongest stretch without any operation: sim twin %.0f s (at %.0f s); real %.0f s of the agents' time (at %.0f s from the first operation; the real operations span %.0f s of the agents' time, the harness's paper clock %.0f s).\n", q, at, r.Quiet, r.QuietAt, r.SpanS, r.Info.PaperSeconds)
		}
		w("\nAgents' logs against the server: largest difference %.2f points at level %d (%s); %d operations, %d connections, %d matched; the server saw each connection %.3f ms (p50) / %.3f ms (p99) after op_started.\n\n",
			100*r.Resource.Diff, r.Resource.DiffLevel, agree, r.Resource.Ops, r.Resource.Conns, r.Resource.Matched,
			float64(r.Resource.ConnectLagNS[0])/1e6, float64(r.Resource.ConnectLagNS[1])/1e6)
	}
}

// intervals is 003 Fig. 4: the intervals between an agent's successive
// operations, real against simulated, as a table; it returns their CDF
// plot, which Combined saves.
func (c *combined) intervals() *plot.Plot {
	w := c.w
	w("## 003 Fig. 4: intervals between successive operations of an agent\n\n")
	w("Paper (§3): 80%% below 1200 s at N = 300, more than 50%% above N_max; nothing at 50%%. Real intervals are measured in the agents' own (policy) time, wall × time scale. Sim against real: the share below 1200 s within ±5 points is the stated tolerance.\n\n")
	w("| N | source | intervals | below 1200 s | median s | mean s |\n|---|---|---|---|---|---|\n")
	pc := plot.New()
	pc.Title.Text = "003 Fig. 4: intervals between successive operations, sim and real"
	pc.X.Label.Text = "interval (paper s)"
	pc.Y.Label.Text = "cumulative fraction"
	line := 0
	cdf := func(label string, xs []float64, dashed bool) {
		pts := cdfPoints(xs)
		if l, err := plotter.NewLine(pts); err == nil && len(pts) > 1 {
			l.Color = plotutil.Color(line / 2)
			if dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			pc.Add(l)
			pc.Legend.Add(label, l)
		}
		line++
	}
	for _, r := range c.reals {
		switch {
		case r.N == 300:
			w("| 300 | paper | | 80%% | | |\n")
		case r.N > 300:
			w("| %d | paper | | > 50%% | | |\n", r.N)
		}
		var twinBelow = math.NaN()
		for _, name := range []string{twin(r.N), fmt.Sprintf("f3-wandering-n%d", r.N)} {
			if s := c.sims[name]; s != nil {
				ia := s.InterArrivals()
				if name == twin(r.N) {
					twinBelow = frac(ia, 1200)
					cdf(fmt.Sprintf("sim N=%d", r.N), ia, false)
				}
				w("| %d | sim, %s | %d | %.1f%% | %.0f | %.0f |\n", r.N, name, len(ia), 100*frac(ia, 1200), median(ia), mean(ia))
			}
		}
		below := frac(r.Intervals, 1200)
		mark := ""
		if !math.IsNaN(twinBelow) {
			mark = " ✓"
			if math.Abs(below-twinBelow) > 0.05 {
				mark = " ✗"
			}
		}
		w("| %d | real (policy time) | %d | %.1f%%%s | %.0f | %.0f |\n", r.N, len(r.Intervals), 100*below, mark, median(r.Intervals), mean(r.Intervals))
		cdf(fmt.Sprintf("real N=%d", r.N), r.Intervals, true)
	}
	w("\n")
	return pc
}

// quiet returns the longest stretch of time without any of ops running,
// where it began (from the first start), and the span from the first
// start to the last end.
func quiet(ops []Op) (longest, at, span float64) {
	if len(ops) == 0 {
		return 0, 0, 0
	}
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b Op) int { return cmp.Compare(a.Start, b.Start) })
	first, end := ops[0].Start, ops[0].End
	for _, o := range ops[1:] {
		if g := o.Start - end; g > longest {
			longest, at = g, end-first
		}
		end = max(end, o.End)
	}
	return longest, at, end - first
}

func simShares(r *Run) (s [4]float64) {
	for k, t := range r.Concurrency() {
		s[min(k, 3)] += t / r.SpanS
	}
	return
}

func lossWords(r *Run) string {
	switch {
	case len(r.Losses) == 1:
		return fmt.Sprintf("one loss at %.0f s", r.Losses[0].AtS)
	case r.LossEveryS > 0:
		return fmt.Sprintf("a loss every %.0f s", r.LossEveryS)
	}
	return fmt.Sprintf("%d losses", len(r.Losses))
}

func cdfPoints(ia []float64) plotter.XYs {
	xs := slices.Clone(ia)
	slices.Sort(xs)
	pts := make(plotter.XYs, 0, 500)
	step := max(1, len(xs)/500)
	for j := 0; j < len(xs); j += step {
		pts = append(pts, plotter.XY{X: xs[j], Y: float64(j+1) / float64(len(xs))})
	}
	return pts
}

const combinedNotes = `## Why real and simulated differ

See docs/studies/wandering.md, "Paper, simulator and real agents", for the measured differences and their causes: time compression (an operation is Δop/scale of wall time, a pass is not compressed), the agents' processing under load, and the resource server's view (a connection opens after op_started and closes after op_finished).
`
