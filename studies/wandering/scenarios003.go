package main

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Seed 003's runs (§3, Table 1): 10^5 s, N_max 300, Δop 4 s, Δskip
// 0.1 s (Δmin 600 s and γ 180,000 s from lines 2–3), a token loss event
// every 10^4 s. Each variant is a policy section, a loss model and a
// clock model; the scenario name says which (f3-: as written; f3crash-,
// f3start-, f3sync-, f3looser-: one reading changed at N = 300).
const (
	// Line 25 as written: lastaccess is set after execute(A) returns.
	sec003 = "{op: 4s, skip: 100ms, nmax: 300, lastaccess: end}"
	// The earlier reading: lastaccess set when A starts.
	sec003start = "{op: 4s, skip: 100ms, nmax: 300, lastaccess: start}"
	base003     = "{op: 4s, rule: \"003\"}"
)

// lossEvery003 is Table 1's γ_loss, "mean time between packet loss
// events": the mean of an exponential interval (losses from network
// unreliability are memoryless, and Table 1 names it a mean, as it does
// γ_generate, which line 8 draws from an exponential). §3's "every 10^4
// seconds" is read as that mean.
const lossEvery003 = 10 * k * time.Second

// Loss models of a scenario.
const (
	// LossTransit: at each loss event the next token passed is lost in
	// transit (the sender lets it go, the receiver never holds it): 003's
	// "token loss events" from "network unreliability" (§3).
	LossTransit = "transit"
	// LossCrash: the holder crashes and restarts at once, losing the
	// token with its history and last access (a second, named model; the
	// one the study used before 003's own was built).
	LossCrash = "crash"
)

// Clocks is how far each agent's clock is from the reference: offsets
// uniform in [−Offset, +Offset], drifts uniform in [−Drift, +Drift],
// drawn from the scenario's seed. The zero value is one clock for all.
type Clocks struct {
	Offset time.Duration
	Drift  float64
}

// 003 §2 says only that the agents' clocks are "loosely synchronized".
// 004 §5.2 gives what is adequate: a relative drift of 10^-4 ("typical of
// a low cost crystal clock") and an accuracy "small compared with Δmax"
// which §7 puts "in the range of the minutes". looseClocks takes that
// drift and offsets a tenth of that range (±30 s, a spread of a minute,
// a twentieth of Δmin): loose, yet within what 004 calls adequate.
// looserClocks is far outside it: offsets up to ±1500 s (2.5Δmin),
// beyond the token's return time (about 2Δmin) and 004's minutes, so
// that a token's timestamp says little about when it was made; the
// spread with the drifts stays below the agents' largest max_clock_skew
// (1 h), which the replay rule of 002 needs (skew).
var (
	looseClocks  = Clocks{Offset: 30 * time.Second, Drift: 1e-4}
	looserClocks = Clocks{Offset: 1500 * time.Second, Drift: 1e-4}
)

// scenarios003 are the runs behind 003 Figs. 2–5: the baseline, the
// Wandering Token as written for N = 210 … 360 (70% to 120% of N_max),
// and at N = 300 each reading changed alone.
func scenarios003() []Scenario {
	s := []Scenario{
		{Name: "f2-baseline-n300", Role: "baseline", Section: base003, N: 300, Span: 100 * k * time.Second, Seed: 31},
	}
	for i, n := range []int{210, 240, 270, 300, 330, 360} {
		s = append(s, Scenario{Name: fmt.Sprintf("f3-wandering-n%d", n), Role: "wandering", Section: sec003, N: n,
			Span: 100 * k * time.Second, Seed: uint64(32 + i), LossEvery: lossEvery003, Loss: LossTransit,
			LossExponential: true, Clocks: looseClocks})
	}
	// N = 300 with one reading changed, the same seed as f3-wandering-n300.
	n300 := func(name, section, loss string, exp bool, c Clocks) Scenario {
		return Scenario{Name: name, Role: "wandering", Section: section, N: 300, Span: 100 * k * time.Second, Seed: 35,
			LossEvery: lossEvery003, Loss: loss, LossExponential: exp, Clocks: c}
	}
	s = append(s,
		// The holder-crash model, at a fixed period as before.
		n300("f3crash-wandering-n300", sec003, LossCrash, false, looseClocks),
		n300("f3start-wandering-n300", sec003start, LossTransit, true, looseClocks),
		n300("f3sync-wandering-n300", sec003, LossTransit, true, Clocks{}),
		n300("f3looser-wandering-n300", sec003, LossTransit, true, looserClocks),
	)
	return s
}

// clock is one agent's clock: offset and drift, drawn from the
// scenario's seed (a stream of its own, so the agents' own seeds are
// unchanged).
func (s Scenario) clock(i int) (time.Duration, float64) {
	if s.Clocks == (Clocks{}) {
		return 0, 0
	}
	r := rand.New(rand.NewPCG(s.Seed, 0xc10c+uint64(i)))
	off := time.Duration((2*r.Float64() - 1) * float64(s.Clocks.Offset)).Round(time.Millisecond)
	return off, (2*r.Float64() - 1) * s.Clocks.Drift
}

// skew is the agents' max_clock_skew for s's clocks: the widest spread
// of two agents' readings, offsets plus drifts over twice the span (the
// warm-up is far shorter than the span), and a second. 002's replay
// rule refuses a datagram signed, by the sender's clock, before the
// receiver's start + max_clock_skew (docs/agent.md): a bound below the
// clocks' spread would make agents refuse each other for good.
func (s Scenario) skew() time.Duration {
	if s.Clocks == (Clocks{}) {
		return 0
	}
	d := 2*s.Clocks.Offset + time.Duration(2*s.Clocks.Drift*float64(2*s.Span))
	return d.Truncate(time.Second) + time.Second
}

// warmup is how long s runs before its measured span: after its start an
// agent is deaf for up to twice max_clock_skew (docs/agent.md), so with
// loose clocks the token stays with its generator that long at the start
// of a run. The analysis's time zero is after it.
func (s Scenario) warmup() time.Duration { return 2 * s.skew() }
