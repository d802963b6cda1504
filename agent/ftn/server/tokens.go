package server

import (
	"fmt"
	"slices"

	"tokenbed/agent/ftn/msg"
)

type holder struct {
	client uint64
	mode   msg.Mode
	fence  msg.Fence
	req    uint64
}

type token struct {
	fence   msg.Fence // the last one granted (Counter 0: none yet in this epoch)
	data    []byte
	holders []holder
	queue   []msg.Waiter
	marks   map[uint64]mark // per client, its newest request for the name
}

// entry returns name's entry, creating it in the current epoch.
func (s *Server) entry(name string) *token {
	t := s.tokens[name]
	if t == nil {
		t = &token{fence: msg.Fence{Epoch: s.g.Version}}
		s.tokens[name] = t
	}
	return t
}

// raise keeps t's fence at or above f, so the next grant exceeds it.
func (s *Server) raise(t *token, f msg.Fence) {
	if f.Compare(t.fence) > 0 {
		t.fence = f
	}
}

func (s *Server) addHolder(t *token, h msg.Hold) {
	if _, ok := s.g.Client(h.Client); !ok {
		return
	}
	for _, x := range t.holders {
		if x.client == h.Client {
			return
		}
	}
	s.raise(t, h.Fence)
	for _, x := range t.holders {
		if x.mode == msg.Exclusive || h.Mode == msg.Exclusive {
			// Two clients believe they hold it incompatibly: only a
			// broken server or a lost transfer gets here. Keep both: the
			// checker must see it.
			s.event(msg.Event{Kind: "conflict", Name: h.Name, Client: h.Client, Detail: fmt.Sprintf("with %s", msg.IDString(x.client))})
			break
		}
	}
	t.holders = append(t.holders, holder{client: h.Client, mode: h.Mode, fence: h.Fence, req: h.Req})
	t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return w.Client == h.Client })
}

func (s *Server) freeClients(ids []uint64) {
	gone := func(id uint64) bool { return slices.Contains(ids, id) }
	for _, name := range s.Tokens() {
		t := s.tokens[name]
		for _, h := range t.holders {
			if gone(h.client) {
				s.event(msg.Event{Kind: "freed", Name: name, Client: h.client, Fence: h.fence})
			}
		}
		t.holders = slices.DeleteFunc(t.holders, func(h holder) bool { return gone(h.client) })
		t.queue = slices.DeleteFunc(t.queue, func(w msg.Waiter) bool { return gone(w.Client) })
		for _, id := range ids {
			delete(t.marks, id)
		}
	}
	for _, id := range ids {
		delete(s.floors, id)
	}
	if s.round != nil {
		for _, id := range ids {
			delete(s.round.pending, id)
		}
		s.checkRound()
	}
	for _, name := range s.Tokens() {
		s.grant(name)
	}
}

// grant serves name's queue in order: the head when compatible with the
// holders, then every following shared request while the head is shared.
func (s *Server) grant(name string) {
	t := s.tokens[name]
	if t == nil || !s.Serving() {
		return
	}
	for len(t.queue) > 0 {
		w := t.queue[0]
		excl := slices.ContainsFunc(t.holders, func(h holder) bool { return h.mode == msg.Exclusive })
		if excl || (w.Mode == msg.Exclusive && len(t.holders) > 0) {
			return
		}
		c, ok := s.g.Client(w.Client)
		t.queue = t.queue[1:]
		if !ok {
			continue
		}
		t.fence.Counter++
		t.holders = append(t.holders, holder{client: w.Client, mode: w.Mode, fence: t.fence, req: w.Req})
		s.event(msg.Event{Kind: "granted", Name: name, Client: w.Client, Mode: w.Mode, Fence: t.fence})
		s.out = append(s.out, msg.Out{To: c.Addr, Msg: msg.Msg{Kind: msg.Reply, Client: w.Client, RegVersion: c.RegVersion, Req: w.Req, Name: name,
			Status: msg.OK, Fence: t.fence, Data: append([]byte{}, t.data...), Inc: s.inc, Server: s.cfg.Self, Version: s.g.Version}})
	}
}
