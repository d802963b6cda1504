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
	// DefaultRejectionBudget bounds the events logged one by one per
	// interval across all reasons and kinds. An event is under 512 bytes
	// (about 280 for a rejection) and a summary under 4 KB (the reasons
	// are a fixed set), so the sampled events cost at most
	// 100 × 512 + 2 × 4,096 bytes, about 60 KB, per second per agent,
	// however many distinct reasons a flood produces.
	DefaultRejectionBudget = 100
	// MaxSampledEventBytes and MaxSummaryBytes are the sizes the bound
	// above assumes; tests check them.
	MaxSampledEventBytes = 512
	MaxSummaryBytes      = 4096
)

// unusual lists the accepted but unusual events that a certified member
// can cause at will (token introductions, directory churn): they are
// sampled like rejections, keyed by kind and reason, and counted in an
// unusual_summary.
var unusual = map[eventlog.Kind]bool{eventlog.TokenIntroduced: true, eventlog.TargetAdded: true,
	eventlog.TargetDropped: true, eventlog.PeerAdded: true, eventlog.PeerRemoved: true}

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
// Across all reasons, at most Budget rejections and unusual events are
// logged one by one per interval: a flood of random bytes produces tens
// of distinct reasons, and a bound per reason alone let the log grow
// with their number. Accepted but unusual events (token introductions,
// members entering or leaving the directory or the pass targets) are
// sampled the same way, keyed by kind and reason, and counted in an
// unusual_summary.
//
// It is a pure type: time comes in as an argument.
type RejectionSampler struct {
	// Sample per reason per interval; 0 means DefaultRejectionSample, a
	// negative value logs every rejection.
	Sample int
	// Interval; 0 means DefaultRejectionInterval.
	Interval time.Duration
	// Budget: events sampled per interval across all reasons and kinds;
	// 0 means DefaultRejectionBudget, a negative value no global bound.
	Budget int

	start      time.Time // of the current interval
	logged     map[string]int
	total      int // logged in the current interval, all keys
	suppressed map[string]uint64
	unusual    map[string]uint64
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

func (s *RejectionSampler) budget() int {
	if s.Budget == 0 {
		return DefaultRejectionBudget
	}
	return s.Budget
}

// sampled returns the key of an event the sampler bounds and the counts
// it goes to when suppressed; "" for an event always logged.
func (s *RejectionSampler) sampled(e *eventlog.Event) (string, *map[string]uint64) {
	switch {
	case e.Kind == eventlog.DatagramRejected:
		return e.Reason, &s.suppressed
	case unusual[e.Kind]:
		return string(e.Kind) + ":" + e.Reason, &s.unusual
	}
	return "", nil
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
		out = s.summary(make([]eventlog.Event, 0, len(evs)+2))
		s.start, s.logged, s.total = now, nil, 0
	}
	budget := s.budget()
	copied := len(out) > 0
	for i := range evs {
		e := &evs[i]
		if key, counts := s.sampled(e); counts != nil {
			if s.logged == nil {
				s.logged = map[string]int{}
			}
			if s.logged[key] >= k || budget >= 0 && s.total >= budget {
				if *counts == nil {
					*counts = map[string]uint64{}
				}
				(*counts)[key]++
				if !copied {
					out, copied = append(make([]eventlog.Event, 0, len(evs)), evs[:i]...), true
				}
				continue
			}
			s.logged[key]++
			s.total++
		}
		if copied {
			out = append(out, *e)
		}
	}
	if !copied {
		return evs
	}
	return out
}

// Due returns when the pending summary is due; false if none is pending.
func (s *RejectionSampler) Due() (time.Time, bool) {
	if len(s.suppressed) == 0 && len(s.unusual) == 0 {
		return time.Time{}, false
	}
	_, iv := s.limits()
	return s.start.Add(iv), true
}

// Final returns the pending summary, if any: the agent is stopping.
func (s *RejectionSampler) Final() []eventlog.Event { return s.summary(nil) }

func (s *RejectionSampler) summary(out []eventlog.Event) []eventlog.Event {
	if len(s.suppressed) > 0 {
		out = append(out, eventlog.Event{Kind: eventlog.RejectionsSummary, Counts: s.suppressed})
		s.suppressed = nil
	}
	if len(s.unusual) > 0 {
		out = append(out, eventlog.Event{Kind: eventlog.UnusualSummary, Counts: s.unusual})
		s.unusual = nil
	}
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
