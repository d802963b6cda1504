package wire

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"testing"
)

// A datagram declared ahead verifies at once for the same bytes, key and
// path, and only for them; its check passes. A tampered copy, another
// key or another path compute their own answer.
func TestVerifyAheadGivesTheSameAnswer(t *testing.T) {
	t.Cleanup(forgetAhead)
	d := sample(Move)
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	other := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	bad := bytes.Clone(b)
	bad[5] ^= 1

	check := VerifyAhead(b, testPub, addrA, addrB)
	if ahead.n.Load() != 1 {
		t.Fatalf("%d declarations waiting, want 1", ahead.n.Load())
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
	if err := check(); err != nil {
		t.Errorf("check of a datagram signed with the declared key: %v", err)
	}
	if ahead.n.Load() != 0 {
		t.Errorf("%d declarations still waiting after their Verify", ahead.n.Load())
	}
	// The waiting declarations are bounded.
	for i := range aheadCap + 10 {
		c := bytes.Clone(b)
		c[len(c)-1-i%SigLen] ^= byte(1 + i/SigLen)
		VerifyAhead(c, testPub, addrA, addrB)
	}
	if n := ahead.n.Load(); n > aheadCap {
		t.Errorf("%d declarations waiting, more than %d", n, aheadCap)
	}
}

// A false declaration (bytes that do not verify under the key declared)
// fails its check, whether its Verify came first or not: the simulator
// voids the run on it, so Verify's early true never stands.
func TestVerifyAheadFalseDeclarationFailsItsCheck(t *testing.T) {
	t.Cleanup(forgetAhead)
	d := sample(Ack)
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(b)
	bad[7] ^= 1
	check := VerifyAhead(bad, testPub, addrA, addrB)
	if !Verify(bad, testPub, addrA, addrB) {
		t.Error("Verify of a declared datagram did not answer at once")
	}
	if check() == nil {
		t.Error("the check of a datagram that does not verify passed")
	}
	if Verify(bad, testPub, addrA, addrB) {
		t.Error("a tampered datagram verified once its declaration was taken")
	}
	if VerifyAhead(b, testPub, addrA, addrB)() != nil {
		t.Error("the check of a datagram signed with the declared key failed")
	}
}

// forgetAhead drops the declarations a test left unchecked: in a
// simulation every check runs, here they would answer other tests.
func forgetAhead() {
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	ahead.m, ahead.fifo, ahead.head = nil, nil, 0
	ahead.n.Store(0)
}
