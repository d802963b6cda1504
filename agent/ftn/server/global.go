package server

import (
	"slices"

	"tokenbed/agent/ftn/msg"
)

// publish makes g (with the next version) the global state and
// broadcasts it: leader only.
func (s *Server) publish(g msg.Global) {
	g.Version = max(g.Version, s.g.Version) + 1
	s.adopt(g)
	s.ack(s.cfg.Self, s.g.Version)
	s.broadcast()
}

// ack records that server i holds version v (leader only). Only versions
// of this term count: a follower may still hold one of a deposed leader's
// that this leader never had (etcd raft commits only its own term's
// entries by counting, for the same reason).
func (s *Server) ack(i int, v uint64) {
	if v < s.term<<32 || v <= s.acked[i] {
		return
	}
	s.acked[i] = v
	a := slices.Clone(s.acked)
	slices.Sort(a)
	if c := a[s.n-(s.n/2+1)]; c > s.committed {
		was := s.settled()
		s.committed = c
		if !was {
			s.act()
		}
	}
}

// settled reports whether the last global state that moved
// responsibility for names is known to be held by a majority.
func (s *Server) settled() bool { return s.committed >= s.moveAt }

// moves reports whether going from old to ng may move responsibility
// for a name: a server became or ceased to be DOWN, or has a new life
// (owed a transfer), or ng comes from another term's leader, whose
// history may not contain old (a deposed leader's versions that no
// majority held).
func moves(old, ng msg.Global) bool {
	if old.Version>>32 != ng.Version>>32 || len(old.Servers) != len(ng.Servers) {
		return true
	}
	for i, st := range ng.Servers {
		was := old.Servers[i]
		if (st.State == msg.Down) != (was.State == msg.Down) || st.Inc != was.Inc {
			return true
		}
	}
	return false
}

// act does what a global state that moved responsibility asks of this
// server (hand off names, query the clients, send transfers), once a
// majority holds it; until then the server serves nothing.
//
// Why (the fencing guarantee, see the package comment; 001
// "Receiving global state" and "When a Server Crashes" let survivors
// serve a DOWN server's names once they have queried the clients, and
// say nothing of a leader that is itself cut off): a leader cut off from the majority may still count a server
// it heard less than ServerDownTicks ago, declare another server DOWN,
// and serve that server's names with fences of its new version. If the
// majority never held that version, its next leader does not have it,
// and the server declared DOWN goes on granting the same names with
// fences of its older epoch: lower than the fence already issued, though
// issued later (a netns run of ftn-leader-partition did exactly this).
// Waiting for a majority makes such a fence impossible to issue: a
// version a majority held is in the global state of every later leader
// (a vote goes only to a candidate whose version is at least the
// voter's, and one voter of every majority held it), so every server
// that learns of a later version learns it is DOWN, and every entry it
// created has a lower epoch than those of its successors. The argument
// assumes the servers of that majority do not restart meanwhile (a
// restarted server has forgotten the versions it held).
func (s *Server) act() {
	if s.phase == initial || !s.settled() {
		return
	}
	s.handOff()
	if s.pendingRound {
		s.pendingRound = false
		s.startRound()
	}
	s.flushTransfers()
	s.checkBoot()
	for _, name := range s.Tokens() {
		s.grant(name)
	}
}

func (s *Server) broadcast() {
	for i := range s.n {
		if i != s.cfg.Self {
			g := s.g.Clone()
			s.send(i, msg.Msg{Kind: msg.StateMsg, Term: s.term, Global: &g, Commit: s.committed})
		}
	}
}

// leaderTick: the leader's periodic duties (001 "When a Server Crashes",
// "When a Client Crashes").
func (s *Server) leaderTick(hb bool) {
	s.accept(s.cfg.Self, s.State(), s.inc)
	if !s.IsLeader() {
		return
	}
	silent := func(i int) bool { return s.tick-s.heard[i] > int64(s.cfg.ServerDownTicks) }
	heard := 1
	for i := range s.n {
		if i != s.cfg.Self && !silent(i) {
			heard++
		}
	}
	if heard <= s.n/2 {
		// Step down before declaring anyone DOWN: a leader cut off from
		// the majority would declare the majority DOWN, and its side's
		// servers would query the clients and serve the majority's
		// tokens until their leases ran out. Leases and the majority's
		// own recovery queries keep that safe (the swarm finds no
		// violation either way), but it moves tokens for nothing.
		s.event(msg.Event{Kind: "step_down", Detail: "no majority"})
		s.leader = -1
		s.resetElection()
		return
	}
	g := s.g.Clone()
	changed := false
	for i := range s.n {
		if i != s.cfg.Self && silent(i) && g.Servers[i].State != msg.Down {
			g.Servers[i].State = msg.Down
			changed = true
			s.event(msg.Event{Kind: "declare_down", Server: i})
		}
	}
	kept := g.Clients[:0]
	for _, c := range g.Clients {
		if s.tick-s.heardClient[c.ID] > int64(s.cfg.ClientDownTicks) {
			s.event(msg.Event{Kind: "drop_client", Client: c.ID})
			changed = true
			continue
		}
		kept = append(kept, c)
	}
	g.Clients = kept
	if changed {
		s.publish(g)
	} else if hb {
		s.broadcast()
	}
}

// accept is the leader taking server i's heartbeat (001 "Server
// states": DOWN→BOOTING→READY is the server's own doing, READY→DOWN the
// leader's).
func (s *Server) accept(i int, st msg.State, inc uint64) {
	cur := s.g.Servers[i]
	if inc < cur.Inc {
		return // a previous life's late message
	}
	s.heard[i] = s.tick
	var next msg.ServerState
	switch {
	case inc > cur.Inc && st == msg.Booting:
		next = msg.ServerState{State: msg.Booting, Inc: inc}
	case inc == cur.Inc && cur.State == msg.Booting && st == msg.Ready:
		next = msg.ServerState{State: msg.Ready, Inc: inc}
	default:
		// Same life: READY stays READY, DOWN stays DOWN until the server
		// reinitialises with a new incarnation. A new life claiming READY
		// must boot first.
		return
	}
	g := s.g.Clone()
	g.Servers[i] = next
	s.publish(g)
}

// heartbeat sends this server's state to the leader.
func (s *Server) heartbeat() {
	if s.leader < 0 {
		return
	}
	if s.IsLeader() {
		s.accept(s.cfg.Self, s.State(), s.inc)
		return
	}
	s.send(s.leader, msg.Msg{Kind: msg.Heartbeat, Term: s.term, State: s.State(), Inc: s.inc, Version: s.g.Version})
}

// adopt makes ng the global state and reacts to what changed (001
// "Receiving global state").
func (s *Server) adopt(ng msg.Global) {
	old := s.g
	s.g = ng
	if moves(old, ng) {
		s.moveAt = ng.Version
	}
	me := ng.Servers[s.cfg.Self]
	if s.phase != initial && me.Inc == s.inc && me.State == msg.Down {
		s.reinit()
		return
	}
	if s.phase == initial {
		if me.Inc == s.inc && me.State == msg.Booting {
			s.startBoot()
		}
		return
	}
	downs := false
	for i, st := range ng.Servers {
		if i == s.cfg.Self {
			continue
		}
		was := old.Servers[i]
		if st.State == msg.Down && (was.State != msg.Down || was.Inc != st.Inc) {
			downs = true
			s.event(msg.Event{Kind: "server_down", Server: i, Version: ng.Version})
		}
		if w, ok := s.waitTransfer[i]; ok && (st.State == msg.Down || st.Inc != w) {
			delete(s.waitTransfer, i)
		}
		if t := s.outgoing[i]; t != nil && (st.State == msg.Down || st.Inc != t.inc) {
			delete(s.outgoing, i)
		}
		if st.State == msg.Booting && (s.outgoing[i] == nil || s.outgoing[i].inc != st.Inc) {
			// Every active server sends a BOOTING one a transfer, empty
			// or not: it waits for all of them.
			s.outgoing[i] = &transfer{inc: st.Inc, version: ng.Version, dirty: true}
		}
	}
	// Clients gone from the list lose their tokens.
	var gone []uint64
	for _, c := range old.Clients {
		if _, ok := ng.Client(c.ID); !ok {
			gone = append(gone, c.ID)
		}
	}
	if len(gone) > 0 {
		s.freeClients(gone)
	}
	if downs && !s.cfg.SkipRecoveryQuery {
		s.pendingRound = true
	}
	s.act()
}
