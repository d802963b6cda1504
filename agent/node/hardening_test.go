package node

import (
	"crypto/ed25519"
	"crypto/rand"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// reissue returns a second valid certificate and key for name, from the
// same CA as the simulation's (a re-issued or an old certificate).
func reissue(t *testing.T, name string) *ca.Credentials {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{ca.CACertFile, ca.CAKeyFile} {
		b, err := os.ReadFile(filepath.Join(simCA.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := ca.Issue(dir, name); err != nil {
		t.Fatal(err)
	}
	c, err := ca.LoadMember(dir, name, filepath.Join(dir, ca.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// member node named "B" at p.addrB, with the given peers and TTL, started
// at p.now.
func (p *pair) victim(peers []Member, ttl time.Duration) *Node {
	n, err := New(Config{Name: "B", Addr: p.addrB, Key: p.credB.Key, Cert: p.credB.Cert, CA: ca.NewVerifier(p.credB.CA),
		Passing: passing.DefaultConfig(), Policy: rw(time.Hour, false), Peers: peers, DirectoryTTL: ttl, Rand: mrand.New(mrand.NewPCG(1, 2))})
	if err != nil {
		p.t.Fatal(err)
	}
	n.Start(p.now)
	n.Ready()
	return n
}

func pub(c *ca.Credentials) ed25519.PublicKey { return c.Key.Public().(ed25519.PublicKey) }

// A datagram carrying another valid certificate of A (same CA) but a
// signature that does not verify must not displace the key A signs with;
// A's certificate-less datagrams are still accepted afterwards. A
// datagram that carries a new certificate and verifies under its key is
// a legitimate re-key (002 §3).
func TestForeignCertificateDoesNotReplaceCachedKey(t *testing.T) {
	p := newPair(t)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	b := p.b
	b.Receive(p.now, p.addrA, p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 1, Cert: p.credA.Cert}, p.addrA, p.addrB))
	if r := b.Ready(); len(r.Packets) != 1 || !pub(p.credA).Equal(b.keys["A"]) {
		t.Fatalf("genuine Move with certificate: %d replies, key cached %v", len(r.Packets), b.keys["A"] != nil)
	}
	other := reissue(t, "A")
	fresh := uint64(p.now.Add(DefaultMaxClockSkew).UnixNano())
	forge := func(key ed25519.PrivateKey, nonce uint64, randomSig bool) []byte {
		d := wire.Datagram{Type: wire.Move, Sender: "A", Token: wire.TokenID{Gen: 43, Origin: "A"}, Session: 1, Nonce: fresh + nonce, ReplyPort: 7400, Cert: other.Cert}
		data, err := d.Encode(key, p.addrA, p.addrB)
		if err != nil {
			t.Fatal(err)
		}
		if randomSig {
			rand.Read(data[len(data)-wire.SigLen:])
		}
		return data
	}
	for name, data := range map[string][]byte{
		"random signature":            forge(other.Key, 2, true),
		"signed with the cached key":  forge(p.credA.Key, 3, false),
		"signed by another member":    forge(p.credB.Key, 4, false),
		"random signature, other key": forge(p.credA.Key, 5, true),
	} {
		if reason, ok := p.rejectedBy(b, data, p.addrA); !ok || reason != "bad-signature" {
			t.Errorf("%s: %q %v, want bad-signature", name, reason, ok)
		}
		if !pub(p.credA).Equal(b.keys["A"]) {
			t.Fatalf("%s: the cached key of A was replaced", name)
		}
	}
	// A's genuine Commit, without certificate, still verifies: B acquires.
	b.Receive(p.now, p.addrA, p.signed(wire.Datagram{Type: wire.Commit, Token: tok, Session: 1, Nonce: 6}, p.addrA, p.addrB))
	if b.Ready(); len(b.Held()) != 1 || b.Rejected()["bad-signature"] != 4 {
		t.Fatalf("genuine Commit after the forgeries: held %v, rejected %v", b.Held(), b.Rejected())
	}
	// Re-key: A now signs with its new key and sends the new certificate.
	b.Receive(p.now, p.addrA, forge(other.Key, 7, false))
	if r := b.Ready(); len(r.Packets) != 1 || !pub(other).Equal(b.keys["A"]) {
		t.Fatalf("re-key: %d replies, key replaced %v", len(r.Packets), pub(other).Equal(b.keys["A"]))
	}
	// ... after which the old key no longer signs for A.
	old := p.signed(wire.Datagram{Type: wire.Commit, Token: wire.TokenID{Gen: 43, Origin: "A"}, Session: 1, Nonce: 8}, p.addrA, p.addrB)
	if reason, ok := p.rejectedBy(b, old, p.addrA); !ok || reason != "bad-signature" {
		t.Errorf("old key after re-key: %q %v, want bad-signature", reason, ok)
	}
}

// Directory entries are authenticated by the member they describe: an
// insider cannot point another member's entry at itself, entries from
// the future are refused, hearsay never overrides what was verified or
// configured, and only verified entries are relayed (002 §3.2).
func TestInsiderCannotRedirectAnotherMembersEntry(t *testing.T) {
	p := newPair(t)
	credC := credentials(t, "C")
	addrC := netip.MustParseAddrPort("10.0.0.3:7400")
	addrC2 := netip.MustParseAddrPort("10.0.0.33:7400")
	addrD := netip.MustParseAddrPort("10.0.0.4:7400")
	S := DefaultMaxClockSkew
	v := p.victim([]Member{{Name: "A", Addr: p.addrA}, {Name: "C", Addr: addrC, Key: pub(credC)}, {Name: "D", Addr: addrD}}, 0)
	entry := func(name string, addr netip.AddrPort, seen time.Time, key ed25519.PrivateKey) wire.Entry {
		e := wire.Entry{Name: name, Addr: addr, Seen: seen.UnixNano()}
		e.Sign(key)
		return e
	}
	genuine := entry("C", addrC, p.now, credC.Key)
	tampered := genuine
	tampered.Addr, tampered.Seen = p.addrA, p.now.Add(time.Millisecond).UnixNano()
	session := uint64(0)
	send := func(dir ...wire.Entry) []wire.Entry {
		session++
		d := wire.Datagram{Type: wire.Move, Token: wire.TokenID{Gen: 42, Origin: "A"}, Session: session, Nonce: session, Cert: p.credA.Cert, Dir: dir}
		v.Receive(p.now, p.addrA, p.signed(d, p.addrA, p.addrB))
		r := v.Ready()
		if len(r.Packets) != 1 {
			t.Fatalf("Move %d: %d replies, want an Ack", session, len(r.Packets))
		}
		got, err := wire.Decode(r.Packets[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		return got.Dir
	}
	send(
		entry("C", p.addrA, p.now.Add(time.Millisecond), p.credA.Key), // C at M's address, signed by M
		tampered,
		entry("C", addrC2, p.now.Add(2*S), credC.Key),                 // C's own, but from the future
		entry("D", p.addrA, p.now.Add(time.Millisecond), p.credA.Key), // D (key unknown, configured) at M's address
		entry("X", p.addrA, p.now, p.credA.Key),                       // X: unknown, unverifiable
	)
	if v.dir["C"].addr != addrC || v.dir["D"].addr != addrD {
		t.Fatalf("after the insider's entries: C at %v (want %v), D at %v (want %v)", v.dir["C"].addr, addrC, v.dir["D"].addr, addrD)
	}
	if v.dir["X"] == nil || v.dir["X"].trusted {
		t.Fatalf("X, unverifiable, should be held as an untrusted candidate: %+v", v.dir["X"])
	}
	// C's own newer entry (a move, within the skew bound) is accepted and
	// relayed verbatim; X's unverified one is not relayed.
	moved := entry("C", addrC2, p.now.Add(S/2), credC.Key)
	relayed := send(moved)
	if v.dir["C"].addr != addrC2 {
		t.Fatalf("C's own signed move to %v was not applied: %v", addrC2, v.dir["C"].addr)
	}
	var sawC bool
	for _, e := range relayed {
		switch e.Name {
		case "X":
			t.Errorf("relayed X's unverified entry")
		case "C":
			sawC = e == moved && e.VerifyEntry(pub(credC))
		}
	}
	if !sawC {
		t.Errorf("C's entry not relayed verbatim: %+v", relayed)
	}
	// The insider tries again with later times: nothing moves C.
	send(entry("C", p.addrA, p.now.Add(S), p.credA.Key), moved)
	if v.dir["C"].addr != addrC2 {
		t.Fatalf("C moved to %v by the insider", v.dir["C"].addr)
	}
}

// A replayed datagram that the endpoint rejects is no evidence that its
// sender is alive: with directory_ttl set, a member that left is
// forgotten however often its old datagrams are replayed (002 §3.1,
// §3.2).
func TestReplaysDoNotKeepADepartedMemberAlive(t *testing.T) {
	p := newPair(t)
	ttl := 2 * time.Second
	v := p.victim([]Member{{Name: "A", Addr: p.addrA}}, ttl)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	move := p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 5, Nonce: 1, Cert: p.credA.Cert}, p.addrA, p.addrB)
	commit := p.signed(wire.Datagram{Type: wire.Commit, Token: tok, Session: 5, Nonce: 2}, p.addrA, p.addrB)
	now := p.now.Add(DefaultMaxClockSkew + time.Millisecond)
	v.Receive(now, p.addrA, move)
	v.Receive(now, p.addrA, commit)
	v.Ready()
	if len(v.Held()) != 1 {
		t.Fatal("B did not acquire the token")
	}
	// A leaves; its Move and Commit are replayed every 100 ms.
	var gone time.Time
	for end := now.Add(4 * ttl); now.Before(end) && gone.IsZero(); now = now.Add(100 * time.Millisecond) {
		for _, d := range [][]byte{move, commit} {
			v.Receive(now, p.addrA, d)
		}
		v.Tick(now)
		for _, e := range v.Ready().Events {
			if e.Kind == eventlog.PeerRemoved && e.Peer == "A" {
				gone = now
			}
		}
	}
	if gone.IsZero() {
		t.Fatalf("replays kept A in the directory for %v with directory_ttl %v (rejected %v)", 4*ttl, ttl, v.Rejected())
	}
	if v.Rejected()["stale-session"] == 0 {
		t.Errorf("the replays were not rejected as stale: %v", v.Rejected())
	}
}
