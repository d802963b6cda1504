package wire

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"testing"
)

// A verification done ahead gives Verify the answer it would compute:
// a valid datagram verifies, and a tampered copy, another key, another
// path or a forged "ahead" result for other bytes change nothing.
func TestVerifyAheadGivesTheSameAnswer(t *testing.T) {
	d := sample(Move)
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	other := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	bad := bytes.Clone(b)
	bad[5] ^= 1

	VerifyAhead(b, testPub, addrA, addrB)()
	if ahead.n.Load() != 1 {
		t.Fatalf("%d results waiting, want 1", ahead.n.Load())
	}
	for _, c := range []struct {
		name string
		b    []byte
		pub  ed25519.PublicKey
		src  netip.AddrPort
		want bool
	}{
		{name: "tampered", b: bad, pub: testPub, src: addrA},
		{name: "other key", b: b, pub: other, src: addrA},
		{name: "other path", b: b, pub: testPub, src: addrC},
		{name: "as sent", b: b, pub: testPub, src: addrA, want: true},
		{name: "a duplicate, verified again", b: b, pub: testPub, src: addrA, want: true},
	} {
		if got := Verify(c.b, c.pub, c.src, addrB); got != c.want {
			t.Errorf("%s: Verify = %v, want %v", c.name, got, c.want)
		}
	}
	if ahead.n.Load() != 0 {
		t.Errorf("%d results still waiting after their Verify", ahead.n.Load())
	}
	// An invalid datagram verified ahead stays invalid.
	VerifyAhead(bad, testPub, addrA, addrB)()
	if Verify(bad, testPub, addrA, addrB) {
		t.Error("a tampered datagram verified ahead passes")
	}
	// The waiting results are bounded.
	for i := range aheadCap + 10 {
		c := bytes.Clone(b)
		c[len(c)-1-i%SigLen] ^= byte(1 + i/SigLen)
		VerifyAhead(c, testPub, addrA, addrB)
	}
	if n := ahead.n.Load(); n > aheadCap {
		t.Errorf("%d results waiting, more than %d", n, aheadCap)
	}
}
