package results

import (
	"strings"
	"time"

	"tokenbed/agent/eventlog"
)

// PaperClock reconstructs paper time for one replica from its agents'
// events. Compressed time divides the application's durations (the hold of
// 10 s per visit, 002 §3.3) but not the network's: a pass still takes its
// real latency. So paper time is the wall time elapsed with every hold
// stretched back by the time scale:
//
//	paper = Σ hold_wall × time_scale + (elapsed_wall − Σ hold_wall)
//
// where a hold runs from a token_acquired to the pass_started (or release)
// that ends it. Everything else — passes, retries after a loss, outages —
// counts at real speed, as it did on the paper's Internet.
//
// Where an agent's nominal hold is known (Nominal: the configured hold in
// wall time), only that much of a hold is stretched: what a hold lasts
// beyond it is timer and scheduling latency, which the paper's agents had
// too at the same real-time size, and stretching it by the time scale
// would add a third of a second of paper time to every 10 ms hold (its
// measured overshoot in make endurance: 0.36 ms mean).
type PaperClock struct {
	Scale     float64
	StartWall int64            // ns: the replica's paper time 0
	Nominal   map[string]int64 // agent → nominal hold, wall ns (optional)
	holdNS    int64
	holding   map[string]int64 // agent + token → wall ns the hold began
}

// NewPaperClock starts a clock at startWall (ns).
func NewPaperClock(scale float64, startWall int64) *PaperClock {
	return &PaperClock{Scale: scale, StartWall: startWall, holding: map[string]int64{}}
}

// Observe feeds one event of the replica, in time order per agent.
func (c *PaperClock) Observe(e eventlog.Event) {
	k := e.Agent + "\x00" + e.Token
	switch e.Kind {
	case eventlog.TokenAcquired:
		c.holding[k] = max(e.WallNS, c.StartWall)
	case eventlog.PassStarted, eventlog.TokenReleased, eventlog.TokenDiscarded:
		if s, ok := c.holding[k]; ok {
			c.holdNS += c.stretched(e.Agent, e.WallNS-s)
			delete(c.holding, k)
		}
	case eventlog.AgentStopping:
		c.endHolds(e.Agent, e.WallNS)
	}
}

// Crash ends the holds of an agent killed at wall (its log says nothing).
func (c *PaperClock) Crash(agent string, wall int64) { c.endHolds(agent, wall) }

func (c *PaperClock) endHolds(agent string, wall int64) {
	for k, s := range c.holding {
		if len(k) > len(agent) && k[:len(agent)] == agent && k[len(agent)] == 0 {
			c.holdNS += c.stretched(agent, wall-s)
			delete(c.holding, k)
		}
	}
}

// stretched is the part of a hold of d ns by agent that the time scale
// stretches: all of it, or at most the agent's nominal hold.
func (c *PaperClock) stretched(agent string, d int64) int64 {
	d = max(d, 0)
	if n := c.Nominal[agent]; n > 0 {
		return min(d, n)
	}
	return d
}

// At returns the paper time at wall (ns), counting holds in progress.
func (c *PaperClock) At(wall int64) time.Duration {
	hold := c.holdNS
	for k, s := range c.holding {
		agent, _, _ := strings.Cut(k, "\x00")
		hold += c.stretched(agent, wall-s)
	}
	elapsed := wall - c.StartWall
	return time.Duration(float64(hold)*c.Scale + float64(elapsed-hold))
}
