package wandering004

import (
	"math/rand/v2"
	"testing"
	"time"

	"tokenbed/agent/circulation/wandering/trace"
	"tokenbed/agent/clock"
)

// TestLooseClockPrecedence is 004 §5.2's requirement on clocks: "the
// token tg, generated in response to a timeout for a token tx, has a
// timestamp larger than tx", so that "only accuracy small compared with
// Δmax" is needed. tx is generated at reference 0 by an agent on the
// reference clock and does not come back for Δmax = 1800 s; agent y times
// out and generates tg at reference 1800 s. Agent a runs A with tx at
// 1900 s and receives tg 10 s later (within Δmin): when y's clock lags by
// less than the 1800 s since tx was generated, tg is younger and §5's
// precedence removes it, as intended; when it lags by more, tg is stamped
// before tx and is kept (it becomes lasttoken), and tx, the token that
// was not lost, is the one removed at its next visit.
func TestLooseClockPrecedence(t *testing.T) {
	tx := trace.Stamp("x", clock.Skew{}, 0)
	for _, tc := range []struct {
		lag                  time.Duration
		tgRemoved, txRemoved bool
	}{
		{60 * time.Second, true, false},   // a minute: small against Δmax
		{1900 * time.Second, false, true}, // more than Δmax
	} {
		tg := trace.Stamp("y", clock.Skew{Offset: -tc.lag}, 1800)
		p := New(Config{Op: 4 * time.Second, Skip: time.Second, Min: 600 * time.Second})
		p.Start(&trace.Host{Name: "a", Members: []string{"b", "c"}, R: rand.New(rand.NewPCG(1, 1))}, trace.T0)
		if trace.Visit(p, 1900, tx) {
			t.Fatalf("lag %v: tx discarded at its first visit", tc.lag)
		}
		tgRemoved := trace.Visit(p, 1910, tg)
		txRemoved := trace.Visit(p, 1920, tx)
		if tgRemoved != tc.tgRemoved || txRemoved != tc.txRemoved {
			t.Errorf("y's clock %v behind: tg %v (%v after tx) removed %v, then tx removed %v; want %v, %v",
				tc.lag, tg, time.Duration(tg.Gen-tx.Gen), tgRemoved, txRemoved, tc.tgRemoved, tc.txRemoved)
		}
	}
}
