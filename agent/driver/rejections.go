package driver

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
)

// Defaults of RejectionSampler.
const (
	DefaultRejectionSample   = 100
	DefaultRejectionInterval = time.Second
)

// RejectionSampler bounds what rejected datagrams cost the log. A node
// reports every datagram it drops (002 §3.1: dropped without reply) as a
// datagram_rejected event, about 280 bytes written synchronously: a flood
// of 19,000 datagrams/s would write 5 MB/s. The sampler lets the first
// Sample rejections of each reason in each Interval through one by one
// (they carry the sender, token and session that analysis matches against
// Commits) and counts the rest; a rejections_summary event carries those
// counts once the interval is over. Counts stay exact: every rejection is
// either logged or counted in exactly one summary, and the node's own
// counters (agent_stopping) see them all.
//
// It is a pure type: time comes in as an argument.
type RejectionSampler struct {
	// Sample per reason per interval; 0 means DefaultRejectionSample, a
	// negative value logs every rejection.
	Sample int
	// Interval; 0 means DefaultRejectionInterval.
	Interval time.Duration

	start      time.Time // of the current interval
	logged     map[string]int
	suppressed map[string]uint64
}

func (s *RejectionSampler) limits() (int, time.Duration) {
	k, iv := s.Sample, s.Interval
	if k == 0 {
		k = DefaultRejectionSample
	}
	if iv <= 0 {
		iv = DefaultRejectionInterval
	}
	return k, iv
}

// Filter returns the events of one batch, at now, that go to the log:
// all but the rejections beyond the sample, preceded by the summary of the
// previous interval if it is over. evs is left as it was.
func (s *RejectionSampler) Filter(now time.Time, evs []eventlog.Event) []eventlog.Event {
	k, iv := s.limits()
	if k < 0 {
		return evs
	}
	var out []eventlog.Event
	if now.Sub(s.start) >= iv {
		out = s.summary(make([]eventlog.Event, 0, len(evs)+1))
		s.start, s.logged = now, nil
	}
	copied := len(out) > 0
	for i, e := range evs {
		if e.Kind == eventlog.DatagramRejected {
			if s.logged == nil {
				s.logged = map[string]int{}
			}
			if s.logged[e.Reason] >= k {
				if s.suppressed == nil {
					s.suppressed = map[string]uint64{}
				}
				s.suppressed[e.Reason]++
				if !copied {
					out, copied = append(make([]eventlog.Event, 0, len(evs)), evs[:i]...), true
				}
				continue
			}
			s.logged[e.Reason]++
		}
		if copied {
			out = append(out, e)
		}
	}
	if !copied {
		return evs
	}
	return out
}

// Due returns when the pending summary is due; false if none is pending.
func (s *RejectionSampler) Due() (time.Time, bool) {
	if len(s.suppressed) == 0 {
		return time.Time{}, false
	}
	_, iv := s.limits()
	return s.start.Add(iv), true
}

// Final returns the pending summary, if any: the agent is stopping.
func (s *RejectionSampler) Final() []eventlog.Event { return s.summary(nil) }

func (s *RejectionSampler) summary(out []eventlog.Event) []eventlog.Event {
	if len(s.suppressed) == 0 {
		return out
	}
	out = append(out, eventlog.Event{Kind: eventlog.RejectionsSummary, Counts: s.suppressed})
	s.suppressed = nil
	return out
}

// Stopping is the agent's last log record: why it stopped, and its
// rejection counts by reason (sorted, so that a simulated run's log
// replays byte for byte).
func Stopping(reason string, rejected map[string]uint64) eventlog.Event {
	rej := make([]string, 0, len(rejected))
	for _, k := range slices.Sorted(maps.Keys(rejected)) {
		rej = append(rej, k+"="+strconv.FormatUint(rejected[k], 10))
	}
	return eventlog.Event{Kind: eventlog.AgentStopping, Reason: reason, Detail: "rejected: " + strings.Join(rej, " ")}
}
