package driver

import (
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

func rejected(reason string) eventlog.Event {
	return eventlog.Event{Kind: eventlog.DatagramRejected, Reason: reason}
}

// The sampler logs the first Sample rejections of each reason per
// interval, counts the rest exactly, and summarises them once the interval
// is over; other events always pass, in order.
func TestRejectionSamplerBoundsAndCounts(t *testing.T) {
	s := RejectionSampler{Sample: 2, Interval: time.Second}
	t0 := time.Unix(1000, 0)
	var batch []eventlog.Event
	for i := 0; i < 5; i++ {
		batch = append(batch, rejected("bad-signature"), rejected("malformed:type"))
	}
	batch = append(batch, eventlog.Event{Kind: eventlog.TokenAcquired})
	orig := append([]eventlog.Event(nil), batch...)
	out := s.Filter(t0, batch)
	for i := range orig {
		if orig[i].Kind != batch[i].Kind || orig[i].Reason != batch[i].Reason {
			t.Fatalf("Filter changed its input at %d", i)
		}
	}
	count := func(evs []eventlog.Event) map[string]int {
		m := map[string]int{}
		for _, e := range evs {
			m[string(e.Kind)+"/"+e.Reason]++
		}
		return m
	}
	if c := count(out); c["datagram_rejected/bad-signature"] != 2 || c["datagram_rejected/malformed:type"] != 2 || c["token_acquired/"] != 1 || len(out) != 5 || out[4].Kind != eventlog.TokenAcquired {
		t.Fatalf("first batch logged %v", c)
	}
	if d, ok := s.Due(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("due %v %v, want the end of the interval", d, ok)
	}
	// Still in the interval: everything is counted, nothing logged.
	if out := s.Filter(t0.Add(500*time.Millisecond), []eventlog.Event{rejected("bad-signature")}); len(out) != 0 {
		t.Fatalf("logged %v beyond the sample", out)
	}
	// The next interval opens with the summary of the last one.
	out = s.Filter(t0.Add(time.Second), []eventlog.Event{rejected("bad-signature")})
	if len(out) != 2 || out[0].Kind != eventlog.RejectionsSummary || out[0].Counts["bad-signature"] != 4 || out[0].Counts["malformed:type"] != 3 || out[1].Kind != eventlog.DatagramRejected {
		t.Fatalf("second interval: %+v", out)
	}
	if _, ok := s.Due(); ok {
		t.Error("a summary is due with nothing suppressed")
	}
	if f := s.Final(); len(f) != 0 {
		t.Errorf("final summary %+v with nothing pending", f)
	}
	// A negative sample logs everything.
	all := RejectionSampler{Sample: -1}
	if out := all.Filter(t0, orig); len(out) != len(orig) {
		t.Errorf("sample -1 logged %d of %d", len(out), len(orig))
	}
}

// Across reasons, at most Budget events are logged per interval; accepted
// but unusual events share the budget and are counted in an
// unusual_summary. Every event is logged or counted exactly once.
func TestRejectionSamplerGlobalBudget(t *testing.T) {
	s := RejectionSampler{Sample: 2, Interval: time.Second, Budget: 3}
	t0 := time.Unix(1000, 0)
	var batch []eventlog.Event
	reasons := []string{"a", "b", "c", "d", "e"}
	for i := 0; i < 4; i++ {
		for _, r := range reasons {
			batch = append(batch, rejected(r))
		}
		batch = append(batch, eventlog.Event{Kind: eventlog.TargetAdded, Reason: "vouched"}, eventlog.Event{Kind: eventlog.TokenAcquired})
	}
	out := s.Filter(t0, batch)
	sampled, acquired := 0, 0
	for _, e := range out {
		switch e.Kind {
		case eventlog.TokenAcquired:
			acquired++
		default:
			sampled++
		}
	}
	if sampled != 3 || acquired != 4 {
		t.Fatalf("logged %d sampled events and %d acquisitions, want 3 and 4", sampled, acquired)
	}
	f := s.Final()
	var rej, unus uint64
	for _, e := range f {
		for _, v := range e.Counts {
			if e.Kind == eventlog.RejectionsSummary {
				rej += v
			} else if e.Kind == eventlog.UnusualSummary {
				unus += v
			}
		}
	}
	// 20 rejections and 4 unusual events; 3 rejections were logged.
	if rej != 17 || unus != 4 || len(f) != 2 || f[1].Counts["target_added:vouched"] != 4 {
		t.Errorf("summaries %+v: %d rejections and %d unusual events counted, want 17 and 4", f, rej, unus)
	}
}
