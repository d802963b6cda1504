package trace

import (
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/clock"
	"tokenbed/agent/wire"
)

// At is T0 plus s seconds.
func At(s float64) time.Time { return T0.Add(time.Duration(s * float64(time.Second))) }

// Stamp is the id of a token that origin, whose clock departs from the
// reference by s from T0 on (agent/clock), generates at reference time
// at seconds: its timestamp is origin's local reading (002 §3.2, 003
// Fig. 1 line 30, 004 §4).
func Stamp(origin string, s clock.Skew, at float64) wire.TokenID {
	return wire.TokenID{Gen: s.At(T0).Local(At(at)).UnixNano(), Origin: origin}
}

// Visit hands tok to p by a pass at reference time at seconds and
// reports whether p discarded it; a token p keeps is passed on 5 s later
// (after a Δop of 4 s or a Δskip).
func Visit(p circulation.Policy, at float64, tok wire.TokenID) bool {
	for _, a := range p.Acquired(At(at), tok, circulation.ByPass, "") {
		if a.Kind == circulation.Discard {
			return true
		}
	}
	p.Tick(At(at + 5))
	p.Passed(At(at+5), tok, "b")
	return false
}
