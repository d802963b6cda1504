package node

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
)

// BenchmarkPass measures the agent's own work per pass between two nodes
// (Move, Ack, Commit, EarlyStop: four signatures made, four verified, the
// directories synchronised), with no network: virtual time, in memory.
func BenchmarkPass(b *testing.B) {
	simCA.dir = ""
	names := []string{"A", "B"}
	addrs := map[string]netip.AddrPort{"A": netip.MustParseAddrPort("10.0.0.1:7400"), "B": netip.MustParseAddrPort("10.0.0.2:7400")}
	byAddr := map[netip.AddrPort]string{addrs["A"]: "A", addrs["B"]: "B"}
	now := time.Now()
	nodes := map[string]*Node{}
	for i, name := range names {
		cred := credentials(b, name)
		peer := names[1-i]
		n, err := New(Config{Name: name, Addr: addrs[name], Key: cred.Key, Cert: cred.Cert, CA: ca.NewVerifier(cred.CA),
			Passing: passing.DefaultConfig(), Policy: randomwalk.New(randomwalk.Config{Hold: time.Millisecond, GenerateAtStart: i == 0}),
			Peers: []Member{{Name: peer, Addr: addrs[peer]}}, Rand: rand.New(rand.NewPCG(1, uint64(i)))})
		if err != nil {
			b.Fatal(err)
		}
		nodes[name] = n
	}
	type pkt struct {
		to   string
		from netip.AddrPort
		data []byte
	}
	var q []pkt
	acquired := 0
	flush := func(name string) {
		n := nodes[name]
		r := n.Ready()
		for _, e := range r.Events {
			if e.Kind == eventlog.TokenAcquired {
				acquired++
			}
		}
		for _, p := range r.Packets {
			q = append(q, pkt{byAddr[p.To], addrs[name], p.Data})
		}
		n.Prepare(now)
	}
	for _, name := range names {
		nodes[name].Start(now)
		flush(name)
	}
	step := func() {
		if len(q) > 0 {
			p := q[0]
			q = q[1:]
			now = now.Add(50 * time.Microsecond)
			nodes[p.to].Receive(now, p.from, p.data)
			flush(p.to)
			return
		}
		// Nothing in flight: jump to the next timer.
		var next time.Time
		for _, name := range names {
			if d, ok := nodes[name].Deadline(); ok && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
		now = next
		for _, name := range names {
			if d, ok := nodes[name].Deadline(); ok && !now.Before(d) {
				nodes[name].Tick(now)
				flush(name)
			}
		}
	}
	for acquired < 100 { // certificates exchanged, start-up over
		step()
	}
	acquired = 0
	b.ResetTimer()
	for acquired < b.N {
		step()
	}
}
