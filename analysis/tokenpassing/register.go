package tokenpassing

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/protocols/tokenpassing"
)

// The checks of token passing: requirements (i)–(iv) of 002 §2, liveness,
// fairness and agents, and the analysis that derives what they judge. Duplication
// runs first, as it always has: the loss checker reads the holds it does
// not change.
func init() {
	analysis.Register(analysis.Plugin{Protocol: tokenpassing.Name, Analysis: loader{}, Samples: readSamples, Checkers: []analysis.NamedChecker{
		{Name: "duplication", Checker: check(func(p *part) analysis.Requirement {
			p.f.Duplications = duplication(p.hs)
			return checkDuplication(p.hs, p.f.Duplications, p.b)
		})},
		{Name: "loss", Checker: check(func(p *part) analysis.Requirement {
			var r analysis.Requirement
			r, p.losses = checkLoss(p.sum(), p.h, p.hs, p.cf, p.exp, p.paper, p.b)
			return p.needsSchedule(r, "a loss is explained by a crash of the schedule")
		})},
		{Name: "latency", Checker: check(func(p *part) analysis.Requirement {
			p.lat = latencies(p.sum(), p.h)
			return checkLatency(p.sum(), p.topo, p.exp, p.lat, p.b)
		})},
		{Name: "validation", Checker: check(func(p *part) analysis.Requirement {
			return checkValidation(p.sum(), p.h, p.cf, p.b)
		})},
		{Name: "liveness", Checker: check(func(p *part) analysis.Requirement {
			return p.needsSchedule(checkLiveness(p.sum(), p.h, p.exp, p.losses, p.paper, p.b), "outages and agents down excuse a stall and cut the phases")
		})},
		{Name: "fairness", Checker: check(func(p *part) analysis.Requirement {
			return p.needsSchedule(checkFairness(p.sum(), p.h, p.exp), "crashes, outages and joins cut the phases and say who is live")
		})},
		{Name: "agents", Checker: check(func(p *part) analysis.Requirement { return checkAgents(p.h, p.exp, p.info.Status) })},
	}})
}

// check adapts a checker of token passing's part; a context without it
// (no analysis loaded) has nothing to judge.
func check(f func(p *part) analysis.Requirement) analysis.Checker {
	return analysis.CheckerFunc(func(c *analysis.Context) analysis.Requirement {
		p, ok := c.Part().(*part)
		if !ok {
			return analysis.Unjudged("token passing's history was not read")
		}
		p.s = c.Summary()
		return f(p)
	})
}

// needsSchedule is r, not judged when the harness's log is damaged: the
// check needs the schedule's whole record (why), and what it found in the
// part that was read is kept in the detail.
func (p *part) needsSchedule(r analysis.Requirement, why string) analysis.Requirement {
	d := p.h.harnessDamage
	if d == nil {
		return r
	}
	return analysis.Unjudged(fmt.Sprintf("%s: the harness's log is damaged, and %s: the crashes and outages after line %d are unknown; what the logs show: %s %s",
		d, why, d.line-1, r.Verdict, r.Detail))
}

// loader is token passing's analysis.Analysis.
type loader struct{}

var _ analysis.DamageAware = loader{}

// JudgesDamagedHarnessLog: a damaged harness's log fails the agents check,
// and loss, liveness and fairness, which need the schedule's crashes and
// outages, are not judged (history.harnessDamage).
func (loader) JudgesDamagedHarnessLog() {}

// Load reads the agents' logs into a history and the capture's facts.
func (loader) Load(c *analysis.Context) (analysis.Part, error) {
	// The capture and the logs are read at once, on two cores: each takes
	// about 10 CPU s of a 20-day run's analysis. Instance
	// names map to logical names by the topology alone.
	var cf *captureFacts
	var cerr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		cf, cerr = readCapture(c.Dir(), c.Topology(), newHistory(c.Topology().Agents).logical)
	}()
	h, err := readLogs(c.Dir(), c.Topology())
	<-read
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return newPart(c, h, cf, &bundler{dir: c.Dir(), h: h, topo: c.Topology()}), nil
}

// part is token passing's part of one run's analysis: what its checkers
// judge (the history, its holds and paper times, the capture's facts),
// what they derive for the ones after them, and the figures.
type part struct {
	info  results.RunInfo
	topo  results.Topology
	exp   *experiments.Experiment
	h     *history
	cf    *captureFacts
	b     *bundler // nil: no failure bundles
	hs    []hold
	paper map[int]time.Duration
	f     *Figures
	s     *analysis.Summary
	// Set by the checkers that derive them, for the ones after.
	lat    map[string][]float64
	losses []Loss
}

var _ analysis.Part = (*part)(nil)

func newPart(c *analysis.Context, h *history, cf *captureFacts, b *bundler) *part {
	h.threeWay = threeWayAgents(c.Experiment())
	return &part{info: c.Info(), topo: c.Topology(), exp: c.Experiment(), h: h, cf: cf, b: b, hs: h.holds(), paper: h.paperTimes(c.Info()),
		f: &Figures{Rejections: map[string]int{}}, s: c.Summary()}
}

func (p *part) sum() *summary { return &summary{p.s, p.f} }

// Frame names the endurance run and requirements (i)–(iv).
func (p *part) Frame() analysis.Frame {
	return analysis.Frame{
		Title:   "Endurance report",
		Checks:  "requirements of 002 §2, liveness, fairness, agents",
		AllPass: "requirements (i)–(iv) of 002 §2, liveness, fairness and the agents' processes",
		Order:   []string{"loss", "duplication", "latency", "validation", "liveness", "fairness", "agents"},
		Labels: map[string]string{"loss": "(i) loss", "duplication": "(ii) duplication", "latency": "(iii) latency", "validation": "(iv) validation",
			"liveness": "liveness", "fairness": "fairness", "agents": "agents"},
		Suite: "tokenbed endurance",
	}
}

// Figures are token passing's figures of summary.json.
func (p *part) Figures() any { return p.f }

// Begin notes what reading the logs and the capture found wrong, counts
// hits and return times, and warns of agents' clocks measured further
// apart than their max_clock_skew (clock.go).
func (p *part) Begin(c *analysis.Context) {
	h, cf := p.h, p.cf
	for _, n := range h.parseErr {
		c.Note("%s", n)
	}
	if cf.truncated != "" {
		c.Note("capture: %s", cf.truncated)
	}
	for _, n := range cf.keyErrs {
		c.Note("%s", n)
	}
	for _, inst := range h.instances() {
		if a := h.agents[inst]; len(a.seqGaps) > 0 {
			c.Note("%s: the event log has a gap in its sequence numbers within one process lifetime (%s): lines were lost",
				a.instance, strings.Join(a.seqGaps, ", "))
		}
	}
	p.f.Agents = agentFigures(h, p.paper)
	var warn []string
	p.f.Clocks, warn = clockDifferences(h, p.exp)
	for _, w := range warn {
		c.Note("%s", w)
	}
}

// Finish counts the network failures tolerated, and the outages.
func (p *part) Finish(c *analysis.Context) {
	for _, f := range p.h.failures() {
		p.f.Failures.Tolerated++
		if f.DetectedBy == "commit_timeout" {
			p.f.Failures.CommitTimeout++
		} else {
			p.f.Failures.AckTimeout++
		}
	}
	// One outage of both directions logs two starts, for A>C and C>A, at
	// the same moment and with the same detail: count outages, not
	// directions.
	outages := map[string]bool{}
	for _, e := range p.h.harness {
		if e.Kind == eventlog.OutageStart {
			ends := strings.SplitN(e.Link, ">", 2)
			slices.Sort(ends)
			outages[fmt.Sprintf("%s|%s|%d", e.Detail, strings.Join(ends, "-"), e.MonoNS/1e8)] = true
		}
	}
	p.f.Outages = len(outages)
}

// Sections draws the plots and writes token passing's sections.
func (p *part) Sections(c *analysis.Context) (string, error) {
	s := p.sum()
	plots, note, err := writePlots(c.Dir(), s, p.h, p.hs, p.paper, p.lat)
	return sections(s, p.exp, plots, note), err
}
