package tokenpassing

import (
	"fmt"
	"sort"
	"time"

	"tokenbed/agent/config"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
)

// Clocks. A restarted agent refuses every datagram whose nonce is below
// its start plus S, max_clock_skew, on the assumption that members' wall
// clocks are within S of each other (agent/node, "Restarts"; 002 §3.1's
// replays). The logs can prove that assumption broken, without any bound
// on the network's delay: a datagram's nonce is its sender's wall clock
// when it signed it, and its receiver logs the datagram's receipt (its
// *_received event, with the nonce) after that, on its own wall clock. So
// nonce − the receiver's wall_ns at receipt is a lower bound on how far
// the receiver's clock was behind the sender's at that moment (plus the
// nanoseconds by which nonces are made strictly increasing). A receiver
// ahead of a sender is its datagrams the other way. The largest such
// bound per pair is the measured difference; it is exact up to the
// datagram's time in flight and the signing ahead of need, both of which
// only lower it: the check never warns of a difference that was not there,
// and may miss one smaller than a one-way trip.

// defaultMaxClockSkew is the agents' S when their configuration leaves
// max_clock_skew 0 (agent/node.DefaultMaxClockSkew; a test holds them
// equal, as analysis does not import the agent's node).
const defaultMaxClockSkew = 100 * time.Millisecond

// clockPair is a sender and a receiver, instances.
type clockPair struct{ sender, receiver string }

// clockLag is the largest lower bound seen on how far a receiver's clock
// was behind a sender's, and where.
type clockLag struct {
	ns      int64 // nonce − receiver's wall_ns at receipt
	mono    int64
	kind    eventlog.Kind
	samples int
}

// ClockDifference is, in summary.json, how far one agent's wall clock was
// measured behind another's (at least), over every datagram received.
type ClockDifference struct {
	Behind   string  `json:"behind"` // the receiver
	Sender   string  `json:"sender"`
	AtLeastS float64 `json:"at_least_s"`
	Samples  int     `json:"datagrams"`
	// BoundS is the smaller of the two agents' max_clock_skew: a
	// difference above it breaks the assumption of their replay defence.
	BoundS float64 `json:"max_clock_skew_s"`
	Beyond bool    `json:"beyond_bound"`
}

// clockSample takes one received datagram's nonce against its receiver's
// wall clock.
func (h *history) clockSample(ai *agentInfo, e eventlog.Event) {
	if e.Nonce == 0 || e.Peer == "" || e.Nonce > 1<<62 {
		return
	}
	k := clockPair{e.Peer, ai.instance}
	lag := int64(e.Nonce) - e.WallNS
	l, ok := h.clock[k]
	if !ok || lag > l.ns {
		l.ns, l.mono, l.kind = lag, e.MonoNS, e.Kind
	}
	l.samples++
	h.clock[k] = l
}

// receivedKinds are the events of a datagram accepted, carrying its nonce.
var receivedKinds = map[eventlog.Kind]bool{eventlog.MoveReceived: true, eventlog.AckReceived: true,
	eventlog.CommitReceived: true, eventlog.EarlyStopReceived: true}

// agentSkews is each agent's S from the experiment (by experiment name);
// an agent whose configuration does not resolve is left out.
func agentSkews(exp *experiments.Experiment) map[string]time.Duration {
	out := map[string]time.Duration{}
	if exp == nil {
		return out
	}
	for _, a := range exp.Agents {
		c, err := config.Decode(a.Config)
		if err != nil {
			continue
		}
		c.Name, c.Listen, c.CA, c.Credentials, c.Role = "x", "10.0.0.1:1", "x", "x", a.Role
		r, err := c.Validate()
		if err != nil {
			continue
		}
		out[a.Name] = r.MaxClockSkew
		if r.MaxClockSkew == 0 {
			out[a.Name] = defaultMaxClockSkew
		}
	}
	return out
}

// clockDifferences are the measured differences, largest first, and a
// warning for each beyond the two agents' bound.
func clockDifferences(h *history, exp *experiments.Experiment) ([]ClockDifference, []string) {
	skews := agentSkews(exp)
	var out []ClockDifference
	var warn []string
	for k, l := range h.clock {
		if l.ns <= 0 {
			continue // no proof that the receiver was behind
		}
		d := ClockDifference{Behind: k.receiver, Sender: k.sender, AtLeastS: float64(l.ns) / 1e9, Samples: l.samples}
		sr, okr := skews[h.logical(k.receiver)]
		ss, oks := skews[h.logical(k.sender)]
		if okr && oks {
			bound := min(sr, ss)
			d.BoundS, d.Beyond = bound.Seconds(), time.Duration(l.ns) > bound
			if d.Beyond {
				warn = append(warn, fmt.Sprintf("warning: clocks: %s's wall clock was at least %v behind %s's (measured on a %s at %.3f s of the run), beyond their max_clock_skew %v: "+
					"a restart's replay defence assumes every two members' clocks within it (agent/node, \"Restarts\"), so a datagram signed before a crash may be accepted as new, and fresh ones refused",
					k.receiver, time.Duration(l.ns).Round(time.Microsecond), k.sender, l.kind, float64(l.mono-h.startMono())/1e9, bound))
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].AtLeastS != out[j].AtLeastS {
			return out[i].AtLeastS > out[j].AtLeastS
		}
		return out[i].Behind+out[i].Sender < out[j].Behind+out[j].Sender
	})
	sort.Strings(warn)
	return out, warn
}

// startMono is the first event's mono time.
func (h *history) startMono() int64 {
	if len(h.evs) > 0 {
		return h.evs[0].mono
	}
	return 0
}
