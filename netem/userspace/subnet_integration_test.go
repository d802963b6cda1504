package userspace

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// AttachSubnet (two routes per agent, whatever the peers) carries traffic to every
// peer in the subnet through the engine, the connected route of the
// agents' link included, and fails closed like Attach: once the engine's
// devices are gone, nothing reaches a peer over the bridge.
func TestAttachSubnetCarriesAndFailsClosed(t *testing.T) {
	l := newBareLab(t, "tbe11a0a", "A", "B")
	l.eng = New(Config{RunID: "tbe11a0a", Seed: 7})
	subnet := netip.MustParsePrefix("10.77.0.0/24")
	for _, n := range []string{"A", "B"} {
		if _, err := l.eng.AttachSubnet(l.ns[n], l.addrs[n], subnet); err != nil {
			t.Fatal(err)
		}
	}
	l.profile("A", "B", "delay 1ms")
	l.profile("B", "A", "delay 1ms")
	if err := l.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, b := l.socket("A", 9000), l.socket("B", 9000)
	a.WriteToUDPAddrPort([]byte("through"), netip.AddrPortFrom(l.addrs["B"], 9000))
	buf := make([]byte, 64)
	b.SetReadDeadline(time.Now().Add(time.Second))
	if _, _, err := b.ReadFromUDP(buf); err != nil {
		t.Fatalf("A>B through the engine: %v", err)
	}
	if d := l.eng.Stats().Directions[l.addrs["A"].String()+">"+l.addrs["B"].String()]; d.In != 1 || d.Delivered != 1 {
		t.Fatalf("A>B: %+v, want the datagram carried by the engine (in 1, delivered 1)", d)
	}
	l.eng.mu.Lock()
	for _, p := range l.eng.ports {
		unix.Close(p.fd)
		p.fd = -1
	}
	l.eng.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	a.WriteToUDPAddrPort([]byte("after death"), netip.AddrPortFrom(l.addrs["B"], 9000))
	b.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := b.ReadFromUDP(buf); err == nil {
		t.Fatalf("a datagram (%q) flowed over the bridge after the engine died", buf[:n])
	}
}
