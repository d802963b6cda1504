package server

import (
	"fmt"

	"tokenbed/agent/ftn/msg"
)

// reinit: marked DOWN while alive, the server forgets everything and
// starts over with a new incarnation (001 "Receiving global state": it
// must NOT declare itself BOOTING or READY without reinitializing).
func (s *Server) reinit() {
	s.event(msg.Event{Kind: "reinit", Version: s.g.Version})
	s.tokens = map[string]*token{}
	s.outgoing = map[int]*transfer{}
	s.floors = map[uint64]uint64{}
	s.round = nil
	s.pendingRound = false
	s.waitTransfer = nil
	s.phase = initial
	s.inc++
	s.heartbeat()
}

func (s *Server) startBoot() {
	s.phase = booting
	s.waitTransfer = map[int]uint64{}
	for i, st := range s.g.Servers {
		if i != s.cfg.Self && st.State != msg.Down {
			s.waitTransfer[i] = st.Inc
		}
	}
	s.event(msg.Event{Kind: "boot", Version: s.g.Version, Detail: fmt.Sprintf("await=%d", len(s.waitTransfer))})
	for i, st := range s.g.Servers {
		if i != s.cfg.Self && st.State == msg.Booting {
			s.outgoing[i] = &transfer{inc: st.Inc, version: s.g.Version, dirty: true}
		}
	}
	s.pendingRound = true
	s.act()
}

func (s *Server) checkBoot() {
	if s.phase != booting || s.round != nil || s.pendingRound || !s.settled() || len(s.waitTransfer) > 0 {
		return
	}
	s.phase = ready
	s.event(msg.Event{Kind: "ready", Version: s.g.Version})
	s.heartbeat()
}
