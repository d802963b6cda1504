package server

import (
	"fmt"

	"tokenbed/agent/ftn/msg"
)

type round struct {
	version uint64
	pending map[uint64]bool
	sentAt  int64
}

// startRound queries every listed client for the tokens it holds (001
// "Server Initialization", "When a Server Crashes"); until all answer or
// are dropped the server serves nothing.
func (s *Server) startRound() {
	r := &round{version: s.g.Version, pending: map[uint64]bool{}}
	for _, c := range s.g.Clients {
		r.pending[c.ID] = true
	}
	s.round = r
	s.event(msg.Event{Kind: "query_round", Version: r.version, Detail: fmt.Sprintf("clients=%d", len(r.pending))})
	s.sendQueries()
	s.checkRound()
}

func (s *Server) sendQueries() {
	r := s.round
	if r == nil {
		return
	}
	r.sentAt = s.tick
	g := s.g.Clone()
	g.Clients = nil // clients need the servers' states, not each other
	for _, c := range s.g.Clients {
		if r.pending[c.ID] {
			s.out = append(s.out, msg.Out{To: c.Addr, Msg: msg.Msg{Kind: msg.Query, Version: r.version, Server: s.cfg.Self, Inc: s.inc, Global: &g}})
		}
	}
}

func (s *Server) checkRound() {
	if s.round == nil || len(s.round.pending) > 0 {
		return
	}
	s.event(msg.Event{Kind: "round_done", Version: s.round.version})
	s.round = nil
	for _, name := range s.Tokens() {
		s.grant(name)
	}
	s.checkBoot()
}

func (s *Server) queryReply(from msg.Peer, m msg.Msg) {
	if s.round == nil || m.Version != s.round.version || !s.round.pending[m.Client] {
		return
	}
	c, ok := s.g.Client(m.Client)
	if !ok || c.Name != from.Name {
		return
	}
	delete(s.round.pending, m.Client)
	s.floors[m.Client] = max(s.floors[m.Client], m.Req)
	for _, k := range m.Marks {
		if k.Client == m.Client && s.g.Owner(k.Name) == s.cfg.Self {
			s.entry(k.Name).see(k.Client, k.Req, false)
		}
	}
	for _, h := range m.Holds {
		if h.Client != m.Client || s.g.Owner(h.Name) != s.cfg.Self {
			continue
		}
		t := s.entry(h.Name)
		s.addHolder(t, h)
		if len(t.data) == 0 && len(h.Data) > 0 {
			t.data = h.Data
		}
	}
	s.checkRound()
}
