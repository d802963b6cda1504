package wire

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Verification ahead, for the simulator (harness/sim, issue 13): an
// Ed25519 verification is a pure function of the key, the message and
// the signature, so the receiver's Verify of a datagram may be computed
// on another core as soon as the datagram is sent, while the simulation
// goes on; Verify then takes that result instead of computing it. The
// answer is the same either way, so no byte of a run changes. A real
// agent never calls VerifyAhead: its Verify pays one atomic load.

// aheadCap bounds the results waiting for their Verify: a datagram
// dropped unverified (a crashed receiver, an unknown sender) leaves its
// entry behind until newer ones push it out.
const aheadCap = 4096

type aheadEntry struct {
	b        []byte
	pub      ed25519.PublicKey
	src, dst netip.AddrPort
	once     sync.Once // the verification runs once, on whichever goroutine comes first
	ok       bool
}

func (e *aheadEntry) run() { e.once.Do(func() { e.ok = verify(e.b, e.pub, e.src, e.dst) }) }

var ahead struct {
	n    atomic.Int64 // entries in m: Verify skips the lock at 0
	mu   sync.Mutex
	m    map[[SigLen]byte]*aheadEntry
	fifo [][SigLen]byte
}

// VerifyAhead registers the verification of datagram b, sent src→dst
// and signed, the sender says, by pub; it returns the function that
// computes it, to run on any goroutine. Until it has run, a Verify of the
// same datagram with the same key waits for it; a Verify with another
// key, or of other bytes, computes its own answer; one that finds it not
// started yet runs it itself.
func VerifyAhead(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) func() {
	if len(b) < fixedHeader+SigLen || len(b) > MaxSize {
		return func() {}
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
		for len(ahead.fifo) > aheadCap {
			if old, ok := ahead.m[ahead.fifo[0]]; ok && old != nil {
				delete(ahead.m, ahead.fifo[0])
				ahead.n.Add(-1)
			}
			ahead.fifo = ahead.fifo[1:]
		}
	}
	ahead.mu.Unlock()
	return e.run
}

// takeAhead returns the verification done ahead for b, if any, waiting
// for it, and forgets it (a duplicate of b is verified again).
func takeAhead(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) (ok, found bool) {
	if ahead.n.Load() == 0 {
		return false, false
	}
	var k [SigLen]byte
	copy(k[:], b[len(b)-SigLen:])
	ahead.mu.Lock()
	e := ahead.m[k]
	if e != nil && e.src == src && e.dst == dst && bytes.Equal(e.pub, pub) && bytes.Equal(e.b, b) {
		delete(ahead.m, k)
		ahead.n.Add(-1)
	} else {
		e = nil
	}
	ahead.mu.Unlock()
	if e == nil {
		return false, false
	}
	e.run() // waits for it if it is running, runs it if it has not started
	return e.ok, true
}
