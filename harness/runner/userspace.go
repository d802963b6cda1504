package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netns"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/nsenter"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// setProfiles gives every direction within a replica its profile, scaled
// to network time, through set (the userspace engine's or the
// simulator's).
func (r *run) setProfiles(set func(from, to netip.Addr, p netem.Profile) error) error {
	dirs := directionIndex(r.e) // sim.go: Direction scans all n(n-1)
	for _, inst := range r.order {
		ar := r.agents[inst]
		for _, other := range r.order {
			oa := r.agents[other]
			if other == inst || oa.a.Replica != ar.a.Replica {
				continue
			}
			d := dirs[[2]string{ar.a.Name, oa.a.Name}]
			if err := set(ar.a.Addr, oa.a.Addr, experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale)); err != nil {
				return err
			}
		}
	}
	return nil
}

// impairUserspace puts every agent behind the userspace netem engine (a
// TUN device in its namespace, see netem/userspace) and sets every
// direction's profile. The capture then moves to the TUN devices: the
// sender's sees a packet before impairment, the receiver's after.
func (r *run) impairUserspace() error {
	r.eng = userspace.New(userspace.Config{RunID: r.o.RunID, Seed: r.e.Seed, Log: r.o.Log})
	r.capDev = map[string]string{}
	for _, inst := range r.order {
		ar := r.agents[inst]
		var peers []netip.Addr
		for _, other := range r.order {
			if oa := r.agents[other]; other != inst && oa.a.Replica == ar.a.Replica {
				peers = append(peers, oa.a.Addr)
			}
		}
		p, err := r.be.AgentPort(inst)
		if err != nil {
			return err
		}
		dev, err := r.eng.Attach(p.NS, ar.a.Addr, peers)
		if err != nil {
			return err
		}
		r.capDev[inst] = dev
	}
	if err := r.setProfiles(r.eng.SetProfile); err != nil {
		return err
	}
	if err := r.eng.Start(context.Background()); err != nil {
		return err
	}
	if err := r.engineSelfTest(); err != nil {
		return err
	}
	for _, d := range r.e.Directions {
		r.event(eventlog.Event{Kind: eventlog.LinkProfile, Link: d.Key(), Profile: experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale).String(),
			Detail: "userspace engine; paper: " + d.Text})
	}
	return nil
}

// engineSelfTest checks the plumbing before the agents start: a datagram
// from every agent to every peer must reach the engine.
func (r *run) engineSelfTest() error {
	for _, inst := range r.order {
		ar := r.agents[inst]
		p, err := r.be.AgentPort(inst)
		if err != nil {
			return err
		}
		for _, other := range r.order {
			oa := r.agents[other]
			if other == inst || oa.a.Replica != ar.a.Replica {
				continue
			}
			if err := sendFrom(p.NS, ar.a.Addr, oa.a.Addr); err != nil {
				return fmt.Errorf("userspace engine self-test %s>%s: %w", inst, other, err)
			}
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := r.eng.Stats()
		missing := ""
		for _, inst := range r.order {
			for _, other := range r.order {
				a, b := r.agents[inst].a, r.agents[other].a
				if inst != other && a.Replica == b.Replica && st.Directions[a.Addr.String()+">"+b.Addr.String()].In == 0 {
					missing = inst + ">" + other
				}
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("userspace engine self-test: nothing from %s reached the engine", missing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sendFrom sends one datagram from src (in namespace ns) to dst's discard
// port.
func sendFrom(ns netns.NsHandle, src, dst netip.Addr) error {
	var c *net.UDPConn
	err := nsenter.Do(ns, func() (err error) {
		c, err = net.DialUDP("udp", &net.UDPAddr{IP: src.AsSlice()}, &net.UDPAddr{IP: dst.AsSlice(), Port: 9})
		return err
	})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("tokenbed engine self-test"))
	return err
}
