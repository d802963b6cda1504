// Package wandering measures the Wandering Token (seeds 003 and 004) and
// its uncoordinated baseline from the agents' event logs: the protected
// operation's executions (op_started / op_finished), the tokens' lives
// (generated, discarded, lost) and the injected losses of the run's
// manifest. From them: the time with k operations running at once
// (concurrency: 004 Tables 1 and 3, 003 Figs. 2 and 3), the intervals
// between successive operations of an agent (004 Table 4, 003 Fig. 4),
// the number of tokens over time (003 Fig. 5) and the stabilization
// after each loss (004 Table 5). Report puts them beside the papers'
// numbers.
//
// It reads results, never runs anything: data flows one way (the runs are
// made by studies/wandering on the simulator, or by the harness).
package wandering

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"tokenbed/agent/eventlog"
)

// ManifestFile is the run's description, beside logs/.
const ManifestFile = "manifest.json"

// Loss is one injected token loss at AtS (paper seconds from the
// start): Agent, holding Token, crashed and restarted at once (the
// manifest's LossModel "crash"), or lost Token passing it on ("transit").
type Loss struct {
	AtS   float64 `json:"at_s"`
	Agent string  `json:"agent"`
	Token string  `json:"token"`
}

// Manifest says what ran.
type Manifest struct {
	Scenario   string    `json:"scenario"`
	Role       string    `json:"role"`
	Section    string    `json:"section"` // the policy's configuration, as written
	N          int       `json:"n"`
	Seed       uint64    `json:"seed"`
	SpanS      float64   `json:"span_s"`
	Epoch      time.Time `json:"epoch"`
	Profile    string    `json:"profile"`
	LossEveryS float64   `json:"loss_every_s,omitempty"`
	// LossModel: "transit" (the next token passed is lost on its way) or
	// "crash" (the holder crashes and restarts); LossExponential: the
	// intervals between losses are exponential of mean LossEveryS, not
	// fixed.
	LossModel       string `json:"loss_model,omitempty"`
	LossExponential bool   `json:"loss_exponential,omitempty"`
	// Clocks: each agent's clock offset and drift from the reference
	// (agents absent: the reference clock). The logs' times are the
	// reference's.
	Clocks map[string]Clock `json:"clocks,omitempty"`
	Losses []Loss           `json:"losses,omitempty"`
	WallS  float64          `json:"wall_s"`
	// CutShort: the wall-time limit ended the run before its span or its
	// transients (span_s is what was simulated).
	CutShort  bool   `json:"cut_short,omitempty"`
	Datagrams uint64 `json:"datagrams"`
	// Passing is the agents' passing section ("": 002's 4-way exchange),
	// Drift the bound of the agents' clock drifts (0: one clock), KLoad
	// 004 §3's k_load = Δop·N/Δmin (0: not a 004 run).
	Passing string  `json:"passing,omitempty"`
	Drift   float64 `json:"clock_drift,omitempty"`
	KLoad   float64 `json:"k_load,omitempty"`
}

// Clock is an agent's local clock: OffsetS + (1 + Drift)·reference time.
type Clock struct {
	OffsetS float64 `json:"offset_s"`
	Drift   float64 `json:"drift"`
}

// Op is one execution of the protected operation, in paper seconds.
type Op struct {
	Agent      string
	Start, End float64
}

// Life is a token's existence, in paper seconds; How it ended:
// "discarded", "lost" (an injected loss), "vanished" (not seen again,
// e.g. lost by the passing) or "alive" at the end of the run.
type Life struct {
	Token     string
	From, To  float64
	How       string
	Generated bool
}

// Run is one run's measurements.
type Run struct {
	Manifest
	Ops    []Op   // by start
	Tokens []Life // by From
	conc   []float64
}

// Load reads dir: the manifest and logs/*.jsonl. The logs are streamed,
// one event at a time: a long run's logs are gigabytes, of which only the
// operations and the tokens' first and last sightings are kept.
func Load(dir string) (*Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	r := &Run{}
	if err := json.Unmarshal(b, &r.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "logs", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	m := r.measurer()
	for _, path := range files {
		if err := m.file(path); err != nil {
			return nil, err
		}
	}
	m.finish()
	return r, nil
}

func (r *Run) sec(e eventlog.Event) float64 {
	return float64(e.WallNS-r.Epoch.UnixNano()) / 1e9
}

// measure derives the operations and the token lives from the logs, one
// slice per agent's log (what Load streams).
func (r *Run) measure(logs [][]eventlog.Event) {
	m := r.measurer()
	for _, evs := range logs {
		m.begin()
		for _, e := range evs {
			m.event(e)
		}
		m.end()
	}
	m.finish()
}

// seen is a token's first and last sighting in the logs.
type seen struct {
	from, to  float64
	how       string
	generated bool
}

// measuring is measure's state: the whole run's (crashes, losses,
// tokens), and the current log's (agent, open operations).
type measuring struct {
	r       *Run
	crashes map[string][]float64
	lost    map[string]float64
	toks    map[string]*seen
	open    map[string][]float64 // op starts by token ("" for the baseline)
	agent   string
}

func (r *Run) measurer() *measuring {
	m := &measuring{r: r, crashes: map[string][]float64{}, lost: map[string]float64{}, toks: map[string]*seen{}}
	for _, l := range r.Losses {
		if r.LossModel != "transit" { // the agent died with its operation
			m.crashes[l.Agent] = append(m.crashes[l.Agent], l.AtS)
		}
		m.lost[l.Token] = l.AtS
	}
	return m
}

// file streams one agent's log through begin, event and end.
func (m *measuring) file(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m.begin()
	if err := eventlog.Read(f, path, func(e eventlog.Event) error { m.event(e); return nil }); err != nil {
		return err
	}
	m.end()
	return nil
}

// crashEnd: an operation whose agent crashed before op_finished ends
// with the process.
func (m *measuring) crashEnd(agent string, start float64) float64 {
	for _, t := range m.crashes[agent] {
		if t >= start {
			return t
		}
	}
	return m.r.SpanS
}

func (m *measuring) begin() { m.open, m.agent = map[string][]float64{}, "" }

func (m *measuring) event(e eventlog.Event) {
	r := m.r
	m.agent = e.Agent
	agent := e.Agent
	t := r.sec(e)
	switch e.Kind {
	case eventlog.AgentStarted:
		// A restart: what was open died with the crash.
		for k, starts := range m.open {
			for _, s := range starts {
				r.Ops = append(r.Ops, Op{agent, s, m.crashEnd(agent, s)})
			}
			delete(m.open, k)
		}
	case eventlog.OpStarted:
		m.open[e.Token] = append(m.open[e.Token], t)
	case eventlog.OpFinished:
		if s := m.open[e.Token]; len(s) > 0 {
			r.Ops = append(r.Ops, Op{agent, s[0], t})
			m.open[e.Token] = s[1:]
		}
	}
	if e.Token == "" {
		return
	}
	s := m.toks[e.Token]
	if s == nil {
		s = &seen{from: t, to: t}
		m.toks[e.Token] = s
	}
	s.from, s.to = min(s.from, t), max(s.to, t)
	if e.Kind == eventlog.TokenAcquired && e.Reason == "generated" {
		s.generated = true
	}
	if e.Kind == eventlog.TokenDiscarded {
		s.how = "discarded"
	}
	if e.Kind == eventlog.TokenLost {
		s.how = "lost" // lost in transit: a lose-token step
	}
}

// end: operations still open at the end of the log.
func (m *measuring) end() {
	for _, starts := range m.open {
		for _, s := range starts {
			m.r.Ops = append(m.r.Ops, Op{m.agent, s, m.crashEnd(m.agent, s)})
		}
	}
}

// finish sorts the operations and turns the sightings into lives.
func (m *measuring) finish() {
	r := m.r
	slices.SortFunc(r.Ops, func(a, b Op) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		if a.Agent < b.Agent {
			return -1
		}
		if a.Agent > b.Agent {
			return 1
		}
		return 0
	})
	for tok, s := range m.toks {
		if !s.generated {
			continue // a token that never circulated as such (not ours to count)
		}
		l := Life{Token: tok, From: s.from, To: s.to, How: s.how, Generated: true}
		switch {
		case l.How == "discarded", l.How == "lost": // removed, or lost in transit (token_lost)
		case m.lost[tok] > 0:
			l.To, l.How = m.lost[tok], "lost"
		case r.SpanS-s.to < 100: // seen in the last 100 s: a hold is at most Δop
			l.To, l.How = r.SpanS, "alive"
		default:
			l.How = "vanished"
		}
		r.Tokens = append(r.Tokens, l)
	}
	slices.SortFunc(r.Tokens, func(a, b Life) int {
		if a.From != b.From {
			if a.From < b.From {
				return -1
			}
			return 1
		}
		if a.Token < b.Token {
			return -1
		}
		return 1
	})
	r.conc = nil
}

// Step is a step function's value V from time T on.
type Step struct {
	T float64
	V int
}

// steps turns intervals into the count of those open at each time, over
// [0, end): an interval ending at t no longer counts at t.
func steps(from, to []float64, end float64) []Step {
	type edge struct {
		t float64
		d int
	}
	es := make([]edge, 0, 2*len(from))
	for i := range from {
		if from[i] >= end || to[i] <= max(from[i], 0) { // outside [0, end), e.g. in a warm-up
			continue
		}
		es = append(es, edge{max(from[i], 0), 1}, edge{min(to[i], end), -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if a.t != b.t {
			if a.t < b.t {
				return -1
			}
			return 1
		}
		return a.d - b.d // ends before starts at the same instant
	})
	out := []Step{{0, 0}}
	v := 0
	for _, e := range es {
		v += e.d
		if last := &out[len(out)-1]; last.T == e.t {
			last.V = v
		} else {
			out = append(out, Step{e.t, v})
		}
	}
	return out
}

// durations returns, for each value v of a step function over [0, end),
// the total time it had value v.
func durations(s []Step, end float64) []float64 {
	var d []float64
	for i, st := range s {
		next := end
		if i+1 < len(s) {
			next = s[i+1].T
		}
		for len(d) <= st.V {
			d = append(d, 0)
		}
		d[st.V] += next - st.T
	}
	return d
}

// Concurrency returns the time (paper seconds) during which k operations
// ran at once, k = 0, 1, ...
func (r *Run) Concurrency() []float64 {
	// Computed once: the report asks for it row by row, and a 10^6 run
	// has hundreds of thousands of operations to sort.
	if r.conc == nil {
		r.conc = r.concurrency()
	}
	return r.conc
}

func (r *Run) concurrency() []float64 {
	from, to := make([]float64, len(r.Ops)), make([]float64, len(r.Ops))
	for i, o := range r.Ops {
		from[i], to[i] = o.Start, o.End
	}
	return durations(steps(from, to, r.SpanS), r.SpanS)
}

// InterArrivals returns the intervals between successive starts of the
// operation on each agent (paper seconds), all agents pooled.
func (r *Run) InterArrivals() []float64 {
	last := map[string]float64{}
	var out []float64
	for _, o := range r.Ops {
		if t, ok := last[o.Agent]; ok {
			out = append(out, o.Start-t)
		}
		last[o.Agent] = o.Start
	}
	return out
}

// TokenCount is the number of tokens alive over time.
func (r *Run) TokenCount() []Step {
	from, to := make([]float64, len(r.Tokens)), make([]float64, len(r.Tokens))
	for i, l := range r.Tokens {
		from[i], to[i] = l.From, l.To
	}
	return steps(from, to, r.SpanS)
}

// Stabilizations returns, for each injected loss, the time from the loss
// until the system is stable again, and how many transients did not
// settle before the next loss or the end of the run. Stable, from time T
// on (until the next loss): at least one token at all times, and more
// than one only in spikes shorter than maxSpike. Spurious tokens are
// generated and removed all the time in a stable system (003 §3: "narrow
// positive spikes"; in wandering-004 most last no longer than one pass),
// so "exactly one token" would never hold for long; a spike longer than
// maxSpike (Δmin for the reports) is part of the transient.
func (r *Run) Stabilizations(maxSpike float64) (durs []float64, unsettled int) {
	for _, t := range r.Transients(maxSpike) {
		if !t.Settled {
			unsettled++
			continue
		}
		durs = append(durs, t.End-t.At)
	}
	return durs, unsettled
}

// Transient is the stretch after an injected loss at At: until End, when
// the system is stable again (Settled), or until the next loss or the
// end of the run (not Settled).
type Transient struct {
	At, End float64
	Settled bool
}

// Transients returns one Transient per injected loss, by Stabilizations'
// rule of stability.
func (r *Run) Transients(maxSpike float64) []Transient {
	s := r.TokenCount()
	var out []Transient
	for i, l := range r.Losses {
		end := r.SpanS
		if i+1 < len(r.Losses) {
			end = r.Losses[i+1].AtS
		}
		settled, spike := -1.0, -1.0 // candidate start of stability; start of the current spike
		for j, st := range s {
			next := end
			if j+1 < len(s) {
				next = min(s[j+1].T, end)
			}
			if next <= l.AtS {
				continue
			}
			if st.T >= end {
				break
			}
			t := max(st.T, l.AtS)
			switch {
			case st.V == 0:
				settled, spike = -1, -1
			case st.V == 1:
				if spike >= 0 && t-spike > maxSpike {
					settled = t // a long spike: stability starts when it ends
				}
				spike = -1
				if settled < 0 {
					settled = t
				}
			default:
				if spike < 0 {
					spike = t
				}
				if settled < 0 {
					settled = t // a spike may begin stability: judged when it ends
				}
			}
		}
		if settled < 0 || spike >= 0 && end-spike > maxSpike {
			out = append(out, Transient{At: l.AtS, End: end})
			continue
		}
		out = append(out, Transient{At: l.AtS, End: settled, Settled: true})
	}
	return out
}
