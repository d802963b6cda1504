package node

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"tokenbed/agent/wire"
)

// Peers is kept between calls; it must still be the sorted list of pass
// targets after every join, synchronisation and TTL expiry.
func TestPeersFollowTheDirectory(t *testing.T) {
	p := newPair(t)
	ttl := 2 * time.Second
	credC := credentials(t, "C")
	addrC := netip.MustParseAddrPort("10.0.0.3:7400")
	v := p.victim([]Member{{Name: "Z", Addr: netip.MustParseAddrPort("10.0.0.26:7400")}}, ttl)
	want := func(step string, names ...string) {
		t.Helper()
		if got := v.Peers(); !slices.Equal(got, names) {
			t.Fatalf("%s: Peers = %v, want %v", step, got, names)
		}
	}
	want("start", "Z")
	now := p.now.Add(DefaultMaxClockSkew + time.Millisecond)
	// A joins: its Move alone does not make it a target, its Commit (an
	// answer to our Ack) does. Then A, which is not configured, relays
	// C's entry, which C signed (synchronisation, unverified: C's key is
	// not known yet): C is a candidate, not a target.
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	v.Receive(now, p.addrA, p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 1, Cert: p.credA.Cert}, p.addrA, p.addrB))
	v.Ready()
	want("after A's first Move", "Z")
	v.Receive(now, p.addrA, p.signed(wire.Datagram{Type: wire.Commit, Token: tok, Session: 1, Nonce: 2}, p.addrA, p.addrB))
	v.Ready()
	want("after A's Commit", "A", "Z")
	c := wire.Entry{Name: "C", Addr: addrC, Seen: now.UnixNano()}
	c.Sign(credC.Key)
	tok2 := wire.TokenID{Gen: 43, Origin: "A"} // B holds tok now
	v.Receive(now, p.addrA, p.signed(wire.Datagram{Type: wire.Move, Token: tok2, Session: 1, Nonce: 3, Dir: []wire.Entry{c}}, p.addrA, p.addrB))
	v.Ready()
	want("after A relayed C", "A", "Z")
	if v.dir["C"] == nil {
		t.Fatal("C's entry was not kept as a candidate")
	}
	// Neither A nor C is heard of again: both expire; Z, given at start,
	// stays.
	for end := now.Add(3 * ttl); now.Before(end); now = now.Add(100 * time.Millisecond) {
		v.Tick(now)
	}
	v.Ready()
	want("after directory_ttl", "Z")
}
