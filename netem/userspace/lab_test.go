//go:build linux

package userspace

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
	"tokenbed/netem"
)

// The lab the integration tests and the benchmarks share: the harness's
// network-namespace backend (a bridge and a veth per agent) with, when
// attached, the engine in front. Without the engine the agents reach each
// other over the veth pairs and the bridge: the benchmarks' baseline.

type lab struct {
	t     testing.TB
	id    string
	be    *nsbackend.Backend
	eng   *Engine
	addrs map[string]netip.Addr
	ports map[string]backend.Port
}

// requireLab skips t unless it can build a lab: root, and /dev/net/tun.
func requireLab(t testing.TB) {
	t.Helper()
	testenv.RequireTUN(t, "network namespaces and TUN devices")
}

// newBareLab builds agents' namespaces (run ID id) without the engine.
func newBareLab(t testing.TB, id string, agents ...string) *lab {
	t.Helper()
	requireLab(t)
	pfx := netip.MustParsePrefix("10.77.0.0/24")
	l := &lab{t: t, id: id, be: nsbackend.New(), addrs: map[string]netip.Addr{}, ports: map[string]backend.Port{}}
	var as []backend.Agent
	for i, n := range agents {
		a := backend.Agent{Name: n, Instance: n, Addr: backend.AgentAddr(pfx, i)}
		as = append(as, a)
		l.addrs[n] = a.Addr
	}
	if err := l.be.Setup(context.Background(), backend.Spec{RunID: id, Replicas: [][]backend.Agent{as}, Prefixes: []netip.Prefix{pfx}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.detach()
		if err := l.be.Teardown(context.Background()); err != nil {
			t.Error(err)
		}
		if left, _ := nsbackend.Leftovers(id); len(left) > 0 {
			t.Errorf("namespaces left: %v", left)
		}
	})
	for n := range l.addrs {
		p, err := l.be.AgentPort(n)
		if err != nil {
			t.Fatal(err)
		}
		l.ports[n] = p
	}
	return l
}

// newLab is the three-agent lab A, B, C with the engine attached (seed 7).
func newLab(t testing.TB, id string) *lab {
	l := newBareLab(t, id, "A", "B", "C")
	l.attach(Config{RunID: id, Seed: 7})
	return l
}

// attach puts every agent behind a new engine (not started).
func (l *lab) attach(cfg Config) *Engine {
	l.t.Helper()
	l.eng = New(cfg)
	for n, a := range l.addrs {
		var peers []netip.Addr
		for m, b := range l.addrs {
			if m != n {
				peers = append(peers, b)
			}
		}
		if _, err := l.eng.Attach(l.ports[n].NS, a, peers); err != nil {
			l.t.Fatal(err)
		}
	}
	return l.eng
}

// detach closes the engine, if any: the agents talk over the bridge again.
func (l *lab) detach() Stats {
	if l.eng == nil {
		return Stats{}
	}
	l.eng.Close()
	st := l.eng.Stats()
	l.eng = nil
	return st
}

func (l *lab) profile(from, to, s string) {
	l.t.Helper()
	p, err := netem.Parse(s)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.eng.SetProfile(l.addrs[from], l.addrs[to], p); err != nil {
		l.t.Fatal(err)
	}
}

// socket opens a UDP socket bound to the agent's address in its namespace.
func (l *lab) socket(agent string, port int) *net.UDPConn {
	l.t.Helper()
	var c *net.UDPConn
	err := nsenter.Do(l.ports[agent].NS, func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{IP: l.addrs[agent].AsSlice(), Port: port})
		return err
	})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Close() })
	return c
}
