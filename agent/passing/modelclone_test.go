package passing

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"tokenbed/agent/wire"
)

// clone copies an endpoint for the model check's exploration: every
// machine of every exchange, with its configuration pointer moved to the
// copy's.
func (e *Endpoint) clone() *Endpoint {
	c := &Endpoint{cfg: e.cfg, exchange: e.exchange, self: e.self, ids: e.ids,
		held: cloneMap(e.held), soft: map[wire.TokenID]*soft{},
		senders: map[key]SenderMachine{}, finished: map[key]SenderMachine{}, receivers: map[key]ReceiverMachine{}}
	ptr := map[SenderMachine]SenderMachine{}
	for t, s := range e.soft {
		s2 := *s
		s2.passIDs = slices.Clone(s.passIDs)
		c.soft[t] = &s2
	}
	cp := func(s SenderMachine) SenderMachine {
		if s2, ok := ptr[s]; ok {
			return s2
		}
		var s2 SenderMachine
		switch s := s.(type) {
		case *Sender:
			v := *s
			v.cfg = &c.cfg
			s2 = &v
		case *Sender3:
			v := *s
			v.cfg = &c.cfg
			s2 = &v
		default:
			panic(fmt.Sprintf("clone: sender %T", s))
		}
		ptr[s] = s2
		return s2
	}
	for k, s := range e.senders {
		c.senders[k] = cp(s)
	}
	for k, s := range e.finished {
		c.finished[k] = cp(s)
	}
	for _, g := range e.gcQueue {
		c.gcQueue = append(c.gcQueue, gcEntry{g.k, cp(g.s), g.at})
	}
	for k, r := range e.receivers {
		switch r := r.(type) {
		case *Receiver:
			v := *r
			v.cfg = &c.cfg
			c.receivers[k] = &v
		case *Receiver3:
			v := *r
			v.cfg = &c.cfg
			v.IDs = slices.Clone(r.IDs)
			c.receivers[k] = &v
		default:
			panic(fmt.Sprintf("clone: receiver %T", r))
		}
	}
	return c
}

// counters returns a machine's retry counter and deadline, for the
// fingerprint.
func counters(m any) (attempts int, deadline time.Time) {
	switch m := m.(type) {
	case *Sender:
		return m.attempts, m.deadline
	case *Receiver:
		return m.attempts, m.deadline
	case *Sender3:
		return 0, m.deadline
	case *Receiver3:
		return m.acks, m.deadline
	}
	panic(fmt.Sprintf("counters: %T", m))
}

// passIDs returns a machine's pass ids (3-way), for the fingerprint: a
// late datagram of another pass is told apart by its id alone.
func passIDs(m any) string {
	switch m := m.(type) {
	case *Sender3:
		return strconv.FormatUint(m.ID, 36)
	case *Receiver3:
		var b []byte
		for _, id := range m.IDs {
			b = strconv.AppendUint(b, id, 36)
			b = append(b, '/')
		}
		return string(b)
	}
	return ""
}
