//go:build linux

package userspace

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
	"tokenbed/netem"
)

// The lab the integration tests and the benchmarks share: one namespace
// per agent, all on a bridge in a hub namespace (as the netns backend
// lays out a replica, built here with internal/nsenter so that netem's
// tests need nothing of the harness) with, when attached, the engine in
// front. Without the engine the agents reach each other over the veth
// pairs and the bridge: the benchmarks' baseline.

type lab struct {
	t     testing.TB
	id    string
	eng   *Engine
	addrs map[string]netip.Addr
	ns    map[string]netns.NsHandle
}

// requireLab skips t unless it can build a lab: root, and /dev/net/tun.
func requireLab(t testing.TB) {
	t.Helper()
	testenv.RequireTUN(t, "network namespaces and TUN devices")
}

// labNamespaces names the namespaces of a lab of run ID id: the hub's
// first, removed last.
func labNamespaces(id string, agents ...string) []string {
	names := []string{id + "-hub"}
	for _, a := range agents {
		names = append(names, id+"-"+a)
	}
	return names
}

// removeLab deletes whatever namespaces of the lab exist (a lab a killed
// test left, or this one), agents first, and returns those it could not.
func removeLab(id string, agents ...string) []string {
	var left []string
	names := labNamespaces(id, agents...)
	for i := len(names) - 1; i >= 0; i-- {
		if _, err := os.Stat("/run/netns/" + names[i]); err != nil {
			continue
		}
		if err := netns.DeleteNamed(names[i]); err != nil {
			left = append(left, names[i])
		}
	}
	return left
}

// newBareLab builds agents' namespaces (run ID id) without the engine.
func newBareLab(t testing.TB, id string, agents ...string) *lab {
	t.Helper()
	requireLab(t)
	l := &lab{t: t, id: id, addrs: map[string]netip.Addr{}, ns: map[string]netns.NsHandle{}}
	t.Cleanup(func() {
		l.detach()
		for _, h := range l.ns {
			h.Close()
		}
		if left := removeLab(id, agents...); len(left) > 0 {
			t.Errorf("namespaces left: %v", left)
		}
	})
	if err := l.build(agents); err != nil {
		t.Fatal(err)
	}
	return l
}

// build makes the hub with its bridge, then each agent's namespace with
// eth0 (10.77.0.N/24, N from 1) on a veth whose other end is on the
// bridge. IPv6 is off everywhere: its autoconfiguration chatter would
// reach the engine.
func (l *lab) build(agents []string) error {
	names := labNamespaces(l.id, agents...)
	hub, err := nsenter.NewNamed(names[0])
	if err != nil {
		return err
	}
	defer hub.Close()
	noIPv6(hub)
	hh, err := netlink.NewHandleAt(hub)
	if err != nil {
		return err
	}
	defer hh.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := hh.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	if err := hh.LinkSetUp(br); err != nil {
		return err
	}
	for i, a := range agents {
		ns, err := nsenter.NewNamed(names[i+1])
		if err != nil {
			return err
		}
		l.ns[a] = ns
		l.addrs[a] = netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)})
		noIPv6(ns)
		port := fmt.Sprintf("v%d", i)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Index}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
		if err := hh.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth of %s: %w", a, err)
		}
		if err := hh.LinkSetUp(veth); err != nil {
			return err
		}
		if err := nsenter.Do(ns, func() error {
			for _, n := range []string{"lo", "eth0"} {
				link, err := netlink.LinkByName(n)
				if err != nil {
					return err
				}
				if n == "eth0" {
					addr := &netlink.Addr{IPNet: &net.IPNet{IP: l.addrs[a].AsSlice(), Mask: net.CIDRMask(24, 32)}}
					if err := netlink.AddrAdd(link, addr); err != nil {
						return err
					}
				}
				if err := netlink.LinkSetUp(link); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("%s: eth0: %w", a, err)
		}
	}
	return nil
}

// noIPv6 turns IPv6 off in ns (sysctl net.ipv6.conf.{all,default}).
func noIPv6(ns netns.NsHandle) {
	nsenter.Do(ns, func() error {
		for _, c := range []string{"all", "default"} {
			os.WriteFile("/proc/sys/net/ipv6/conf/"+c+"/disable_ipv6", []byte("1"), 0)
		}
		return nil
	})
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
		if _, err := l.eng.Attach(l.ns[n], a, peers); err != nil {
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
	err := nsenter.Do(l.ns[agent], func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{IP: l.addrs[agent].AsSlice(), Port: port})
		return err
	})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Close() })
	return c
}
