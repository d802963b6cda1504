package wandering

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/wandering/trace"
	"tokenbed/agent/clock"
	"tokenbed/agent/wire"
)

// TestLooseClockSandwich shows what a loose clock does to the sandwich
// rule (line 12), which compares generation timestamps (line 30, the
// generator's local clock). Token x is generated at reference time
// 100 s by an agent on the reference clock; x is not lost, only late,
// and agent y regenerates at reference 250 s (150 s after x). Agent a
// then sees x, y's token, and x again. When y's clock lags by less than
// those 150 s, y's token is stamped after x: x returns unharmed and the
// spurious token is removed at its return, as the rule intends. When it
// lags by more, y's token is stamped before x: a removes x, the older
// token, and the spurious one lives on. Either way one token is left
// (003 §2: "timestamps are not required to be accurate ... the
// application of the sandwich rule will remove the one generated
// before"); 004 §5.2 asks the accuracy to be small against Δmax so that
// the regenerated token is the later one.
func TestLooseClockSandwich(t *testing.T) {
	ref := func(s float64) time.Time { return trace.T0.Add(time.Duration(s * float64(time.Second))) }
	stamp := func(origin string, s clock.Skew, at float64) wire.TokenID {
		return wire.TokenID{Gen: s.At(trace.T0).Local(ref(at)).UnixNano(), Origin: origin}
	}
	x := stamp("x", clock.Skew{}, 100)
	for _, tc := range []struct {
		lag         time.Duration
		xDiscarded  bool // at x's second visit
		yDiscarded  bool // at y's token's second visit
		description string
	}{
		{100 * time.Second, false, true, "lag 100 s < 150 s: the regenerated token is the later one"},
		{200 * time.Second, true, false, "lag 200 s > 150 s: the regenerated token is stamped before x"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			y := stamp("y", clock.Skew{Offset: -tc.lag}, 250)
			p := New(Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 300})
			p.Start(&trace.Host{Name: "a", Members: []string{"b", "c"}, R: rand.New(rand.NewPCG(1, 1))}, ref(0))
			visit := func(at float64, tok wire.TokenID) bool {
				acts := p.Acquired(ref(at), tok, circulation.ByPass, "")
				for _, a := range acts {
					if a.Kind == circulation.Discard {
						return true
					}
				}
				p.Tick(ref(at + 5))
				p.Passed(ref(at+5), tok, "b")
				return false
			}
			got := fmt.Sprint(visit(300, x), visit(310, y), visit(320, x), visit(330, y))
			want := fmt.Sprint(false, false, tc.xDiscarded, tc.yDiscarded)
			if got != want {
				t.Errorf("x %v, y %v (stamps %v, %v): discarded at visits x, y, x, y = %s, want %s",
					x, y, time.Unix(0, x.Gen).Sub(trace.T0), time.Unix(0, y.Gen).Sub(trace.T0), got, want)
			}
		})
	}
}
