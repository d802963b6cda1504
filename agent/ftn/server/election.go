package server

import (
	"fmt"

	"tokenbed/agent/ftn/msg"
)

func (s *Server) resetElection() {
	e := int64(s.cfg.ElectionTicks)
	s.deadline = s.tick + e + s.rnd.Int64N(e)
}

func (s *Server) newTerm(t uint64) {
	if s.IsLeader() {
		s.event(msg.Event{Kind: "step_down", Detail: fmt.Sprintf("term %d seen", t)})
	}
	s.term = t
	s.votedFor = -1
	s.leader = -1
}

// preCampaign asks whether a majority would vote for us in the next
// term, without changing any term.
func (s *Server) preCampaign() {
	s.pre = true
	s.votes = map[int]bool{s.cfg.Self: true}
	s.leader = -1
	s.resetElection()
	if len(s.votes) > s.n/2 {
		s.campaign()
		return
	}
	for i := range s.n {
		if i != s.cfg.Self {
			s.send(i, msg.Msg{Kind: msg.VoteReq, Term: s.term + 1, Version: s.g.Version, Pre: true})
		}
	}
}

func (s *Server) campaign() {
	s.pre = false
	s.term++
	s.votedFor = s.cfg.Self
	s.votes = map[int]bool{s.cfg.Self: true}
	s.leader = -1
	s.resetElection()
	s.event(msg.Event{Kind: "campaign", Detail: fmt.Sprintf("term=%d", s.term)})
	if len(s.votes) > s.n/2 {
		s.becomeLeader()
		return
	}
	for i := range s.n {
		if i != s.cfg.Self {
			s.send(i, msg.Msg{Kind: msg.VoteReq, Term: s.term, Version: s.g.Version})
		}
	}
}

func (s *Server) voteReq(i int, m msg.Msg) {
	recent := s.leader >= 0 && s.tick-s.lastState < int64(s.cfg.ElectionTicks)
	if m.Pre {
		grant := m.Term > s.term && !recent && !s.IsLeader() && m.Version >= s.g.Version
		t := m.Term
		if !grant {
			t = s.term
		}
		s.send(i, msg.Msg{Kind: msg.VoteResp, Term: t, Granted: grant, Pre: true})
		return
	}
	if m.Term < s.term || recent || s.IsLeader() {
		s.send(i, msg.Msg{Kind: msg.VoteResp, Term: s.term})
		return
	}
	if m.Term > s.term {
		s.newTerm(m.Term)
	}
	grant := (s.votedFor < 0 || s.votedFor == i) && m.Version >= s.g.Version
	if grant {
		s.votedFor = i
		s.resetElection()
	}
	s.send(i, msg.Msg{Kind: msg.VoteResp, Term: s.term, Granted: grant})
}

func (s *Server) becomeLeader() {
	s.leader = s.cfg.Self
	s.heard = make([]int64, s.n)
	for i := range s.heard {
		s.heard[i] = s.tick
	}
	s.acked = make([]uint64, s.n)
	// A grace period for every listed client: it may have been talking to
	// the old leader.
	s.heardClient = map[uint64]int64{}
	for _, c := range s.g.Clients {
		s.heardClient[c.ID] = s.tick
	}
	s.regs = map[regKey]uint64{}
	s.nextClient = 1
	g := s.g.Clone()
	g.Term = s.term
	g.Leader = s.cfg.Self
	g.Version = s.term << 32
	s.event(msg.Event{Kind: "leader", Detail: fmt.Sprintf("term=%d", s.term)})
	s.publish(g)
	s.accept(s.cfg.Self, s.State(), s.inc)
}
