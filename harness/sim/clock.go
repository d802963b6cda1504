package sim

import (
	"net/netip"
	"time"

	"tokenbed/agent/clock"
	"tokenbed/agent/eventlog"
)

// Skewed runs p on a local clock that departs from virtual time by s
// (agent/clock), as agent/driver runs a node on one that departs from the
// host's: p reads the local clock, its deadlines are turned back into
// virtual time, and its events, logged at virtual time, carry the local
// reading in local_ns. The clock is anchored at Start, as the driver's is
// at Run: a restarted process starts from the offset again.
func Skewed(p Process, s clock.Skew) Process {
	if s == (clock.Skew{}) {
		return p
	}
	return &skewed{p: p, s: s}
}

type skewed struct {
	p   Process
	s   clock.Skew
	clk clock.Clock
}

func (k *skewed) out(now time.Time, o Output) Output {
	eventlog.SetLocal(o.Events, now, k.clk.Local(now))
	return o
}

func (k *skewed) Start(now time.Time) Output {
	k.clk = k.s.At(now)
	return k.out(now, k.p.Start(k.clk.Local(now)))
}

func (k *skewed) Receive(now time.Time, from netip.AddrPort, data []byte) Output {
	return k.out(now, k.p.Receive(k.clk.Local(now), from, data))
}

func (k *skewed) Tick(now time.Time) Output { return k.out(now, k.p.Tick(k.clk.Local(now))) }

func (k *skewed) Deadline() (time.Time, bool) {
	d, ok := k.p.Deadline()
	if !ok {
		return d, false
	}
	return k.clk.Ref(d), true
}

func (k *skewed) Stop(now time.Time, reason string) Output {
	return k.out(now, k.p.Stop(k.clk.Local(now), reason))
}
