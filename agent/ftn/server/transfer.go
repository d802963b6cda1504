package server

import (
	"maps"
	"slices"

	"tokenbed/agent/ftn/msg"
)

type transfer struct {
	inc     uint64 // the receiver's incarnation
	version uint64
	tokens  []msg.TokenState
	acked   bool
	dirty   bool  // not sent since it changed
	sentAt  int64 // tick of the last send
}

// handOff moves every entry this server no longer owns into the
// transfer to its owner; the server serves it no more.
func (s *Server) handOff() {
	for _, name := range s.Tokens() {
		o := s.g.Owner(name)
		if o == s.cfg.Self {
			continue
		}
		t := s.tokens[name]
		delete(s.tokens, name)
		tr := s.outgoing[o]
		if o < 0 || tr == nil {
			// No booting owner to send it to (every server DOWN, or the
			// owner is already READY and reclaims through its queries).
			s.event(msg.Event{Kind: "dropped", Name: name})
			continue
		}
		ts := msg.TokenState{Name: name, Data: t.data, Queue: t.queue, Fence: t.fence}
		for _, h := range t.holders {
			ts.Holders = append(ts.Holders, msg.Hold{Client: h.client, Name: name, Mode: h.mode, Fence: h.fence, Req: h.req})
		}
		for _, id := range slices.Sorted(maps.Keys(t.marks)) {
			k := t.marks[id]
			ts.Marks = append(ts.Marks, msg.ReqMark{Client: id, Name: name, Req: k.req, Done: k.done})
		}
		tr.tokens = append(tr.tokens, ts)
		tr.version = s.g.Version
		tr.acked, tr.dirty = false, true
		s.event(msg.Event{Kind: "transfer_out", Name: name, Server: o, Fence: t.fence})
	}
}

func (s *Server) flushTransfers() {
	for i := range s.n {
		if t := s.outgoing[i]; t != nil && t.dirty {
			t.dirty, t.sentAt = false, s.tick
			s.send(i, msg.Msg{Kind: msg.Transfer, Version: t.version, Inc: t.inc, Tokens: t.tokens})
		}
	}
}

func (s *Server) receiveTransfer(i int, m msg.Msg) {
	if s.phase == initial || m.Inc != s.inc || m.Version > s.g.Version {
		// For a previous life of ours, or sent under a global state we
		// have not seen yet (we might not know we own its names): the
		// sender repeats it.
		return
	}
	for _, ts := range m.Tokens {
		if s.g.Owner(ts.Name) != s.cfg.Self {
			continue
		}
		t := s.entry(ts.Name)
		s.raise(t, ts.Fence)
		if len(t.data) == 0 {
			t.data = ts.Data
		}
		for _, h := range ts.Holders {
			s.addHolder(t, h)
		}
		for _, k := range ts.Marks {
			if _, ok := s.g.Client(k.Client); ok {
				t.see(k.Client, k.Req, k.Done)
			}
		}
		for _, w := range ts.Queue {
			if !slices.ContainsFunc(t.queue, func(x msg.Waiter) bool { return x.Client == w.Client }) {
				t.queue = append(t.queue, w)
			}
		}
		s.event(msg.Event{Kind: "transfer_in", Name: ts.Name, Server: i, Fence: t.fence})
	}
	if w, ok := s.waitTransfer[i]; ok && w == s.g.Servers[i].Inc {
		delete(s.waitTransfer, i)
	}
	s.send(i, msg.Msg{Kind: msg.TransferAck, Version: m.Version, Inc: m.Inc})
	for _, ts := range m.Tokens {
		s.grant(ts.Name)
	}
	s.checkBoot()
}
