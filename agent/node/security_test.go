package node

import (
	"crypto/ed25519"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
	"tokenbed/agent/wire"
)

// A pair of nodes wired by hand, to hand-craft datagrams between them.
type pair struct {
	t          testing.TB
	a, b       *Node
	credA      *ca.Credentials
	credB      *ca.Credentials
	addrA      netip.AddrPort
	addrB      netip.AddrPort
	now        time.Time
	lastFromA  []byte
	lastToAddr netip.AddrPort
}

func newPair(t testing.TB) *pair {
	simCA.dir = ""
	p := &pair{t: t, credA: credentials(t, "A"), credB: credentials(t, "B"),
		addrA: netip.MustParseAddrPort("10.0.0.1:7400"), addrB: netip.MustParseAddrPort("10.0.0.2:7400"), now: time.Now()}
	mk := func(c *ca.Credentials, self netip.AddrPort, peer Member, gen bool) *Node {
		n, err := New(Config{Name: c.Name, Addr: self, Key: c.Key, Cert: c.Cert, CA: ca.NewVerifier(c.CA), Passing: passing.DefaultConfig(),
			Policy: rw(time.Hour, gen), Peers: []Member{peer}, Rand: rand.New(rand.NewPCG(1, 2))})
		if err != nil {
			t.Fatal(err)
		}
		n.Start(p.now)
		n.Ready()
		return n
	}
	p.a = mk(p.credA, p.addrA, Member{Name: "B", Addr: p.addrB}, true)
	p.b = mk(p.credB, p.addrB, Member{Name: "A", Addr: p.addrA}, false)
	return p
}

// signed builds a datagram from A, signed by A's key for src→dst. Its
// nonce counts from the first nonce the nodes accept (start + skew).
func (p *pair) signed(d wire.Datagram, src, dst netip.AddrPort) []byte {
	d.Sender = "A"
	d.Nonce += uint64(p.now.Add(DefaultMaxClockSkew).UnixNano())
	if d.Type == wire.Move || d.Type == wire.Ack {
		d.ReplyPort = 7400
	}
	b, err := d.Encode(p.credA.Key, src, dst)
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

func (p *pair) rejectedBy(n *Node, b []byte, from netip.AddrPort) (string, bool) {
	before := map[string]uint64{}
	for k, v := range n.Rejected() {
		before[k] = v
	}
	n.Receive(p.now, from, b)
	r := n.Ready()
	if len(r.Packets) > 0 {
		return "", false
	}
	for k, v := range n.Rejected() {
		if v > before[k] {
			for _, e := range r.Events {
				if e.Kind == eventlog.DatagramRejected && e.Reason == k {
					return k, true
				}
			}
			p.t.Fatalf("rejection %s counted but not logged", k)
		}
	}
	return "", false
}

// Every illegal datagram is dropped without reply, counted by reason and
// logged (002 §3.1).
func TestIllegalDatagramsAreDroppedSilently(t *testing.T) {
	p := newPair(t)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	move := wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 1, Cert: p.credA.Cert}
	good := p.signed(move, p.addrA, p.addrB)
	other := netip.MustParseAddrPort("10.0.0.9:7400")

	cases := []struct {
		name   string
		data   []byte
		from   netip.AddrPort
		reason string
	}{
		// First, while B has no key for A: dropped until A sends its certificate.
		{"unknown sender, no certificate", p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 2}, p.addrA, p.addrB), p.addrA, "unknown-key"},
		{"garbage", []byte("not a datagram at all, but long enough to look like one........................"), p.addrA, "malformed:magic"},
		{"truncated", good[:40], p.addrA, "malformed:datagram"},
		{"unsigned (signature zeroed)", append(append([]byte(nil), good[:len(good)-64]...), make([]byte, 64)...), p.addrA, "bad-signature"},
		{"mis-signed (a bit flipped)", flip(good, 30), p.addrA, "bad-signature"},
		{"from another source", good, other, "bad-signature"},
		{"to another destination", p.signed(move, p.addrA, other), p.addrA, "bad-signature"},
	}
	for _, c := range cases {
		reason, ok := p.rejectedBy(p.b, c.data, c.from)
		if !ok || reason != c.reason {
			t.Errorf("%s: rejected=%v reason %q, want %q", c.name, ok, reason, c.reason)
		}
	}
	// A certificate from another CA does not get a key cached.
	simCA.dir = ""
	rogue := credentials(t, "A")
	d := wire.Datagram{Type: wire.Move, Sender: "A", Token: tok, Session: 1, Nonce: 3, ReplyPort: 7400, Cert: rogue.Cert}
	b, _ := d.Encode(rogue.Key, p.addrA, p.addrB)
	if reason, ok := p.rejectedBy(p.b, b, p.addrA); !ok || reason != "bad-certificate" {
		t.Errorf("certificate of another CA: %q %v", reason, ok)
	}
	// A certificate for a different name than the sender's.
	simCA.dir = p.credsDir()
	d = wire.Datagram{Type: wire.Move, Sender: "A", Token: tok, Session: 1, Nonce: 4, ReplyPort: 7400, Cert: p.credB.Cert}
	b, _ = d.Encode(p.credA.Key, p.addrA, p.addrB)
	if reason, ok := p.rejectedBy(p.b, b, p.addrA); !ok || reason != "certificate-name-mismatch" {
		t.Errorf("someone else's certificate: %q %v", reason, ok)
	}
}

func (p *pair) credsDir() string { return simCA.dir }

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}

// Replays: a datagram of a session that completed, or older than the one
// recorded, is illegal (002 §3.1); a duplicate of the current session is
// handled idempotently.
func TestReplaysAndDuplicates(t *testing.T) {
	p := newPair(t)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	mv := func(session, nonce uint64) []byte {
		return p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: session, Nonce: nonce, Cert: p.credA.Cert}, p.addrA, p.addrB)
	}
	cm := func(session, nonce uint64) []byte {
		return p.signed(wire.Datagram{Type: wire.Commit, Token: tok, Session: session, Nonce: nonce}, p.addrA, p.addrB)
	}
	// Session 5: Move, then a duplicate Move (answered again: our Ack may
	// have been lost), then Commit: B acquires.
	p.b.Receive(p.now, p.addrA, mv(5, 1))
	if r := p.b.Ready(); len(r.Packets) != 1 {
		t.Fatalf("Move: %d datagrams sent, want one Ack", len(r.Packets))
	}
	p.b.Receive(p.now, p.addrA, mv(5, 1))
	if r := p.b.Ready(); len(r.Packets) != 1 {
		t.Fatalf("duplicate Move: %d datagrams sent, want the Ack again", len(r.Packets))
	}
	p.b.Receive(p.now, p.addrA, cm(5, 2))
	r := p.b.Ready()
	if len(r.Packets) != 1 || len(p.b.Held()) != 1 {
		t.Fatalf("Commit: %d datagrams, %d tokens held; want one EarlyStop and the token", len(r.Packets), len(p.b.Held()))
	}
	// Replays of the completed session, and of an older one.
	for name, b := range map[string][]byte{"Commit again": cm(5, 2), "Move again": mv(5, 1), "older Move": mv(4, 9), "older Commit": cm(3, 9)} {
		if reason, ok := p.rejectedBy(p.b, b, p.addrA); !ok || reason != "stale-session" {
			t.Errorf("%s: %q %v, want stale-session", name, reason, ok)
		}
	}
	// A Move for the token B holds (a duplicated token) is refused.
	if reason, ok := p.rejectedBy(p.b, mv(9, 10), p.addrA); !ok || reason != "token-held" {
		t.Errorf("Move of a held token: %q %v", reason, ok)
	}
}

// FuzzReceive: whatever arrives, Receive does not panic, and what it sends
// in answer is well-formed and signed by the node.
func FuzzReceive(f *testing.F) {
	p := newPair(f)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	for _, typ := range []wire.Type{wire.Move, wire.Ack, wire.Commit, wire.EarlyStop} {
		d := wire.Datagram{Type: typ, Token: tok, Session: 1, Nonce: 1}
		if typ == wire.Move {
			d.Cert = p.credA.Cert
		}
		f.Add(p.signed(d, p.addrA, p.addrB), uint8(0))
	}
	// A directory: A's own signed entry, and unverifiable hearsay.
	self := wire.Entry{Name: "A", Addr: p.addrA, Seen: p.now.UnixNano()}
	self.Sign(p.credA.Key)
	d := wire.Datagram{Type: wire.Move, Token: tok, Session: 2, Nonce: 5, Cert: p.credA.Cert,
		Dir: []wire.Entry{self, {Name: "C", Addr: netip.MustParseAddrPort("10.0.0.3:7400"), Seen: p.now.UnixNano()}}}
	f.Add(p.signed(d, p.addrA, p.addrB), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, srcSel uint8) {
		src := p.addrA
		if srcSel%2 == 1 {
			src = netip.MustParseAddrPort("10.0.0.9:7400")
		}
		p.b.Receive(p.now, src, b)
		p.now = p.now.Add(time.Duration(srcSel) * time.Millisecond)
		p.b.Tick(p.now)
		for _, pk := range p.b.Ready().Packets {
			if _, err := wire.Decode(pk.Data); err != nil {
				t.Fatalf("node sent a malformed datagram: %v", err)
			}
			if !wire.Verify(pk.Data, p.credB.Key.Public().(ed25519.PublicKey), p.addrB, pk.To) {
				t.Fatal("node sent a datagram it did not sign correctly")
			}
		}
	})
}

// A member whose key is given at start (a certificate the caller verified)
// is known from the first datagram: its Move without a certificate is
// answered at once. A wrong key given at start makes its datagrams fail
// the signature check, not pass it.
func TestMemberKeyGivenAtStart(t *testing.T) {
	p := newPair(t)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	mk := func(key ed25519.PublicKey) *Node {
		n, err := New(Config{Name: "B", Addr: p.addrB, Key: p.credB.Key, Cert: p.credB.Cert, CA: ca.NewVerifier(p.credB.CA), Passing: passing.DefaultConfig(),
			Policy: rw(time.Hour, false), Peers: []Member{{Name: "A", Addr: p.addrA, Key: key}}, Rand: rand.New(rand.NewPCG(1, 2))})
		if err != nil {
			t.Fatal(err)
		}
		n.Start(p.now)
		n.Ready()
		return n
	}
	move := p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 1}, p.addrA, p.addrB)
	warm := mk(p.credA.Key.Public().(ed25519.PublicKey))
	warm.Receive(p.now, p.addrA, move)
	if r := warm.Ready(); len(r.Packets) != 1 {
		t.Fatalf("a Move without certificate from a member known at start: %d replies, want its Ack", len(r.Packets))
	}
	wrong := mk(p.credB.Key.Public().(ed25519.PublicKey))
	if reason, ok := p.rejectedBy(wrong, move, p.addrA); !ok || reason != "bad-signature" {
		t.Errorf("a Move checked against a wrong key given at start: %q %v, want bad-signature", reason, ok)
	}
	if _, err := New(Config{Name: "B", Addr: p.addrB, Key: p.credB.Key, CA: ca.NewVerifier(p.credB.CA), Policy: rw(time.Hour, false),
		Peers: []Member{{Name: "A", Addr: p.addrA, Key: ed25519.PublicKey{1, 2}}}, Rand: rand.New(rand.NewPCG(1, 2))}); err == nil {
		t.Error("a truncated key given at start was accepted")
	}
}
