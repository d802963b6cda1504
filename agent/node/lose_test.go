package node

import (
	"testing"
	"time"

	"tokenbed/agent/eventlog"
)

// LoseNextPass: the holder's next pass loses its token in transit. No
// datagram of that pass is sent (so no retry can repair it), the holder
// releases it ("lost_in_transit") and logs token_lost naming the intended
// receiver, nobody acquires it again, and the random walk's loss
// detection regenerates (002 §3.2).
func TestLoseNextPassLosesTheTokenInTransit(t *testing.T) {
	s := threeNodes(t, 3)
	s.run(s.now.Add(2 * time.Second))
	holder := s.holder()
	tok := s.nodes[holder].Held()[0].String()
	s.nodes[holder].LoseNextPass()
	before := len(s.events)
	s.run(s.now.Add(time.Minute))
	var lost, releasedLost, movesOfTok, acquiredAgain int
	for _, e := range s.events[before:] {
		switch {
		case e.Kind == eventlog.TokenLost && e.Token == tok && e.Agent == holder && e.Reason == "in_transit" && e.Peer != "":
			lost++
		case e.Kind == eventlog.TokenReleased && e.Token == tok && e.Reason == "lost_in_transit":
			releasedLost++
		case e.Kind == eventlog.MoveSent && e.Token == tok:
			movesOfTok++
		case e.Kind == eventlog.TokenAcquired && e.Token == tok:
			acquiredAgain++
		}
	}
	if lost != 1 || releasedLost != 1 || movesOfTok != 0 || acquiredAgain != 0 {
		t.Errorf("%s held %s: %d token_lost, %d released lost_in_transit, %d Moves of it, %d acquisitions of it after; want 1, 1, 0, 0",
			holder, tok, lost, releasedLost, movesOfTok, acquiredAgain)
	}
	if s.count(eventlog.TokenRegenerated, "") == 0 {
		t.Error("no regeneration after the loss")
	}
	// One loss only: the next tokens pass as usual.
	if n := s.count(eventlog.TokenLost, ""); n != 1 {
		t.Errorf("%d token_lost, want 1", n)
	}
}
