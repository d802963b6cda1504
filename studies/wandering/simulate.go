package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/analysis/wandering"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/protocol/tokenpassing"
	"tokenbed/harness/sim"
	"tokenbed/netem"
)

// Scenario is one simulated run.
type Scenario struct {
	Name string
	// Role and the agent's policy section as experiment YAML (flow style).
	Role    string
	Section string
	N       int
	Span    time.Duration
	Seed    uint64
	// LossEvery injects a token loss every LossEvery (003 §3: 10^4 s),
	// by the model Loss (LossTransit or LossCrash; empty: LossCrash), at
	// a fixed period or, with LossExponential, at exponential intervals
	// of that mean.
	LossEvery       time.Duration
	Loss            string
	LossExponential bool
	// Clocks spreads the agents' clocks (zero: one clock for all).
	Clocks Clocks
	// Transients, when > 0, injects losses one at a time: the next once
	// the token count has been exactly 1 for Settle (004 Table 5), until
	// Transients losses or Span.
	Transients int
	Settle     time.Duration
	// WallLimit, when > 0, ends the simulation after this much wall time
	// (checked every 10^4 s simulated, and between transients): a full-length
	// run that cannot finish here still reports what it simulated, with
	// manifest.json's cut_short set. The events up to the cut do not
	// depend on it; where the cut falls does.
	WallLimit time.Duration
	// Profile is the netem profile of every direction ("": Profile);
	// Passing the agents' passing section (flow YAML, "": the default
	// 4-way exchange); Drift, when > 0, gives each agent a clock drift
	// drawn uniformly in [−Drift, Drift] from the seed (scenarios004.go).
	Profile string
	Passing string
	Drift   float64
}

// Profile of every direction: the paper neglects the passing's duration
// (003 §3, 004 §6); 1 ms each way keeps a pass (4 datagrams) far below
// Δskip.
const Profile = "delay 1ms"

// experimentYAML is the scenario as an experiment file: what the runner
// would load, so that the agents' configurations are the ones `harness
// run` writes.
func (s Scenario) experimentYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nseed: %d\nduration: %ds\ndefaults:\n  role: %s\n  profile: %q\n  agent:\n    %s: %s\n",
		s.Name, s.Seed, int64((s.warmup() + s.Span).Seconds()), s.Role, s.profile(), s.Role, s.Section)
	if sk := s.skew(); sk > 0 {
		fmt.Fprintf(&b, "    max_clock_skew: %v\n", sk)
	}
	if s.Passing != "" {
		fmt.Fprintf(&b, "    passing: %s\n", s.Passing)
	}
	b.WriteString("agents:\n")
	for i := range s.N {
		gen := ""
		if i == 0 {
			gen = ", generate: true"
		}
		if off, drift := s.clock(i); off != 0 || drift != 0 {
			gen += fmt.Sprintf(", clock: {offset: %v, drift: %.3g}", off, drift)
		}
		fmt.Fprintf(&b, "  - {name: %s%s%s}\n", agentName(i), gen, s.clockYAML(i))
	}
	return b.String()
}

func agentName(i int) string { return fmt.Sprintf("a%03d", i) }

func agentAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 16, byte(i / 250), byte(1 + i%250)}), 7400)
}

// Simulate runs s into dir (logs/NAME.jsonl, experiment.yaml,
// manifest.json) on the simulator (harness/sim) with the token passing
// plug-in's simulated agents: the code `agent run` runs, real
// signatures, the netem model on every direction. It returns the
// manifest.
func Simulate(s Scenario, dir string, progress func(string)) (*wandering.Manifest, error) {
	e, err := writeExperiment(s, dir)
	if err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "keys")
	procs, err := members(s, e, keys)
	if err != nil {
		return nil, err
	}
	prof, err := netem.Parse(s.profile())
	if err != nil {
		return nil, err
	}
	tr := newTracker()
	tr.maxSpike = 600 * time.Second // Δmin of both papers' runs
	w := sim.New(sim.Config{Seed: s.Seed, OnEvent: tr.observe})
	defer w.Close()
	tr.now = w.Now
	x := &simulation{s: s, progress: progress, w: w, tr: tr, procs: procs, verified: &ca.Verified{}, t0: sim.Epoch.Add(s.warmup())}
	if err := x.configure(e, dir, keys, prof); err != nil {
		return nil, err
	}
	for i := range procs {
		if err := x.start(i); err != nil {
			return nil, err
		}
	}
	x.m = &wandering.Manifest{Scenario: s.Name, Role: s.Role, Section: s.Section, N: s.N, Seed: s.Seed,
		SpanS: s.Span.Seconds(), Epoch: x.t0, Profile: s.profile(), LossEveryS: s.LossEvery.Seconds(),
		Passing: s.Passing, Drift: s.Drift, KLoad: s.kload()}
	if s.LossEvery > 0 {
		x.m.LossModel, x.m.LossExponential = cmp.Or(s.Loss, LossCrash), s.LossExponential
	}
	for i := range s.N {
		if off, drift := s.clock(i); off != 0 || drift != 0 {
			if x.m.Clocks == nil {
				x.m.Clocks = map[string]wandering.Clock{}
			}
			x.m.Clocks[agentName(i)] = wandering.Clock{OffsetS: off.Seconds(), Drift: drift}
		}
	}
	tr.lost = func(agent, tok string) {
		x.m.Losses = append(x.m.Losses, wandering.Loss{AtS: w.Now().Sub(x.t0).Seconds(), Agent: agent, Token: tok})
	}
	x.index = map[string]int{}
	for i, p := range procs {
		x.index[p.Instance] = i
	}
	end := x.t0.Add(s.Span)
	x.wall = time.Now()
	if err := w.RunUntil(x.t0); err != nil { // the warm-up
		return nil, err
	}
	switch {
	case s.Transients > 0:
		if end, err = x.runTransients(end); err != nil {
			return nil, err
		}
	case s.LossEvery > 0:
		if err := x.runLossEvery(end); err != nil {
			return nil, err
		}
	}
	if err := x.runRest(end); err != nil {
		return nil, err
	}
	for _, p := range procs {
		if w.Running(p.Instance) {
			if err := w.Stop(p.Instance, "end of run"); err != nil {
				return nil, err
			}
		}
	}
	x.report()
	st := w.Stats()
	m := x.m
	m.WallS = time.Since(x.wall).Seconds()
	m.Datagrams = st.Sent
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, wandering.ManifestFile), b, 0o644); err != nil {
		return nil, err
	}
	return m, os.RemoveAll(keys) // private keys: not results
}

// writeExperiment writes s into dir as the experiment file the runner
// would load, and parses it back: the agents' configurations are then
// the ones `harness run` writes.
func writeExperiment(s Scenario, dir string) (*experiments.Experiment, error) {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	raw := s.experimentYAML()
	if err := os.WriteFile(filepath.Join(dir, "experiment.yaml"), []byte(raw), 0o644); err != nil {
		return nil, err
	}
	return experiments.Parse(filepath.Join(dir, "experiment.yaml"), []byte(raw))
}

// members issues every agent's credentials into keys and returns the
// agents as the token passing plug-in's processes.
func members(s Scenario, e *experiments.Experiment, keys string) ([]protocol.Process, error) {
	// Credentials from the seed (as the runner's simulated runs: ca.Seeded).
	src := ca.Seeded(s.Seed, sim.Epoch, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	if err := ca.InitWith(keys, src); err != nil {
		return nil, err
	}
	procs := make([]protocol.Process, s.N)
	for i, a := range e.Agents {
		if err := ca.IssueWith(keys, a.Name, src); err != nil {
			return nil, err
		}
		// Replica 1: the token passing plug-in then starts the agent warm,
		// its peers' certificates given at start (as the runner's later
		// replicas). Cold, the first pass between two members costs a Move
		// timeout (002 §3: the unknown key is learnt from the retry), and
		// among 300 agents nearly every pass of a 10^5 s run is a first
		// contact: 0.5 s of idle resource per pass, where the papers
		// neglect the passing's duration.
		// The baseline passes nothing: it starts cold, which spares each
		// agent loading its N−1 peers' certificates (N(N−1) file reads;
		// each certificate is verified once, ca.Verified).
		replica := 1
		if s.Role == "baseline" {
			replica = 0
		}
		procs[i] = protocol.Process{Instance: a.Name, Name: a.Name, Replica: replica, Addr: agentAddr(i), Spec: a}
	}
	return procs, nil
}

// simulation is one scenario being run on the simulator: the world, the
// agents and the manifest it fills.
type simulation struct {
	s        Scenario
	progress func(string)
	w        *sim.World
	tr       *tracker
	procs    []protocol.Process
	starts   []protocol.SimStart
	index    map[string]int // agent name → its position in procs
	verified *ca.Verified
	m        *wandering.Manifest
	wall     time.Time // when the simulation started, for WallLimit
	// t0: the start of the measured span, after the warm-up (the
	// manifest's epoch: the analysis counts from it).
	t0 time.Time
}

// configure adds every agent's host, builds its configuration and sets
// prof on every direction.
func (x *simulation) configure(e *experiments.Experiment, dir, keys string, prof netem.Profile) error {
	s, w, procs := x.s, x.w, x.procs
	proto := tokenpassing.Protocol{}
	var err error
	// Each agent's configuration, kept in memory as the runner's
	// simulated runs keep it (protocol.SimConfigured): in files, n agents
	// would write and parse n(n-1) peer entries.
	x.starts = make([]protocol.SimStart, s.N)
	certs := make(map[string]string, s.N) // one path string per member, shared
	for _, p := range procs {
		certs[p.Instance] = filepath.Join(keys, ca.CertFile(p.Instance))
	}
	for i, p := range procs {
		if _, err := w.AddHost(p.Instance, p.Addr.Addr()); err != nil {
			return err
		}
		peers := make([]protocol.Process, 0, s.N-1)
		for j, o := range procs {
			if j != i {
				peers = append(peers, o)
			}
		}
		// Each agent's seed split from the run's, as the runner splits it.
		x.starts[i], err = proto.SimConfig(e, p, peers, protocol.Files{CACert: filepath.Join(keys, ca.CACertFile), Credentials: keys,
			Log:      filepath.Join(dir, "logs", p.Instance+".jsonl"),
			PeerCert: func(inst string) string { return certs[inst] }}, s.Seed*1_000_003+uint64(i)+1)
		if err != nil {
			return err
		}
	}
	for i := range procs {
		for j := range procs {
			if i != j {
				if err := w.SetProfile(procs[i].Addr.Addr(), procs[j].Addr.Addr(), prof); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// start starts agent i. The agents share their certificate
// verifications (ca.Verified), as in the runner's simulated runs.
func (x *simulation) start(i int) error {
	p, logPath, err := x.starts[i](protocol.Start{Verified: x.verified}, x.w.Now())
	if err != nil {
		return err
	}
	return x.w.Start(x.procs[i].Instance, p, logPath)
}

// lose crashes a holder of a token and restarts it at once: the token
// it held is lost (with its policy state: history, last access).
func (x *simulation) lose() error {
	s, w, tr, m := x.s, x.w, x.tr, x.m
	for w.Now().Before(x.t0.Add(s.Span)) {
		if agent, tok, ok := tr.holder(); ok {
			if err := w.Crash(agent); err != nil {
				return err
			}
			tr.crashed(agent, w.Now())
			m.Losses = append(m.Losses, wandering.Loss{AtS: w.Now().Sub(x.t0).Seconds(), Agent: agent, Token: tok})
			return x.start(x.index[agent])
		}
		// Every token in transit: a pass takes milliseconds.
		if err := w.RunUntil(w.Now().Add(10 * time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

// cut reports whether the wall limit has ended the run, and marks the
// manifest cut short when it has.
func (x *simulation) cut() bool {
	if x.s.WallLimit > 0 && time.Since(x.wall) >= x.s.WallLimit {
		x.m.CutShort = true
	}
	return x.m.CutShort
}

// report gives the progress line, if asked for.
func (x *simulation) report() {
	if x.progress != nil {
		s, w := x.s, x.w
		x.progress(fmt.Sprintf("%s: %.0f of %.0f s simulated, %d losses, %d tokens alive, %.0f s wall",
			s.Name, w.Now().Sub(x.t0).Seconds(), s.Span.Seconds(), len(x.m.Losses), x.tr.alive(), time.Since(x.wall).Seconds()))
	}
}

// runTransients is 004 Table 5: a loss, then wait for one token for
// Settle, until Transients losses or end. The run ends once the last
// transient has settled too: it returns that moment, the new end.
func (x *simulation) runTransients(end time.Time) (time.Time, error) {
	s, w, tr, m := x.s, x.w, x.tr, x.m
	step := time.Duration(500) * time.Second
	for w.Now().Before(end) && !x.cut() {
		if tr.stableFor(w.Now()) >= s.Settle || len(m.Losses) == 0 && w.Now().Sub(x.t0) >= s.Settle {
			if len(m.Losses) == s.Transients {
				break
			}
			if err := x.lose(); err != nil {
				return end, err
			}
			x.report()
		}
		if err := w.RunUntil(w.Now().Add(step)); err != nil {
			return end, err
		}
	}
	m.SpanS = w.Now().Sub(x.t0).Seconds()
	return w.Now(), nil
}

// runLossEvery injects a loss every LossEvery (003 §3) up to end: at a
// fixed period, or at exponential intervals of that mean drawn from a
// stream of the scenario's seed of its own.
func (x *simulation) runLossEvery(end time.Time) error {
	s, w := x.s, x.w
	r := rand.New(rand.NewPCG(s.Seed, 0x1055))
	next := func(t time.Time) time.Time {
		if s.LossExponential {
			return t.Add(time.Duration(r.ExpFloat64() * float64(s.LossEvery)))
		}
		return t.Add(s.LossEvery)
	}
	for t := next(x.t0); !t.After(end) && !x.cut(); t = next(t) {
		if err := w.RunUntil(t); err != nil {
			return err
		}
		if t.Before(end) {
			lose := x.lose
			if s.Loss == LossTransit {
				lose = x.loseInTransit
			}
			if err := lose(); err != nil {
				return err
			}
		}
		x.report()
	}
	return nil
}

// runRest runs up to end in steps of 10^4 s, for the progress line and
// the wall limit (handling events up to t in several calls is the same
// as in one).
func (x *simulation) runRest(end time.Time) error {
	s, w, m := x.s, x.w, x.m
	for w.Now().Before(end) {
		if x.cut() {
			m.SpanS = w.Now().Sub(x.t0).Seconds()
			break
		}
		// On multiples of 10^4 s from the epoch (the agents start a little
		// after it), so that the progress line comes every 10^5 s.
		t := x.t0.Add(w.Now().Sub(x.t0).Truncate(10*k*time.Second) + 10*k*time.Second)
		if t.After(end) {
			t = end
		}
		if err := w.RunUntil(t); err != nil {
			return err
		}
		if s.Transients == 0 && s.LossEvery == 0 && x.progress != nil && int64(w.Now().Sub(x.t0).Seconds())%(100*k) == 0 {
			x.report()
		}
	}
	return nil
}

// tracker follows, from the events as they are logged, who holds which
// token and how many tokens exist: where to inject a loss, and when the
// system is stable again.
type tracker struct {
	holders map[string]string // token → agent holding it
	tokens  map[string]bool   // tokens alive
	// since: start of the current stable stretch (zero: none); spike:
	// start of the current stretch with more than one token (zero: none).
	// Stable is analysis/wandering's Stabilizations rule: a token at all
	// times, more than one only in spikes shorter than maxSpike.
	since, spike time.Time
	maxSpike     time.Duration
	now          func() time.Time // the world's clock
	// lost hears of a token lost in transit (token_lost).
	lost func(agent, token string)
	// released: when each token was last passed on and not yet received.
	// On 004's 3-way exchange a lost Commit loses the token with no event
	// saying so (the receiver never acquired it); one still in transit
	// after lostAfter is gone.
	released map[string]time.Time
}

// lostAfter: a pass ends within seconds (the 3-way receiver gives up
// Δskip after its Ack, the 4-way one after its linger of 5.5 s).
const lostAfter = 30 * time.Second

func newTracker() *tracker {
	return &tracker{holders: map[string]string{}, tokens: map[string]bool{}, released: map[string]time.Time{}}
}

func (t *tracker) observe(agent string, e eventlog.Event) {
	switch e.Kind {
	case eventlog.TokenAcquired:
		delete(t.released, e.Token)
		t.holders[e.Token] = agent
		t.set(e.Token, true, e)
	case eventlog.TokenReleased:
		if t.holders[e.Token] == agent {
			delete(t.holders, e.Token)
			t.released[e.Token] = t.now()
		}
	case eventlog.TokenDiscarded:
		delete(t.released, e.Token)
		t.set(e.Token, false, e)
	case eventlog.TokenLost:
		delete(t.holders, e.Token)
		t.set(e.Token, false, e)
		if t.lost != nil {
			t.lost(agent, e.Token)
		}
	}
}

func (t *tracker) set(tok string, alive bool, e eventlog.Event) {
	before := len(t.tokens)
	if alive {
		t.tokens[tok] = true
	} else {
		delete(t.tokens, tok)
	}
	if len(t.tokens) != before || before == 0 {
		t.changed(t.now())
	}
}

func (t *tracker) changed(at time.Time) {
	switch n := len(t.tokens); {
	case n == 0:
		t.since, t.spike = time.Time{}, time.Time{}
	case n == 1:
		if !t.spike.IsZero() && at.Sub(t.spike) > t.maxSpike {
			t.since = at
		}
		t.spike = time.Time{}
		if t.since.IsZero() {
			t.since = at
		}
	default:
		if t.spike.IsZero() {
			t.spike = at
		}
		if t.since.IsZero() {
			t.since = at
		}
	}
}

// holder picks the held token with the lowest id (the oldest), for a
// loss; ok is false when every token is in transit.
func (t *tracker) holder() (agent, tok string, ok bool) {
	for k, a := range t.holders {
		if !ok || k < tok {
			agent, tok, ok = a, k, true
		}
	}
	return
}

// crashed: the agent's tokens are gone.
func (t *tracker) crashed(agent string, at time.Time) {
	for k, a := range t.holders {
		if a == agent {
			delete(t.holders, k)
			delete(t.tokens, k)
		}
	}
	t.changed(at)
}

func (t *tracker) alive() int {
	t.prune(t.now())
	return len(t.tokens)
}

// prune forgets the tokens in transit for longer than lostAfter.
func (t *tracker) prune(now time.Time) {
	for tok, at := range t.released {
		if now.Sub(at) > lostAfter {
			delete(t.released, tok)
			delete(t.tokens, tok)
			t.changed(now)
		}
	}
}

// stableFor is how long the system has been stable at now.
func (t *tracker) stableFor(now time.Time) time.Duration {
	t.prune(now)
	if t.since.IsZero() || !t.spike.IsZero() && now.Sub(t.spike) > t.maxSpike {
		return 0
	}
	return now.Sub(t.since)
}

// loseInTransit makes a holder of a token lose it in transit when it
// next passes it (003 §3's loss events; SIGUSR1, what the runner's
// lose-token step sends: agent/node LoseNextPass). The loss itself is
// the agent's token_lost, which the tracker records in the manifest.
func (x *simulation) loseInTransit() error {
	s, w, tr := x.s, x.w, x.tr
	for w.Now().Before(x.t0.Add(s.Span)) {
		if agent, _, ok := tr.holder(); ok {
			return w.Signal(agent, syscall.SIGUSR1)
		}
		// Every token in transit: a pass takes milliseconds.
		if err := w.RunUntil(w.Now().Add(10 * time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}
