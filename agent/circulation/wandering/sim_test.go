package wandering

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/baseline"
	"tokenbed/agent/circulation/wandering/trace"
	"tokenbed/agent/wire"
)

// Seed 003 §3's simulation: N agents running a policy on trace.World
// (token passing instantaneous, as the paper takes it; one token loss
// every 10^4 s), 10^5 s simulated. It measures the share of time with k
// protected operations running at once, the paper's Fig. 2, for the
// Wandering Token and for the uncoordinated baseline of §3
// (agent/circulation/baseline, rule 003: 1200 ± 600 s between requests).

type simHost struct {
	self  string
	peers []string
	r     *rand.Rand
}

func (h *simHost) Self() string     { return h.self }
func (h *simHost) Peers() []string  { return h.peers }
func (h *simHost) Rand() *rand.Rand { return h.r }

// concurrency returns the share of [0, end) during which k intervals
// overlap, for k = 0, 1, 2, 3+.
func concurrency(ivs []trace.Interval, end float64) [4]float64 {
	type edge struct {
		t float64
		d int
	}
	var es []edge
	for _, iv := range ivs {
		es = append(es, edge{iv.From, 1}, edge{min(iv.To, end), -1})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].t < es[j].t || es[i].t == es[j].t && es[i].d < es[j].d })
	var share [4]float64
	level, last := 0, 0.0
	for _, e := range es {
		share[min(level, 3)] += e.t - last
		level += e.d
		last = e.t
	}
	share[min(level, 3)] += end - last
	for i := range share {
		share[i] /= end
	}
	return share
}

// simulate runs n agents of pols(i) for span from T0, losing a token
// every lossEvery (none if 0); agent 0 starts with a token when gen.
func simulate(n int, pol func() circulation.Policy, seed uint64, span, lossEvery time.Duration, gen bool) ([4]float64, *trace.World) {
	pols := make([]circulation.Policy, n)
	for i := range pols {
		pols[i] = pol()
	}
	w := trace.NewWorld(pols, seed)
	if lossEvery > 0 {
		w.LoseEvery(lossEvery)
	}
	if gen {
		w.Generate(0, trace.T0)
	}
	end := trace.T0.Add(span)
	w.Run(end)
	w.Close(end)
	return concurrency(w.Ops, span.Seconds()), w
}

// TestReproducesFigure2 runs the paper's case study (Table 1: N = 300,
// Δop = 4 s, Δskip = 0.1 s, Δmin = 600 s, γ = 180,000 s; 10^5 s; a token
// loss every 10^4 s).
func TestReproducesFigure2(t *testing.T) {
	cfg := Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 300}
	share, w := simulate(300, func() circulation.Policy { return New(cfg) }, 2009, 100000*time.Second, 10000*time.Second, true)
	regen := w.Generated - 1 // the first is the start's
	t.Logf("share of time with 0/1/2/3+ operations: wandering token %.3f %.3f %.3f %.4f (%d tokens lost, %d regenerations)",
		share[0], share[1], share[2], share[3], w.Lost, regen)
	// Seed 003 §3: wandering token, idle under 10%, exactly two 5%, more
	// than two 0.3%.
	if share[0] > 0.12 {
		t.Errorf("wandering token idle %.1f%% of the time, paper: under 10%%", 100*share[0])
	}
	if share[3] > 0.01 {
		t.Errorf("three or more operations at once %.2f%% of the time, paper: 0.3%%", 100*share[3])
	}
	if share[2] > 0.10 {
		t.Errorf("exactly two operations %.1f%% of the time, paper: 5%%", 100*share[2])
	}
	if regen == 0 {
		t.Error("no regeneration although tokens were lost every 10^4 s")
	}
}

// TestUncoordinatedBaseline runs seed 003 §3's reference, the project's
// baseline policy with rule 003 (each of 300 agents requests A, 4 s, at
// intervals of 1200 s + U[−600, +600]), for 10^5 s. 300 independent
// renewal processes of mean 1200 s superpose to nearly a Poisson process
// of rate 300/1200 per second, so the number of operations running at a
// random time is nearly Poisson of mean 300·4/1200 = 1 (binomial(300,
// 1/300) exactly, per agent at most one: 0.3% from Poisson): shares
// e^−1 (0.368), e^−1, e^−1/2 (0.184) and 1 − 2.5e^−1 (0.080) of the
// time for 0, 1, 2, 3+ — the paper's "idle 40%" and "more than two 8%".
// Tolerance: 0.015 on each share, 5 standard errors of a share measured
// over 10^5 s in 4 s windows (√(0.37·0.63/25000) ≈ 0.003). 004's rule
// (600 + U[0, 300] s) would give mean 1.6 and idle 0.20: it fails.
func TestUncoordinatedBaseline(t *testing.T) {
	cfg := baseline.Config{Op: 4 * time.Second, Rule: baseline.Rule003}
	share, w := simulate(300, func() circulation.Policy { return baseline.New(cfg) }, 2009, 100000*time.Second, 0, false)
	e := math.Exp(-1)
	want := [4]float64{e, e, e / 2, 1 - 2.5*e}
	t.Logf("share of time with 0/1/2/3+ operations: baseline %.3f %.3f %.3f %.4f (%d operations); Poisson(1) %.3f %.3f %.3f %.4f",
		share[0], share[1], share[2], share[3], len(w.Ops), want[0], want[1], want[2], want[3])
	for k := range share {
		if math.Abs(share[k]-want[k]) > 0.015 {
			t.Errorf("%d operations at once %.3f of the time, Poisson(1) %.3f ± 0.015", k, share[k], want[k])
		}
	}
	// 10^5 s at one request per 1200 s per agent: 25,000 operations
	// (a renewal count, within 1%).
	if n := float64(len(w.Ops)); math.Abs(n-25000) > 250 {
		t.Errorf("%v operations, want 25,000 ± 250", n)
	}
}

func TestSandwichByTimestamp(t *testing.T) {
	p := New(Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 3})
	p.Start(&simHost{self: "a", peers: []string{"b", "c"}, r: rand.New(rand.NewPCG(1, 1))}, time.Unix(0, 0))
	older, newer := wire.TokenID{Gen: 10, Origin: "x"}, wire.TokenID{Gen: 20, Origin: "y"}
	now := time.Unix(100, 0)
	step := func(tok wire.TokenID) []circulation.Action {
		acts := p.Acquired(now, tok, circulation.ByPass, "")
		now = now.Add(10 * time.Second)
		for _, a := range p.Tick(now) {
			if a.Kind == circulation.Pass {
				p.Passed(now, a.Token, a.Peer)
			}
		}
		return acts
	}
	step(newer)
	step(older)
	acts := step(newer)
	if len(acts) != 1 || acts[0].Kind != circulation.Discard || acts[0].Token != newer {
		t.Fatalf("newer, older, newer: %+v, want the newer token discarded (line 12)", acts)
	}
	if acts := step(older); len(acts) != 0 && acts[0].Kind == circulation.Discard {
		t.Fatalf("the older token was discarded")
	}
}
