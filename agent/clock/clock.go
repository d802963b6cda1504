// Package clock is an agent's local clock as a transform of the
// reference time: an offset and a constant drift rate. Seed 003's agents
// have clocks that are "loosely synchronized" (§2): their protocol
// machines read such a clock (token timestamps, line 30 of Fig. 1; the
// sandwich rule's comparisons, line 12; the lengths of their timers),
// while the event log keeps the reference time so that records of
// different agents stay comparable (docs/reference/event-log.md,
// local_ns). The driver (agent/driver) and the simulator (harness/sim)
// apply the same transform, one to the host's clock, the other to
// virtual time.
package clock

import (
	"fmt"
	"math"
	"time"
)

// MaxDrift bounds |Drift|: a clock that runs 10% fast or slow is broken,
// not loosely synchronized.
const MaxDrift = 0.1

// Skew is how a local clock departs from the reference: at the origin it
// reads Offset ahead (negative: behind), and it then runs at 1 + Drift
// times the reference rate (Drift 1e-4 is 100 ppm fast).
type Skew struct {
	Offset time.Duration `yaml:"offset"`
	Drift  float64       `yaml:"drift"`
}

// Problem returns the invalid field's name and what is wrong with it,
// or two empty strings: for callers that locate the field themselves.
func (s Skew) Problem() (field, msg string) {
	if math.IsNaN(s.Drift) || math.Abs(s.Drift) >= MaxDrift {
		return "drift", fmt.Sprintf("%v: want |drift| < %v (a dimensionless rate: 1e-4 is 100 ppm)", s.Drift, MaxDrift)
	}
	return "", ""
}

// Validate names the invalid field.
func (s Skew) Validate() error {
	if f, msg := s.Problem(); f != "" {
		return fmt.Errorf("%s: %s", f, msg)
	}
	return nil
}

// Scaled is s in compressed time: the offset divided by k like the
// protocol's durations, so that it keeps its relation to them; a drift
// is a rate and stays.
func (s Skew) Scaled(k float64) Skew {
	return Skew{Offset: time.Duration(float64(s.Offset) / k), Drift: s.Drift}
}

// Clock is a Skew anchored at an origin on the reference clock: local =
// origin + Offset + (1 + Drift)·(ref − origin). The zero Skew is the
// reference itself.
type Clock struct {
	Skew
	Origin time.Time
}

// At anchors s at origin: the agent's start, when its clock reads Offset
// ahead. A restarted agent's clock starts from Offset again, as a host
// whose clock is stepped at boot.
func (s Skew) At(origin time.Time) Clock { return Clock{Skew: s, Origin: origin} }

// Local is the local reading at reference time ref.
func (c Clock) Local(ref time.Time) time.Time {
	return ref.Add(c.Offset + time.Duration(c.Drift*float64(ref.Sub(c.Origin))))
}

// Ref is the earliest reference time at which the local clock reads at
// least local: a timer set for local time fires there, never before it
// is due on the agent's own clock.
func (c Clock) Ref(local time.Time) time.Time {
	r := c.Origin.Add(time.Duration(float64(local.Sub(c.Origin)-c.Offset) / (1 + c.Drift)))
	// Rounding may leave r a few ns early (or late): step to the first
	// reference nanosecond whose reading is not before local.
	for c.Local(r).Before(local) {
		r = r.Add(1)
	}
	for p := r.Add(-1); !c.Local(p).Before(local); p = r.Add(-1) {
		r = p
	}
	return r
}
