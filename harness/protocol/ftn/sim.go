package ftn

import (
	"net/netip"
	"time"

	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/host"
	"tokenbed/harness/protocol"
	"tokenbed/harness/sim"
)

var _ protocol.Simulated = Protocol{}

// SimProcess implements protocol.Simulated: the host that `agent ftn run
// --config cfg` would run, built by the same code (ftnconfig's Host).
func (Protocol) SimProcess(cfg string, o protocol.Start, now time.Time) (sim.Process, string, error) {
	c, err := ftnconfig.Load(cfg)
	if err != nil {
		return nil, "", err
	}
	h, err := c.Host(now)
	if err != nil {
		return nil, "", err
	}
	return &simHost{h: h}, c.Log, nil
}

// simHost is a host as the simulator runs it: what agent/ftn/driver does
// around it, without the socket and the clock.
type simHost struct{ h *host.Host }

var _ sim.Process = (*simHost)(nil)

func out(o host.Output) sim.Output {
	s := sim.Output{Events: o.Events}
	for _, p := range o.Packets {
		s.Packets = append(s.Packets, sim.Packet{To: p.To, Data: p.Data})
	}
	return s
}

func (s *simHost) Start(now time.Time) sim.Output { return out(s.h.Start(now)) }

func (s *simHost) Receive(now time.Time, from netip.AddrPort, data []byte) sim.Output {
	return out(s.h.Receive(now, from, data))
}

func (s *simHost) Tick(now time.Time) sim.Output { return out(s.h.Tick(now)) }

func (s *simHost) Deadline() (time.Time, bool) { return s.h.Deadline(), true }

func (s *simHost) Stop(now time.Time, reason string) sim.Output { return out(s.h.Stop(now, reason)) }
