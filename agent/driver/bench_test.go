package driver

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/node"
	"tokenbed/agent/passing"
)

// BenchmarkPassLoopback measures whole passes between two agents over real
// UDP on 127.0.0.1 and, in the same run, a plain UDP ping-pong between two
// Go sockets: the baseline. It reports the pass latency (first Move sent to
// EarlyStop received, 002 §3.1) at p50 and p99, the ping-pong round trip at
// p50 and p99, and the overhead over the target "2 × RTT + 150 µs".
func BenchmarkPassLoopback(b *testing.B) {
	rtts := pingPong(b, 2000)
	pc := passing.DefaultConfig()
	rw := func(name string) randomwalk.Config {
		// A short hold keeps passes from overlapping: the latency of one pass is
		// measured, not the contention between two.
		return randomwalk.Config{Hold: time.Millisecond, RegenerateAfter: 0, GenerateAtStart: name == "A"}
	}
	c := newCluster(b, []string{"A", "B"}, 0, 1, rw, pc)
	var mu sync.Mutex
	var lat []time.Duration
	done := make(chan struct{})
	want := b.N + 100 // the first passes exchange certificates
	for _, n := range c.names {
		c.drivers[n].OnReady = func(r node.Ready) {
			for _, e := range r.Events {
				if e.Kind == eventlog.PassCompleted {
					mu.Lock()
					lat = append(lat, time.Duration(e.LatencyNS))
					if len(lat) == want {
						close(done)
					}
					mu.Unlock()
				}
			}
		}
	}
	b.ResetTimer()
	c.start()
	<-done
	b.StopTimer()
	c.stop()
	mu.Lock()
	lat = lat[100:]
	mu.Unlock()
	p := func(xs []time.Duration, q float64) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	lp50, lp99, rp50, rp99 := p(lat, 0.5), p(lat, 0.99), p(rtts, 0.5), p(rtts, 0.99)
	b.ReportMetric(float64(lp50.Microseconds()), "pass-p50-µs")
	b.ReportMetric(float64(lp99.Microseconds()), "pass-p99-µs")
	b.ReportMetric(float64(rp50.Microseconds()), "rtt-p50-µs")
	b.ReportMetric(float64(rp99.Microseconds()), "rtt-p99-µs")
	target := 2*rp50 + 150*time.Microsecond
	b.ReportMetric(float64(lp50)/float64(target), "pass/target")
	b.ReportMetric(float64(lp50)/float64(rp50), "pass/rtt")
}

// pingPong measures n round trips of a 200-byte UDP datagram between two
// sockets on loopback, each served by its own goroutine, as the agents are.
func pingPong(b *testing.B, n int) []time.Duration {
	a, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	e, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := e.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			e.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	msg := make([]byte, 200)
	buf := make([]byte, 2048)
	to := netip.MustParseAddrPort(e.LocalAddr().String())
	rtts := make([]time.Duration, 0, n)
	for i := 0; i < n+100; i++ {
		t0 := time.Now()
		a.WriteToUDPAddrPort(msg, to)
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			b.Fatal(err)
		}
		if i >= 100 {
			rtts = append(rtts, time.Since(t0))
		}
	}
	return rtts
}
