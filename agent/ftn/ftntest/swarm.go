package ftntest

import (
	"fmt"
	"math/rand/v2"

	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/msg"
)

// Workload is the clients' random activity: each round an idle client
// starts an operation with probability Rate; one holding a token sets
// (exclusive holds, and shared ones if SharedWrites) or reads its data or
// releases it, one holding none acquires one of Names names, shared with
// probability Shared.
type Workload struct {
	Names  int
	Shared float64
	Rate   float64
	// SharedWrites: shared holders write too (001 "Token data":
	// updating by shared holders is FCFS).
	SharedWrites bool
}

// Drive invokes one round's operations, from rnd.
func (c *Cluster) Drive(rnd *rand.Rand, w Workload) {
	for j, n := range c.clients {
		if n.c == nil || !n.c.Registered() || n.c.Pending() > 0 || rnd.Float64() >= w.Rate {
			continue
		}
		holds := n.c.Holds()
		if len(holds) > 0 {
			for name, h := range holds {
				switch x := rnd.IntN(4); {
				case x == 0 && (h.Mode == msg.Exclusive || w.SharedWrites):
					c.Invoke(j, client.Op{Kind: msg.SetData, Name: name, Data: []byte(fmt.Sprintf("%s@%d", n.peer.Name, c.tick))})
				case x == 1:
					c.Invoke(j, client.Op{Kind: msg.GetData, Name: name})
				default:
					c.Invoke(j, client.Op{Kind: msg.Release, Name: name})
				}
				break
			}
			continue
		}
		mode := msg.Exclusive
		if rnd.Float64() < w.Shared {
			mode = msg.Shared
		}
		c.Invoke(j, client.Op{Kind: msg.Acquire, Name: fmt.Sprintf("t%d", rnd.IntN(w.Names)), Mode: mode})
	}
}

// Swarm runs a random schedule of faults under a random workload, all
// from seed (TigerBeetle's VOPR idea on a small scale): server crashes
// and restarts, a server partitioned from the others, client crashes and
// restarts, a client cut off long enough to be dropped, and a minority of
// servers with the leader cut off from the others. It heals everything
// for the last quarter of the rounds. One fault at a time, so a majority
// of servers always remains.
func Swarm(o Options, w Workload, rounds int) (*Cluster, error) {
	c, err := New(o)
	if err != nil {
		return nil, err
	}
	rnd := rand.New(rand.NewPCG(o.Seed, 0x7377))
	c.Run(30)
	faultEnd, faulty := 0, false
	for r := 0; r < rounds; r++ {
		c.Drive(rnd, w)
		c.Step()
		if faulty && r >= faultEnd {
			for i, n := range c.servers {
				if n.s == nil {
					if err := c.RestartServer(i); err != nil {
						return nil, err
					}
				}
			}
			for j, n := range c.clients {
				if n.c == nil {
					if err := c.RestartClient(j); err != nil {
						return nil, err
					}
				}
			}
			c.Heal()
			faulty = false
			faultEnd = r + 20 + rnd.IntN(20) // quiet time
			continue
		}
		if faulty || r < faultEnd || r > rounds*3/4 {
			continue
		}
		faulty = true
		faultEnd = r + 15 + rnd.IntN(30)
		si := rnd.IntN(len(c.servers))
		cj := rnd.IntN(len(c.clients))
		all := func() []string {
			var ns []string
			for _, n := range c.servers {
				ns = append(ns, n.peer.Name)
			}
			for _, n := range c.clients {
				ns = append(ns, n.peer.Name)
			}
			return ns
		}
		others := func(x string) []string {
			var ns []string
			for _, n := range all() {
				if n != x {
					ns = append(ns, n)
				}
			}
			return ns
		}
		switch rnd.IntN(6) {
		case 0:
			c.CrashServer(si)
		case 1: // a server cut off from the other servers only
			var ss []string
			for i, n := range c.servers {
				if i != si {
					ss = append(ss, n.peer.Name)
				}
			}
			c.Partition([]string{c.servers[si].peer.Name}, ss)
		case 2:
			c.CrashClient(cj)
		case 3: // a client cut off from everyone: dropped if long enough
			c.Partition([]string{c.clients[cj].peer.Name}, others(c.clients[cj].peer.Name))
		case 4: // the leader crashes
			for i, n := range c.servers {
				if n.s != nil && n.s.IsLeader() {
					c.CrashServer(i)
					break
				}
			}
		case 5: // a minority with the leader, cut off from the other servers
			var minority, majority []string
			for _, n := range c.servers {
				if n.s != nil && n.s.IsLeader() {
					minority = append(minority, n.peer.Name)
				}
			}
			for _, n := range c.servers {
				if len(minority) > 0 && n.peer.Name != minority[0] {
					if len(minority) < (len(c.servers)-1)/2 {
						minority = append(minority, n.peer.Name)
					} else {
						majority = append(majority, n.peer.Name)
					}
				}
			}
			c.Partition(minority, majority)
		}
	}
	// Let the last operations finish.
	c.Run(60)
	return c, nil
}
