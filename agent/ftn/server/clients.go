package server

import (
	"fmt"
	"slices"

	"tokenbed/agent/ftn/msg"
)

// Client registration and heartbeats (001 "The Client List").

// regKey names one registration attempt: a client repeating its Register
// (same name, same nonce) gets the ID it was given, not a second one.
type regKey struct {
	name  string
	nonce uint64
}

func (s *Server) register(from msg.Peer, m msg.Msg) {
	if !s.IsLeader() {
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Redirect, Server: s.leader, Version: s.g.Version}})
		return
	}
	k := regKey{from.Name, m.Nonce}
	id, ok := s.regs[k]
	if !ok {
		id = s.term<<32 | s.nextClient
		s.nextClient++
		s.regs[k] = id
		g := s.g.Clone()
		g.Clients = append(g.Clients, msg.ClientEntry{ID: id, Name: from.Name, Addr: from.Addr, RegVersion: s.g.Version + 1})
		s.heardClient[id] = s.tick
		s.event(msg.Event{Kind: "registered", Client: id, Detail: from.Name})
		s.publish(g)
	}
	c, ok := s.g.Client(id)
	if !ok {
		return // registered, then dropped: the client will try again
	}
	g := s.g.Clone()
	g.Clients = nil
	s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Registered, Client: id, RegVersion: c.RegVersion, Version: s.g.Version, Global: &g}})
}

func (s *Server) clientHeartbeat(from msg.Peer, m msg.Msg) {
	if !s.IsLeader() {
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Redirect, Server: s.leader, Version: s.g.Version}})
		return
	}
	c, ok := s.g.Client(m.Client)
	if !ok || c.Name != from.Name {
		if !ok && s.g.Version >= m.RegVersion {
			s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Reply, Status: msg.IDInvalid, Client: m.Client, Inc: s.inc, Version: s.g.Version}})
		}
		return
	}
	if m.Kind == msg.Close {
		g := s.g.Clone()
		g.Clients = slices.DeleteFunc(g.Clients, func(c msg.ClientEntry) bool { return c.ID == m.Client })
		s.event(msg.Event{Kind: "closed", Client: m.Client})
		s.publish(g)
		return
	}
	// A heartbeat is signed but carries no time of its own: a copy that
	// a tap replays after its client crashed would keep the client
	// listed, and its tokens held, for ever. So it counts from the tick
	// of this leader's acknowledgement it echoes, which the client can
	// only have received alive; a copy moves nothing past what its
	// client was last heard of, and an echo of another term refreshes
	// nothing (becomeLeader gave every client its grace).
	if b := int64(m.Beat); m.Term == s.term && b <= s.tick && b > s.heardClient[m.Client] {
		s.heardClient[m.Client] = b
	}
	g := s.g.Clone()
	g.Clients = nil
	s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.HeartbeatAck, Term: s.term, Beat: uint64(s.tick), Version: s.g.Version, Global: &g}})
}

// Token requests (001 "Tokens", "Token data").

func (s *Server) request(from msg.Peer, m msg.Msg) {
	if !s.Serving() || m.Version > s.g.Version {
		return // the client repeats; by then we may serve or know more
	}
	c, ok := s.g.Client(m.Client)
	reply := func(st msg.Status, f msg.Fence, data []byte) {
		// Client and RegVersion name the registration answered: a client
		// registered again takes nothing meant for its previous life.
		s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.Reply, Client: m.Client, RegVersion: c.RegVersion,
			Req: m.Req, Name: m.Name, Status: st, Fence: f, Data: data, Inc: s.inc, Server: s.cfg.Self, Version: s.g.Version}})
	}
	if !ok {
		if s.g.Version >= m.RegVersion {
			c.RegVersion = m.RegVersion
			reply(msg.IDInvalid, msg.Fence{}, nil)
		}
		return
	}
	if c.Name != from.Name {
		s.event(msg.Event{Kind: "rejected", Client: m.Client, Detail: "client id of " + c.Name + " used by " + from.Name})
		return
	}
	if s.g.Owner(m.Name) != s.cfg.Self {
		if m.Version < s.g.Version {
			g := s.g.Clone()
			g.Clients = nil
			s.out = append(s.out, msg.Out{To: from.Addr, Msg: msg.Msg{Kind: msg.HeartbeatAck, Version: s.g.Version, Global: &g}})
		}
		return
	}
	repeat, fresh := s.fresh(m)
	if !fresh {
		return
	}
	t := s.entry(m.Name)
	t.see(m.Client, m.Req, true)
	hi := slices.IndexFunc(t.holders, func(h holder) bool { return h.client == m.Client })
	switch m.Kind {
	case msg.Acquire:
		if hi >= 0 {
			h := t.holders[hi]
			if h.req == m.Req || s.cfg.SkipFreshness {
				reply(msg.OK, h.fence, t.data) // a repeat: the grant was lost
				return
			}
			// A newer acquire from a listed holder: the client does not
			// know of this hold (it never asks for a name it holds), so
			// the hold ends and the request waits its turn for a new
			// fence; answering with the old one could hand it a fence
			// lower than one granted since.
			s.event(msg.Event{Kind: "released", Name: m.Name, Client: m.Client, Fence: h.fence, Detail: fmt.Sprintf("superseded by req=%d", m.Req)})
			t.holders = slices.Delete(t.holders, hi, hi+1)
		}
		if !slices.ContainsFunc(t.queue, func(w msg.Waiter) bool { return w.Client == m.Client }) {
			t.queue = append(t.queue, msg.Waiter{Client: m.Client, Mode: m.Mode, Req: m.Req})
		}
		s.grant(m.Name)
	case msg.Release:
		// A release names the fence of the hold it ends (zero: any), so a
		// replayed or late release cannot end a later hold.
		if hi >= 0 && (m.Fence.IsZero() || m.Fence == t.holders[hi].fence) {
			s.event(msg.Event{Kind: "released", Name: m.Name, Client: m.Client, Fence: t.holders[hi].fence})
			t.holders = slices.Delete(t.holders, hi, hi+1)
		}
		t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return w.Client == m.Client })
		reply(msg.OK, msg.Fence{}, nil)
		s.grant(m.Name)
	case msg.SetData:
		if hi < 0 {
			reply(msg.NotHolder, msg.Fence{}, nil)
			return
		}
		if !repeat {
			// FCFS among shared holders: the order of arrival here. A
			// copy of a write already applied is answered, not applied
			// again: another holder may have written since.
			t.data = append([]byte(nil), m.Data...)
		}
		reply(msg.OK, t.holders[hi].fence, nil)
	case msg.GetData:
		if hi < 0 {
			reply(msg.NotHolder, msg.Fence{}, nil)
			return
		}
		reply(msg.OK, t.holders[hi].fence, append([]byte{}, t.data...))
	}
}
