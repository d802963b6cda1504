package node

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/circulation/randomwalk"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
)

// An insider: a certified member whose datagrams the test crafts. It has
// an address in the simulation but no node, so what is sent to it is lost.
type insider struct {
	name  string
	cred  *ca.Credentials
	addr  netip.AddrPort
	nonce uint64
	gen   int64
}

func (s *sim) insider(name string) *insider {
	return &insider{name: name, cred: credentials(s.t, name), addr: s.addr(name)}
}

// move sends to, one hop away, a Move of a token the insider mints, with
// its certificate and the entries given.
func (m *insider) move(s *sim, to string, dir []wire.Entry) {
	m.nonce = max(m.nonce+1, uint64(s.now.UnixNano()))
	m.gen++
	d := wire.Datagram{Type: wire.Move, Sender: m.name, Token: wire.TokenID{Gen: m.gen, Origin: m.name}, Session: 1,
		Nonce: m.nonce, ReplyPort: 7400, Cert: m.cred.Cert, Dir: dir}
	b, err := d.Encode(m.cred.Key, m.addr, s.addrs[to])
	if err != nil {
		s.t.Fatal(err)
	}
	s.push(&simEvent{at: s.now.Add(time.Millisecond), to: to, from: m.addr, data: b})
}

// phantoms returns k entries for names nobody holds a certificate for,
// at addresses where nobody listens, under random signatures.
func phantoms(s *sim, k int) []wire.Entry {
	es := make([]wire.Entry, k)
	for i := range es {
		es[i] = wire.Entry{Name: fmt.Sprintf("ph%d", s.rnd.IntN(1e6)),
			Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(s.rnd.IntN(256)), byte(1 + s.rnd.IntN(250))}), 7400),
			Seen: s.now.UnixNano()}
		for j := range es[i].Sig {
			es[i].Sig[j] = byte(s.rnd.Uint32())
		}
	}
	return es
}

func isPhantom(name string) bool { return len(name) > 2 && name[:2] == "ph" }

// acquisitionsIn counts the token acquisitions logged in [from, to).
func (s *sim) acquisitionsIn(from, to time.Time) int {
	c := 0
	for _, e := range s.events {
		if e.Kind == eventlog.TokenAcquired && e.WallNS >= from.UnixNano() && e.WallNS < to.UnixNano() {
			c++
		}
	}
	return c
}

// threeAgents starts A (holding the token), B and C, each configured
// with the others and with extra.
func threeAgents(s *sim, extra ...string) {
	for _, n := range []string{"A", "B", "C"} {
		var peers []string
		for _, p := range []string{"A", "B", "C"} {
			if p != n {
				peers = append(peers, p)
			}
		}
		s.addNode(n, rw(10*time.Millisecond, n == "A"), append(peers, extra...)...)
	}
}

// A certified member that no agent lists sends Moves carrying entries
// for names nobody holds a certificate for, under random signatures. The
// names are held as candidates, never chosen as pass targets: no pass
// goes to them and circulation keeps its unattacked rate.
func TestPhantomEntriesAreNeverPassTargets(t *testing.T) {
	run := func(attack bool) (before, during, after float64, s *sim) {
		s = newSim(t, 11)
		threeAgents(s)
		m := s.insider("M")
		s.run(s.now.Add(10 * time.Second))
		t0 := s.now
		s.run(t0.Add(20 * time.Second))
		t1 := s.now
		for i := 0; i < 20; i++ { // 20 datagrams of 6 phantoms each, one a second
			if attack {
				m.move(s, []string{"A", "C"}[i%2], phantoms(s, 6))
			}
			s.run(s.now.Add(time.Second))
		}
		t2 := s.now
		s.run(t2.Add(20 * time.Second))
		rate := func(a, b time.Time) float64 { return float64(s.acquisitionsIn(a, b)) / b.Sub(a).Seconds() }
		return rate(t0, t1), rate(t1, t2), rate(t2, s.now), s
	}
	b0, d0, a0, _ := run(false)
	b1, d1, a1, s := run(true)
	t.Logf("acquisitions/s before, during, after: unattacked %.1f %.1f %.1f; attacked %.1f %.1f %.1f", b0, d0, a0, b1, d1, a1)
	var candidates int
	for _, name := range []string{"A", "C"} {
		n := s.nodes[name]
		for who := range n.dir {
			if isPhantom(who) {
				candidates++
			}
		}
		if ps := n.Peers(); len(ps) != 2 || slices.ContainsFunc(ps, isPhantom) {
			t.Errorf("%s has %d pass targets, want its two configured peers", name, len(ps))
		}
	}
	if candidates == 0 {
		t.Fatal("no phantom entry reached a directory: the attack did not happen")
	}
	for _, e := range s.events {
		if isPhantom(e.Peer) && (e.Kind == eventlog.PassStarted || e.Kind == eventlog.TargetAdded) {
			t.Fatalf("%s %s %s: a phantom was made a pass target", e.Agent, e.Kind, e.Peer)
		}
	}
	// Within a tenth of the unattacked run: what is left is the noise of
	// a random walk over 20 s and M's unanswered Acks.
	if d1 < 0.9*d0 || a1 < 0.9*a0 {
		t.Errorf("circulation fell from %.1f/s to %.1f/s during the attack and %.1f/s after (unattacked %.1f/s)", d0, d1, a1, a0)
	}
}

// A member outside every configuration that joined and then fell silent
// stops being a pass target after MaxUnanswered failed passes, well
// before any TTL, and is one again once it answers (002 §3.2: a leave is
// a silent failure; a join passes a fresh token to a member).
func TestSilentJoinedMemberLeavesTheTargetsUntilHeardAgain(t *testing.T) {
	s := newSim(t, 12)
	s.addNode("A", rw(10*time.Millisecond, true), "B")
	s.addNode("B", rw(10*time.Millisecond, false), "A")
	s.run(s.now.Add(time.Second))
	join := func() {
		s.down["J"] = false
		s.addNode("J", randomwalk.New(randomwalk.Config{Hold: 10 * time.Millisecond, RegenerateAfter: 10, JoinPeer: "B"}), "B")
	}
	join()
	s.run(s.now.Add(30 * time.Second))
	for _, name := range []string{"A", "B"} {
		if !slices.Contains(s.nodes[name].Peers(), "J") {
			t.Fatalf("%s's targets after J joined: %v", name, s.nodes[name].Peers())
		}
	}
	s.down["J"] = true
	left := len(s.events)
	s.run(s.now.Add(30 * time.Second))
	for _, name := range []string{"A", "B"} {
		failed := 0
		for _, e := range s.events[left:] {
			if e.Agent == name && e.Kind == eventlog.PassFailed && e.Peer == "J" && e.Reason == "ack_timeout" {
				failed++
			}
		}
		if failed > MaxUnanswered {
			t.Errorf("%s's passes to J failed %d times in the 30 s after it left, want at most %d", name, failed, MaxUnanswered)
		}
		if slices.Contains(s.nodes[name].Peers(), "J") {
			t.Errorf("%s still passes to J, silent for 30 s: %v", name, s.nodes[name].Peers())
		}
		if s.nodes[name].dir["J"] == nil {
			t.Errorf("%s forgot J before its TTL", name)
		}
	}
	join()
	s.run(s.now.Add(30 * time.Second))
	if !slices.Contains(s.nodes["B"].Peers(), "J") {
		t.Errorf("J rejoined through B but is not B's target: %v", s.nodes["B"].Peers())
	}
}

// A configured member that relays entries nobody can verify yet vouches
// for them (the join of 002 §3.2 goes through such a member), but at most
// MaxVouches per VouchWindow, and a vouched name that does not answer its
// first pass is dropped: an insider among the configured members costs a
// bounded number of failed passes, not a share of every pass.
func TestVouchedNamesGetOnePass(t *testing.T) {
	s := newSim(t, 13)
	threeAgents(s, "M")
	s.addNode("M", rw(10*time.Millisecond, false), "A", "B", "C")
	m := &insider{name: "M", cred: credentials(t, "M"), addr: s.addr("M"), nonce: uint64(s.now.Add(time.Hour).UnixNano())}
	s.run(s.now.Add(5 * time.Second))
	start := s.now
	for i := 0; i < 90; i++ {
		m.move(s, "A", phantoms(s, 6))
		s.run(s.now.Add(time.Second))
	}
	windows := int(s.now.Sub(start)/VouchWindow) + 1
	failed, vouched := 0, 0
	for _, e := range s.events {
		if e.Agent == "A" && isPhantom(e.Peer) {
			switch {
			case e.Kind == eventlog.PassFailed:
				failed++
			case e.Kind == eventlog.TargetAdded:
				vouched++
			}
		}
	}
	t.Logf("A: %d phantoms vouched for, %d passes to phantoms failed, in %v", vouched, failed, s.now.Sub(start))
	if failed > MaxVouches*windows {
		t.Errorf("%d passes to phantoms failed at A, want at most %d (%d per %v)", failed, MaxVouches*windows, MaxVouches, VouchWindow)
	}
	if slices.ContainsFunc(s.nodes["A"].Peers(), isPhantom) {
		t.Errorf("A still has phantoms among its %d targets", len(s.nodes["A"].Peers()))
	}
}

// Moves that introduce tokens are bounded per sender: JoinBurst at once,
// then one per JoinInterval; the rest are rejected ("join-rate").
func TestJoinsAreBoundedPerSender(t *testing.T) {
	p := newPair(t)
	v := p.victim([]Member{{Name: "A", Addr: p.addrA}}, 0)
	now := p.now.Add(DefaultMaxClockSkew + time.Millisecond)
	accepted, rejected := 0, 0
	flood := func(k int, at time.Time) {
		for i := 0; i < k; i++ {
			gen := int64(accepted + rejected + 1)
			v.Receive(at, p.addrA, p.signed(wire.Datagram{Type: wire.Move, Token: wire.TokenID{Gen: gen, Origin: "A"}, Session: 1,
				Nonce: uint64(gen), Cert: p.credA.Cert}, p.addrA, p.addrB))
			if len(v.Ready().Packets) > 0 {
				accepted++
			} else {
				rejected++
			}
		}
	}
	flood(100, now)
	if accepted != JoinBurst || v.Rejected()["join-rate"] != uint64(100-JoinBurst) {
		t.Fatalf("100 joins at once: %d accepted, rejections %v; want %d accepted", accepted, v.Rejected(), JoinBurst)
	}
	flood(10, now.Add(DefaultJoinInterval))
	if accepted != JoinBurst+1 {
		t.Errorf("10 more one interval later: %d accepted in all, want %d", accepted, JoinBurst+1)
	}
}

// A member outside the configuration that falls silent is forgotten
// after DefaultUnlistedTTL with no directory_ttl set; a configured one
// is kept.
func TestUnlistedMembersExpireByDefault(t *testing.T) {
	p := newPair(t)
	v := p.victim([]Member{{Name: "Z", Addr: netip.MustParseAddrPort("10.0.0.26:7400")}}, 0)
	now := p.now.Add(DefaultMaxClockSkew + time.Millisecond)
	tok := wire.TokenID{Gen: 42, Origin: "A"}
	v.Receive(now, p.addrA, p.signed(wire.Datagram{Type: wire.Move, Token: tok, Session: 1, Nonce: 1, Cert: p.credA.Cert}, p.addrA, p.addrB))
	v.Receive(now, p.addrA, p.signed(wire.Datagram{Type: wire.Commit, Token: tok, Session: 1, Nonce: 2}, p.addrA, p.addrB))
	v.Ready()
	if !slices.Contains(v.Peers(), "A") {
		t.Fatalf("A, which answered, is not a target: %v", v.Peers())
	}
	var gone time.Time
	for end := now.Add(2 * DefaultUnlistedTTL); now.Before(end) && gone.IsZero(); now = now.Add(10 * time.Second) {
		v.Tick(now)
		for _, e := range v.Ready().Events {
			if e.Kind == eventlog.PeerRemoved && e.Peer == "A" {
				gone = now
			}
		}
	}
	if gone.IsZero() {
		t.Fatalf("A, silent, still in the directory %v later", 2*DefaultUnlistedTTL)
	}
	if !slices.Equal(v.Peers(), []string{"Z"}) {
		t.Errorf("targets after A expired: %v, want [Z]", v.Peers())
	}
}
