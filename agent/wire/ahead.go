package wire

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Verification ahead, for the simulator (harness/sim). A
// simulated agent declares, for each datagram it sends, the key it signed
// it with (VerifyAhead). Ed25519 signatures are correct by construction:
// a datagram signed with a key verifies under its public key, always. So
// when the receiver's Verify meets such a datagram (the same bytes, the
// same key, the same path), it answers true at once, and the verification
// itself, still computed for every datagram, runs on the simulator's
// workers, where a failure is an error that voids the run (a sender that
// declared a key it did not sign with). The loop then never waits for a
// verification: a pass is a chain of four datagrams, each verified before
// the next is signed, so waiting would leave the workers idle and the
// loop would spend about half its CPU verifying. No
// byte of a run changes: the answer is the one Verify would compute. A
// real agent never calls VerifyAhead: its Verify pays one atomic load.

// aheadCap bounds the declarations waiting for their Verify: a datagram
// dropped unverified (a crashed receiver, an unknown sender) leaves its
// entry behind until newer ones push it out; Verify then computes.
const aheadCap = 4096

type aheadEntry struct {
	b        []byte
	pub      ed25519.PublicKey
	src, dst netip.AddrPort
}

var ahead struct {
	n    atomic.Int64 // entries in m: Verify skips the lock at 0
	mu   sync.Mutex
	m    map[[SigLen]byte]*aheadEntry
	fifo [][SigLen]byte
	head int // fifo[head:] are live
}

// VerifyAhead declares that datagram b, sent src→dst, is signed with
// pub's private key, and returns the check of that declaration: it
// verifies b and returns an error if it does not verify, to run on any
// goroutine. Until the datagram's Verify, a Verify of the same bytes with
// the same key on the same path answers true without computing; with
// another key, other bytes or another path, it computes its own answer.
func VerifyAhead(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) func() error {
	if len(b) < fixedHeader+SigLen || len(b) > MaxSize {
		return func() error { return nil }
	}
	e := &aheadEntry{b: bytes.Clone(b), pub: pub, src: src, dst: dst}
	var k [SigLen]byte
	copy(k[:], b[len(b)-SigLen:])
	ahead.mu.Lock()
	if ahead.m == nil {
		ahead.m = map[[SigLen]byte]*aheadEntry{}
	}
	if _, dup := ahead.m[k]; !dup {
		ahead.m[k] = e
		ahead.fifo = append(ahead.fifo, k)
		ahead.n.Add(1)
		for len(ahead.fifo)-ahead.head > aheadCap {
			if _, ok := ahead.m[ahead.fifo[ahead.head]]; ok {
				delete(ahead.m, ahead.fifo[ahead.head])
				ahead.n.Add(-1)
			}
			ahead.head++
		}
		if ahead.head > aheadCap {
			// Reuse the array rather than let it grow by a slice per send.
			ahead.fifo = append(ahead.fifo[:0], ahead.fifo[ahead.head:]...)
			ahead.head = 0
		}
	}
	ahead.mu.Unlock()
	return func() error {
		if !verify(e.b, pub, src, dst) {
			return fmt.Errorf("wire: a datagram of %d bytes sent %v>%v does not verify under the key its sender declared (VerifyAhead): the run is void", len(e.b), src, dst)
		}
		return nil
	}
}

// takeAhead reports whether b was declared (VerifyAhead) with this key
// and path, and forgets it (a duplicate of b is verified again).
func takeAhead(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) bool {
	if ahead.n.Load() == 0 {
		return false
	}
	var k [SigLen]byte
	copy(k[:], b[len(b)-SigLen:])
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	e := ahead.m[k]
	if e == nil || e.src != src || e.dst != dst || !bytes.Equal(e.pub, pub) || !bytes.Equal(e.b, b) {
		return false
	}
	delete(ahead.m, k)
	ahead.n.Add(-1)
	return true
}
