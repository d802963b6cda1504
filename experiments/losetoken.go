package experiments

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Loss event spacings of a lose-token step.
const (
	// LossExponential: a Poisson process, exponential gaps of mean every.
	// The default: 003's Table 1 gives γ_loss = 10^4 s as the "mean time
	// between packet loss events", a γ like γ_generate's, which Fig. 1
	// draws at random.
	LossExponential = "exponential"
	// LossPeriodic: one event every `every`, as §3's "we injected token
	// loss events every 10^4 seconds" also reads.
	LossPeriodic = "periodic"
)

// loseToken resolves a lose-token entry into one step per loss event in
// (at, until), until defaulting to the end of the run: periodic at at +
// k·every, or exponential gaps of mean every, drawn from a source of the
// experiment's seed and the entry's index (adding an entry changes no
// other entry's draws). A loss event makes the holder of a token lose
// the next token it passes, in transit (agent/node LoseNextPass).
func (rv *resolver) loseToken(i int, path string, s StepSpec) {
	f, yf, e := rv.f, rv.yf, rv.e
	if s.Action != ActLoseToken {
		yf.Errorf(path+".every", "every and distribution are for lose-token steps, not %s", s.Action)
		return
	}
	if !slices.Contains(e.Targets, "holder") {
		yf.Errorf(path+".action", "lose-token needs a protocol whose tokens have a holder (token passing)")
	}
	if s.Every <= 0 {
		yf.Errorf(path+".every", "lose-token needs a positive mean time between loss events (003 Table 1: 10000s)")
	}
	dist := s.Distribution
	switch dist {
	case "":
		dist = LossExponential
	case LossExponential, LossPeriodic:
	default:
		yf.Errorf(path+".distribution", "%q: want %s (the default) or %s", s.Distribution, LossExponential, LossPeriodic)
	}
	if s.Agent != "" || s.Link != "" || len(s.Links) > 0 || s.Count != 0 || s.For != 0 {
		yf.Errorf(path+".action", "lose-token takes at, every, distribution and until only: it loses the next token passed, whoever passes it")
	}
	until := s.Until
	if until == 0 {
		until = f.Duration
	}
	if until <= s.At || until > f.Duration {
		yf.Errorf(path+".until", "%v: must be after at and within the run", until)
	}
	if s.Every <= 0 || yf.Err() != nil {
		return
	}
	rnd := rand.New(rand.NewPCG(f.Seed, 0x1055_0000+uint64(i)))
	for t := s.At; ; {
		gap := s.Every
		if dist == LossExponential {
			gap = time.Duration(rnd.ExpFloat64() * float64(s.Every))
		}
		if t += gap; t >= until {
			return
		}
		e.Schedule = append(e.Schedule, Step{At: t, Action: ActLoseToken, Index: i})
	}
}
