package server

import (
	"fmt"

	"tokenbed/agent/ftn/msg"
)

// mark is the newest request of a client for a name (see "Fresh
// requests"); done: applied, so a copy is answered, not applied again.
type mark struct {
	req  uint64
	done bool
}

// fresh tells a request m to apply (fresh), a copy of the one applied
// last (repeat and fresh: answered again, not applied again), or an old
// one (not fresh: dropped with a "stale" event). A client numbers its
// requests in increasing order and has at most one outstanding per name
// (client.Invoke), so for a name only its newest request can still be
// awaited; anything older is a late copy (001 "Communication":
// unacknowledged requests are repeated) or a replay. The server knows
// the newest request per client and name it has seen (token.marks,
// carried by transfers), and, for the names it took over by a query
// round, the client's newest request number at its answer (floors) with
// the requests then outstanding (marks): a request at or below the floor
// that was not outstanding had completed, elsewhere.
func (s *Server) fresh(m msg.Msg) (repeat, fresh bool) {
	if s.cfg.SkipFreshness {
		return false, true
	}
	var k mark
	if t := s.tokens[m.Name]; t != nil {
		k = t.marks[m.Client]
	}
	floor := s.floors[m.Client]
	if m.Req < k.req || (m.Req != k.req && m.Req <= floor) {
		s.event(msg.Event{Kind: "stale", Name: m.Name, Client: m.Client, Req: m.Req,
			Detail: fmt.Sprintf("%s newest=%d", m.Kind, max(k.req, floor))})
		return false, false
	}
	return m.Req == k.req && k.done, true
}

// see records request req of client c for t's name.
func (t *token) see(c, req uint64, done bool) {
	if t.marks == nil {
		t.marks = map[uint64]mark{}
	}
	k := t.marks[c]
	if req > k.req || (req == k.req && done) {
		t.marks[c] = mark{req: req, done: done || (req == k.req && k.done)}
	}
}
