package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"tokenbed/agent/circulation/wandering004"
	"tokenbed/internal/strictyaml"
)

// Seed 004 with its own passing protocol (§4: Move, Ack, Commit; both
// timeouts Δskip), beside the 4-way runs of scenarios(). 004 §6 says its
// simulator "takes into account token loss" but not at which rate; §4
// says a token is lost only when the commitment is lost, and calls that
// loss "an infrequent event" (the Move's loss "rather frequent", the
// Ack's "far less frequent"). A per-datagram loss rate p loses about a
// share p of the passes' Commits, so the token about every 1/(p·passes
// per time unit): at N = 300 a pass comes every 2.4 time units (our
// 4-way runs: 0.42 passes per time unit), so p = 10^-4 loses it about
// every 24,000 time units, the length of 004's own N = 300 transients
// (Table 5: median near 40,000), and p = 10^-5 about every 240,000
// (four losses in a 10^6 run). 004 gives no figure to choose between
// them, so both run (the full form); the short one runs 10^-4.
const (
	// lossP4 and lossP5: per-datagram loss 10^-4 and 10^-5 on every
	// direction, over the 1 ms delay of Profile.
	lossP4 = "delay 1ms loss 0.01%"
	lossP5 = "delay 1ms loss 0.001%"
	// passing3way is 004 §4's exchange: the sender waits move_timeout
	// for the Ack, the receiver ack_timeout for the Commit, both Δskip
	// (1, Table 2: "for convenience, they are set to ∆skip").
	passing3way = "{exchange: 3way, move_timeout: 1s, ack_timeout: 1s}"
	// drift004: §5.2, "a drift of 10^-4, which is typical of a low cost
	// crystal clock, is adequate": each agent's clock drifts by a rate
	// drawn in [−10^-4, 10^-4].
	drift004 = 1e-4
	// sec004fixed is Fig. 1's algorithm: Δgen fixed at Δmax (K1 = 1;
	// Δgen − K2(Δgen − Δmax) then stays Δmax). §5.1 shows Fig. 1 to
	// motivate the adaptive rule introduced after it.
	sec004fixed = "{op: 4s, skip: 1s, min: 600s, k1: 1}"
)

// scenarios004 are 004 Tables 3–5, Fig. 1 and §6 with 004's own
// protocol. Names: t3-/t5- as the 4-way runs (so -scale004 and
// -transients apply), then the exchange and the loss rate.
func scenarios004() []Scenario {
	var s []Scenario
	for _, n := range []int{150, 300} {
		seed := uint64(43) // the 4-way runs' seeds: 43 at N = 150, 44 at 300
		if n == 300 {
			seed = 44
		}
		s = append(s,
			Scenario{Name: fmt.Sprintf("t3-3way-p4-n%d", n), Role: "wandering-004", Section: sec004, N: n, Span: 1000 * k * time.Second, Seed: seed,
				Profile: lossP4, Passing: passing3way, Drift: drift004},
			Scenario{Name: fmt.Sprintf("t3-3way-p5-n%d", n), Role: "wandering-004", Section: sec004, N: n, Span: 1000 * k * time.Second, Seed: seed,
				Profile: lossP5, Passing: passing3way, Drift: drift004},
			// The control: 002's 4-way exchange at the same loss rate, which
			// retransmits a lost Commit instead of losing the token.
			Scenario{Name: fmt.Sprintf("t3-4way-p4-n%d", n), Role: "wandering-004", Section: sec004, N: n, Span: 1000 * k * time.Second, Seed: seed,
				Profile: lossP4, Drift: drift004},
			// Table 5 and §6's stabilization figures: one injected loss at a
			// time, as the 4-way t5 runs, on the 3-way exchange at 10^-5
			// (its own rare losses then seldom fall in a transient).
			Scenario{Name: fmt.Sprintf("t5-3way-p5-n%d", n), Role: "wandering-004", Section: sec004, N: n, Seed: seed + 2,
				Transients: 100, Settle: 10 * k * time.Second, Profile: lossP5, Passing: passing3way, Drift: drift004},
		)
	}
	// Fig. 1 (N = 300): one loss after 10^4 stable time units, Δgen fixed
	// (the reading we chose: the figure before §5.1's adaptive rule) and,
	// the same seed, adaptive (the other reading).
	s = append(s,
		Scenario{Name: "f1-3way-fixed-n300", Role: "wandering-004", Section: sec004fixed, N: 300, Seed: 47,
			Transients: 1, Settle: 10 * k * time.Second, Passing: passing3way, Drift: drift004},
		Scenario{Name: "f1-3way-adaptive-n300", Role: "wandering-004", Section: sec004, N: 300, Seed: 47,
			Transients: 1, Settle: 10 * k * time.Second, Passing: passing3way, Drift: drift004},
	)
	return s
}

// profile is the scenario's netem profile.
func (s Scenario) profile() string {
	if s.Profile != "" {
		return s.Profile
	}
	return Profile
}

// clockYAML is agent i's clock field in the experiment file: a drift
// drawn in [−Drift, Drift] from the scenario's seed (one stream per
// agent, so adding agents changes no other agent's clock).
func (s Scenario) clockYAML(i int) string {
	if s.Drift == 0 {
		return ""
	}
	r := rand.New(rand.NewPCG(s.Seed, 0xc10c+uint64(i)))
	return fmt.Sprintf(", clock: {drift: %.3g}", s.Drift*(2*r.Float64()-1))
}

// kload is 004 §3's k_load = Δop·N/Δmin for a wandering-004 run (0
// otherwise), from the section as the agents resolve it.
func (s Scenario) kload() float64 {
	if s.Role != wandering004.Role {
		return 0
	}
	var sec wandering004.Section
	if _, err := strictyaml.Decode(s.Name, []byte(s.Section), &sec); err != nil {
		return 0
	}
	c := wandering004.Config{Op: sec.Op, N: sec.N, Min: sec.Min}
	if c.Op == 0 {
		c.Op = 4 * time.Second
	}
	if c.Min == 0 && sec.N == 0 {
		c.Min = 600 * time.Second
	}
	c = c.WithDefaults()
	return float64(c.Op) * float64(s.N) / float64(c.Min)
}
