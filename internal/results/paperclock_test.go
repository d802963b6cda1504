package results

import (
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

// A hold of 10.4 ms at time scale 1000 is 10.4 paper seconds, or, with a
// nominal hold of 10 ms, 10 s plus the 0.4 ms of latency it ran over; the
// pass after it counts at real speed either way.
func TestPaperClockStretchesHoldsUpToTheNominal(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		nominal int64
		want    time.Duration
	}{
		{0, 10400*time.Millisecond + 100*time.Millisecond},
		{10 * ms, 10*time.Second + 400*time.Microsecond + 100*time.Millisecond},
	} {
		clk := NewPaperClock(1000, 0, holds)
		if c.nominal > 0 {
			clk.Nominal = map[string]int64{"A": c.nominal}
		}
		clk.Observe(eventlog.Event{Agent: "A", Token: "t", Kind: eventlog.TokenAcquired, WallNS: 0})
		// During the hold, the part beyond the nominal is not stretched.
		if got, want := clk.At(10400*time.Microsecond.Nanoseconds()), c.want-100*time.Millisecond; got != want {
			t.Errorf("nominal %v: during the hold At = %v, want %v", c.nominal, got, want)
		}
		clk.Observe(eventlog.Event{Agent: "A", Token: "t", Kind: eventlog.PassStarted, WallNS: 10400 * 1000})
		if got := clk.At(10400*1000 + 100*ms); got != c.want {
			t.Errorf("nominal %v: At = %v, want %v", c.nominal, got, c.want)
		}
	}
}

// holds is a basis like token passing's: a hold from the acquisition to
// the pass that ends it.
func holds(e eventlog.Event) (ClockOp, string) {
	switch e.Kind {
	case eventlog.TokenAcquired:
		return ClockBegin, e.Token
	case eventlog.PassStarted:
		return ClockEnd, e.Token
	}
	return ClockNone, ""
}
