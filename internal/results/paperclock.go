package results

import (
	"strings"
	"time"

	"tokenbed/agent/eventlog"
)

// PaperClock reconstructs paper time for one replica from its processes'
// events. Compressed time divides the application's durations (the hold of
// 10 s per visit, 002 §3.3) but not the network's: a message still takes
// its real latency. So paper time is the wall time elapsed with every
// interval of application time stretched back by the time scale:
//
//	paper = Σ app_wall × time_scale + (elapsed_wall − Σ app_wall)
//
// Which events begin and end application time is the protocol's to say (its
// Basis): for token passing a hold, from a token_acquired to the
// pass_started (or release) that ends it. Everything else — passes, retries
// after a loss, outages — counts at real speed, as it did on the paper's
// Internet. A process's agent_stopping (or a crash, Crash) ends its
// intervals whatever the protocol.
//
// Where a process's nominal interval is known (Nominal: its configured hold
// in wall time), only that much of an interval is stretched: what it lasts
// beyond it is timer and scheduling latency, which the paper's agents had
// too at the same real-time size, and stretching it by the time scale would
// add a third of a second of paper time to every 10 ms hold (its measured
// overshoot in make endurance: 0.36 ms mean).
type PaperClock struct {
	Scale     float64
	StartWall int64            // ns: the replica's paper time 0
	Nominal   map[string]int64 // agent → nominal interval, wall ns (optional)
	basis     Basis
	holdNS    int64
	holding   map[string]int64 // agent + key → wall ns the interval began
}

// ClockOp is what an event does to its process's application time.
type ClockOp uint8

const (
	ClockNone  ClockOp = iota
	ClockBegin         // an interval of application time begins (keyed)
	ClockEnd           // the interval of that key ends
)

// Basis classifies an event for the paper clock; key tells apart the
// intervals one process may have open at once (for token passing, the
// token). A protocol plug-in supplies it.
type Basis func(e eventlog.Event) (op ClockOp, key string)

// NewPaperClock starts a clock at startWall (ns) on the protocol's basis;
// a nil basis has no application time (paper time is wall time).
func NewPaperClock(scale float64, startWall int64, basis Basis) *PaperClock {
	if basis == nil {
		basis = func(eventlog.Event) (ClockOp, string) { return ClockNone, "" }
	}
	return &PaperClock{Scale: scale, StartWall: startWall, basis: basis, holding: map[string]int64{}}
}

// Observe feeds one event of the replica, in time order per agent.
func (c *PaperClock) Observe(e eventlog.Event) {
	if e.Kind == eventlog.AgentStopping {
		c.endHolds(e.Agent, e.WallNS)
		return
	}
	op, key := c.basis(e)
	k := e.Agent + "\x00" + key
	switch op {
	case ClockBegin:
		c.holding[k] = max(e.WallNS, c.StartWall)
	case ClockEnd:
		if s, ok := c.holding[k]; ok {
			c.holdNS += c.stretched(e.Agent, e.WallNS-s)
			delete(c.holding, k)
		}
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
