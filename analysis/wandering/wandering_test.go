package wandering

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

var epoch = time.Date(2009, 5, 26, 0, 0, 0, 0, time.UTC)

// ev is an event at t paper seconds.
func ev(agent string, t float64, kind eventlog.Kind, token, reason string) eventlog.Event {
	return eventlog.Event{Agent: agent, WallNS: epoch.Add(time.Duration(t * float64(time.Second))).UnixNano(), Kind: kind, Token: token, Reason: reason}
}

// A literal history of three agents over 100 s: A runs A at 10–14 and
// 50–54, B at 12–16, C at 13–17 and then crashes at 60 during its second
// operation (a loss, restarted at once); token 1@A lives from 0, token
// 2@C is generated at 30 and discarded at 40.
func literal() *Run {
	r := &Run{Manifest: Manifest{SpanS: 100, Epoch: epoch, Losses: []Loss{{AtS: 60, Agent: "C", Token: "1@A"}}}}
	r.measure([][]eventlog.Event{
		{
			ev("A", 0, eventlog.TokenAcquired, "1@A", "generated"),
			ev("A", 10, eventlog.OpStarted, "1@A", "token"),
			ev("A", 14, eventlog.OpFinished, "1@A", "done"),
			ev("A", 50, eventlog.OpStarted, "1@A", "token"),
			ev("A", 54, eventlog.OpFinished, "1@A", "done"),
		},
		{
			ev("B", 12, eventlog.OpStarted, "", "periodic"),
			ev("B", 16, eventlog.OpFinished, "", "done"),
			ev("B", 40, eventlog.TokenDiscarded, "2@C", "sandwich"),
		},
		{
			ev("C", 13, eventlog.OpStarted, "", "periodic"),
			ev("C", 17, eventlog.OpFinished, "", "done"),
			ev("C", 30, eventlog.TokenAcquired, "2@C", "generated"),
			ev("C", 58, eventlog.OpStarted, "1@A", "token"),
			ev("C", 60.5, eventlog.AgentStarted, "", ""), // the restart
		},
	})
	return r
}

func TestConcurrency(t *testing.T) {
	r := literal()
	// 10–12: 1; 12–13: 2; 13–14: 3; 14–16: 2; 16–17: 1; 50–54: 1;
	// 58–60 (C's operation cut by the crash): 1.
	got := r.Concurrency()
	// idle: 100 − 7 (10–17) − 4 (50–54) − 2 (58–60) = 87; one: 2 + 1 +
	// 4 + 2 = 9; two: 1 + 2 = 3; three: 1.
	want := []float64{87, 9, 3, 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("concurrency %v, want %v", got, want)
	}
}

func TestInterArrivals(t *testing.T) {
	got := literal().InterArrivals()
	slices.Sort(got)
	if want := []float64{40, 45}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("inter-arrivals %v, want %v (A: 10→50, C: 13→58)", got, want)
	}
}

func TestTokensAndStabilization(t *testing.T) {
	r := literal()
	// 1@A from 0 until its loss at 60; 2@C from 30 until discarded at 40.
	if got, want := fmt.Sprint(r.TokenCount()), "[{0 1} {30 2} {40 1} {60 0}]"; got != want {
		t.Errorf("tokens %s, want %s", got, want)
	}
	// After the loss at 60 no token comes back: unsettled.
	if d, un := r.Stabilizations(5); len(d) != 0 || un != 1 {
		t.Errorf("stabilizations %v, %d unsettled; want none settled, 1 unsettled", d, un)
	}
	// A regeneration at 70 and a spurious token from 75 to 90: a spike of
	// 15 s. Longer than maxSpike 5: settled at 90, 30 s after the loss;
	// shorter than 20: part of stable operation, settled at 70.
	r.Tokens = append(r.Tokens, Life{Token: "3@B", From: 70, To: 100}, Life{Token: "4@A", From: 75, To: 90})
	if d, un := r.Stabilizations(5); fmt.Sprint(d) != "[30]" || un != 0 {
		t.Errorf("stabilizations (max spike 5) %v, %d unsettled; want [30]", d, un)
	}
	if d, un := r.Stabilizations(20); fmt.Sprint(d) != "[10]" || un != 0 {
		t.Errorf("stabilizations (max spike 20) %v, %d unsettled; want [10]", d, un)
	}
	// A token that dies at 95 (none from then on): unsettled again.
	r.Tokens[len(r.Tokens)-2].To = 95
	if d, un := r.Stabilizations(20); len(d) != 0 || un != 1 {
		t.Errorf("stabilizations %v, %d unsettled; want 1 unsettled", d, un)
	}
}
