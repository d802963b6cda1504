package driver

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// floodTarget is agent A of a two-member cluster on loopback, running,
// with B's socket closed and B's credentials in the hands of a sender on
// a socket of its own: the flood tests send A what B never would.
type floodTarget struct {
	c    *cluster
	a    *Driver
	cred *ca.Credentials
	conn *net.UDPConn
	src  netip.AddrPort
	move wire.Datagram // a Move from B, with B's certificate
	stop func()        // stops A and closes the logs
}

// newFloodTarget starts A with the given rejection sample (0: the
// default, negative: every rejection logged).
func newFloodTarget(t *testing.T, sample int) *floodTarget {
	t.Helper()
	rw := func(string) randomwalk.Config { return randomwalk.Config{Hold: time.Second} }
	c := newCluster(t, []string{"A", "B"}, 0, 1, rw, passing.DefaultConfig())
	a := c.drivers["A"]
	a.Rejections.Sample = sample
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	c.socks["B"].Close()
	cred, err := ca.LoadMember(filepath.Join(c.dir, "ca"), "B", filepath.Join(c.dir, "ca", ca.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	src := netip.MustParseAddrPort(conn.LocalAddr().String())
	f := &floodTarget{c: c, a: a, cred: cred, conn: conn, src: src,
		move: wire.Datagram{Type: wire.Move, Sender: "B", Token: wire.TokenID{Gen: 1, Origin: "A"}, ReplyPort: src.Port(), Cert: cred.Cert}}
	f.stop = func() {
		time.Sleep(200 * time.Millisecond) // let the agent drain its socket
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.files["A"].Close()
		c.files["B"].Close()
	}
	return f
}

// send sends n datagrams, the i-th made by next(i), at about rate per
// second, and returns how long that took.
func (f *floodTarget) send(n, rate int, next func(i int) []byte) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		f.conn.WriteToUDPAddrPort(next(i), f.c.addrs["A"])
		if i%100 == 99 {
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * time.Second / time.Duration(rate))))
		}
	}
	return time.Since(start)
}
