package results

import (
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
type PaperClock struct {
	Scale     float64
	StartWall int64 // ns: the replica's paper time 0
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
			c.holdNS += max(e.WallNS-s, 0)
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
			c.holdNS += max(wall-s, 0)
			delete(c.holding, k)
		}
	}
}

// At returns the paper time at wall (ns), counting holds in progress.
func (c *PaperClock) At(wall int64) time.Duration {
	hold := c.holdNS
	for _, s := range c.holding {
		hold += max(wall-s, 0)
	}
	elapsed := wall - c.StartWall
	return time.Duration(float64(hold)*c.Scale + float64(elapsed-hold))
}
