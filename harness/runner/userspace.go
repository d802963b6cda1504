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
			var p netem.Profile
			if d := dirs[[2]string{ar.a.Name, oa.a.Name}]; d != nil {
				p = d.Profile
			}
			if err := set(ar.a.Addr, oa.a.Addr, experiments.ScaleNetwork(p, r.e.NetworkTimeScale)); err != nil {
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
		p, err := r.be.AgentPort(inst)
		if err != nil {
			return err
		}
		// The replica's whole subnet goes through the engine: two routes
		// per agent, not two per peer, so that set-up stays linear in the
		// number of agents.
		dev, err := r.eng.AttachSubnet(p.NS, ar.a.Addr, r.prefixes[ar.a.Replica])
		if err != nil {
			return err
		}
		r.capDev[inst] = dev
	}
	if err := r.routeAroundEngine(); err != nil {
		return err
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

// engineSelfTest checks the plumbing before the agents start, with one
// probe per agent: each agent sends a datagram to the next agent of its
// replica (a ring), and every one of them must reach the engine. That
// proves each agent's TUN device is attached and routed and the relay
// reads it; the per-peer routes behind it were each checked by Attach.
// Probing every directed pair would cost N(N-1) probes: at 360 agents,
// 129,240 of them keep a core busy for minutes, far beyond the 2 s wait.
func (r *run) engineSelfTest() error {
	probes := r.selfTestRing()
	for _, pr := range probes {
		p, err := r.be.AgentPort(pr[0])
		if err != nil {
			return err
		}
		if err := sendFrom(p.NS, r.agents[pr[0]].a.Addr, r.agents[pr[1]].a.Addr); err != nil {
			return fmt.Errorf("userspace engine self-test %s>%s: %w", pr[0], pr[1], err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := r.eng.Stats()
		missing := ""
		for _, pr := range probes {
			a, b := r.agents[pr[0]].a, r.agents[pr[1]].a
			if st.Directions[a.Addr.String()+">"+b.Addr.String()].In == 0 {
				missing = pr[0] + ">" + pr[1]
				break
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

// selfTestRing lists the self-test's probes: each instance to the next
// one of its replica in start order, the last to the first. A replica of
// one agent has no peer to probe.
func (r *run) selfTestRing() [][2]string {
	byReplica := map[int][]string{}
	var reps []int
	for _, inst := range r.order {
		rep := r.agents[inst].a.Replica
		if _, ok := byReplica[rep]; !ok {
			reps = append(reps, rep)
		}
		byReplica[rep] = append(byReplica[rep], inst)
	}
	var probes [][2]string
	for _, rep := range reps {
		insts := byReplica[rep]
		if len(insts) < 2 {
			continue
		}
		for i, inst := range insts {
			probes = append(probes, [2]string{inst, insts[(i+1)%len(insts)]})
		}
	}
	return probes
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
