package ftntest

import (
	"maps"
	"slices"
	"testing"

	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/msg"
)

// TestLateDuplicates runs the swarm's random faults and workload with
// every client datagram duplicated with probability 0.2, the copy up to
// 30 rounds late (netem duplicate with a large jitter, no attacker). A
// late Acquire, SetData or reply must change nothing: no hold that its
// client does not know of (a phantom, never released), fences in order
// per name, and every operation answered once the faults are healed and
// every client releases what it holds (a phantom is never released, and
// whoever waits for its name waits for ever: the stall of a replayed
// Acquire).
func TestLateDuplicates(t *testing.T) {
	w := Workload{Names: 4, Shared: 0.3, Rate: 0.3}
	for seed := uint64(1); seed <= 6; seed++ {
		o := Options{Servers: 3 + 2*int(seed%2), Clients: 5, Seed: seed, Dup: 0.2, DupDelay: 30}
		c, err := Swarm(o, w, 400)
		if err != nil {
			t.Fatal(err)
		}
		releaseAll(c)
		if ps := c.Phantoms(); len(ps) > 0 {
			t.Errorf("seed %d: holds no client knows of: %v", seed, ps)
		}
		f, err := fences(c.Log())
		if err != nil {
			t.Fatal(err)
		}
		if f != "ok" {
			t.Errorf("seed %d: fences %s", seed, f)
		}
		for j := range c.clients {
			if cl := c.Client(j); cl != nil && cl.Registered() && cl.Pending() > 0 {
				t.Errorf("seed %d: c%d has %d operations unanswered at the end", seed, j, cl.Pending())
			}
		}
	}
}

// releaseAll has every client release what it holds, round after round,
// until nothing is pending (or 100 rounds pass).
func releaseAll(c *Cluster) {
	for range 20 {
		busy := false
		for j := range c.clients {
			cl := c.Client(j)
			if cl == nil || !cl.Registered() {
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(cl.Holds())) {
				c.Invoke(j, client.Op{Kind: msg.Release, Name: name})
			}
			busy = busy || cl.Pending() > 0
		}
		c.Run(5)
		if !busy {
			return
		}
	}
}
