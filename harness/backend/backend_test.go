package backend

import (
	"net/netip"
	"testing"
)

// Replicas of up to 254 agents keep their /24 numbered r; larger ones get
// a block that holds every agent's address (AgentAddr host numbers 1..n)
// below its broadcast address, and replicas never overlap.
func TestReplicaPrefixForHoldsEveryAgent(t *testing.T) {
	base := netip.MustParsePrefix("10.77.0.0/16")
	for _, c := range []struct {
		r, n int
		want string
	}{
		{0, 3, "10.77.0.0/24"},
		{5, 254, "10.77.5.0/24"},
		{0, 255, "10.77.0.0/23"},
		{1, 360, "10.77.2.0/23"},
		{0, 1000, "10.77.0.0/22"},
	} {
		p, err := ReplicaPrefixFor(base, c.r, c.n)
		if err != nil || p.String() != c.want {
			t.Errorf("ReplicaPrefixFor(%d, %d) = %v, %v; want %s", c.r, c.n, p, err, c.want)
			continue
		}
		last := AgentAddr(p, c.n-1)
		bcast := AgentAddr(p, (1<<(32-p.Bits()))-2)
		if !p.Contains(last) || last == bcast {
			t.Errorf("replica %d of %d: last agent %v outside %v or on its broadcast address", c.r, c.n, last, p)
		}
	}
	if _, err := ReplicaPrefixFor(base, 200, 360); err == nil {
		t.Error("replica 200 of 360 agents fit in a /16")
	}
}
