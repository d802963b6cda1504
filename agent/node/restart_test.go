package node

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/passing"
)

type captured struct {
	from netip.AddrPort
	to   string
	data []byte
}

// state is everything a datagram could change in a node, as text.
func (n *Node) state() string {
	var b strings.Builder
	for _, name := range n.Peers() {
		m := n.dir[name]
		fmt.Fprintf(&b, "dir %s %v %d %v %v %x\n", name, m.addr, m.seen, m.trusted, m.verified, m.entry.Sig)
	}
	var keys []string
	for name, k := range n.keys {
		keys = append(keys, fmt.Sprintf("key %s %x %x", name, k, n.certSums[name]))
	}
	slices.Sort(keys)
	b.WriteString(strings.Join(keys, "\n"))
	snd, rcv, fin := n.ep.Sessions()
	fmt.Fprintf(&b, "\nheld %v sessions %d %d %d replyTo %d presigned %d/%d lastHit %v\n",
		n.ep.Held(), snd, rcv, fin, len(n.replyTo), len(n.presigned), len(n.toPresign), n.lastHit)
	return b.String()
}

// runAndCapture runs A, B and C with clock offsets, crashes C, and
// returns every datagram C sent or was sent before the crash.
func runAndCapture(t *testing.T, seed uint64, skew map[string]time.Duration) (*sim, []captured) {
	s := newSim(t, seed)
	s.skew = skew
	var got []captured
	s.tap = func(from netip.AddrPort, to string, data []byte) {
		if to == "C" || from == s.addr("C") {
			got = append(got, captured{from, to, append([]byte(nil), data...)})
		}
	}
	s.addNode("A", rw(10*time.Millisecond, true), "B", "C")
	s.addNode("B", rw(10*time.Millisecond, false), "A", "C")
	s.addNode("C", rw(10*time.Millisecond, false), "A", "B")
	s.run(s.now.Add(20 * time.Second))
	if s.count(eventlog.TokenAcquired, "C") < 50 {
		t.Fatalf("C acquired the token only %d times before the crash", s.count(eventlog.TokenAcquired, "C"))
	}
	s.down["C"] = true
	s.tap = nil
	return s, got
}

// A restarted agent has lost the soft state that recognises replays
// (002 §3.1): everything it sent or received in its previous life,
// replayed to the new instance from the original sources, must be
// rejected without reply and change nothing, even when the peers' clocks
// are off by the whole skew bound.
func TestRestartedAgentIgnoresReplaysOfItsPreviousLife(t *testing.T) {
	S := DefaultMaxClockSkew
	for _, tc := range []struct {
		name string
		skew map[string]time.Duration
	}{
		{"same clocks", map[string]time.Duration{}},
		{"peers ahead by S", map[string]time.Duration{"A": S, "B": S}},
		{"peers behind by S", map[string]time.Duration{"A": -S, "B": -S}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, got := runAndCapture(t, 7, tc.skew)
			toC, fromC := 0, 0
			for _, c := range got {
				if c.to == "C" {
					toC++
				} else {
					fromC++
				}
			}
			t.Logf("captured %d datagrams to C and %d from C", toC, fromC)
			// The restart comes a moment after the crash: the captured
			// datagrams were all signed before it.
			s.run(s.now.Add(time.Millisecond))
			for _, keys := range []bool{false, true} {
				replayToRestarted(t, s, got, keys)
			}
		})
	}
}

// replayToRestarted starts a new instance of C and replays got to it.
// With keys, C is given its peers' keys at start, so that every replay
// passes the signature check and only the freshness check stands in the
// way (without, the certificate-less ones stop at unknown-key).
func replayToRestarted(t *testing.T, s *sim, got []captured, keys bool) {
	S := DefaultMaxClockSkew
	cred := credentials(t, "C")
	var peers []Member
	for _, name := range []string{"A", "B"} {
		m := Member{Name: name, Addr: s.addr(name)}
		if keys {
			m.Key = s.nodes[name].keys[name]
		}
		peers = append(peers, m)
	}
	c, err := New(Config{Name: "C", Addr: s.addr("C"), Key: cred.Key, Cert: cred.Cert, CA: ca.NewVerifier(cred.CA),
		Passing: passing.DefaultConfig().Scaled(10), Policy: rw(10*time.Millisecond, false), Peers: peers, Rand: rand.New(rand.NewPCG(3, 4))})
	if err != nil {
		t.Fatal(err)
	}
	start := s.clock("C")
	c.Start(start)
	c.Ready()
	before := c.state()
	// Replay everything, during the quarantine and long after it, the
	// whole capture twice in each. (No Tick: the policy's own timers are
	// not the replays' doing.)
	for _, at := range []time.Duration{time.Millisecond, 2 * S, time.Hour} {
		now := start.Add(at)
		for range 2 {
			for _, d := range got {
				c.Receive(now, d.from, d.data)
				r := c.Ready()
				if len(r.Packets) > 0 {
					t.Fatalf("keys %v: replay at start+%v answered with %d datagrams", keys, at, len(r.Packets))
				}
				for _, e := range r.Events {
					if e.Kind != eventlog.DatagramRejected {
						t.Fatalf("keys %v: replay at start+%v caused %s %+v", keys, at, e.Kind, e)
					}
				}
				now = now.Add(time.Microsecond)
			}
		}
	}
	if after := c.state(); after != before {
		t.Fatalf("keys %v: replays changed the restarted node:\nbefore %s\nafter  %s", keys, before, after)
	}
	rej := c.Rejected()
	t.Logf("keys %v: %v", keys, rej)
	want := rej["before-start"] + rej["from-self"]
	if !keys {
		want += rej["unknown-key"]
	}
	if rej["before-start"] == 0 || want != uint64(6*len(got)) {
		t.Errorf("keys %v: rejections %v, want every one of %d replays rejected as before-start, from-self or (without keys) unknown-key", keys, rej, 6*len(got))
	}
}

// After a crash and a restart (a new Node, later start), the agent is
// deaf for at most 2·S, then rejoins the circulation, whatever the skew
// of its peers' clocks within S.
func TestRestartedAgentRejoinsAfterQuarantine(t *testing.T) {
	S := DefaultMaxClockSkew
	for _, off := range []time.Duration{-S, S} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			s, _ := runAndCapture(t, 8, map[string]time.Duration{"A": off, "B": off})
			s.run(s.now.Add(time.Second))
			acq := s.count(eventlog.TokenAcquired, "C")
			restart := s.now
			s.down["C"] = false
			s.addNode("C", rw(10*time.Millisecond, false), "A", "B")
			s.run(s.now.Add(5 * time.Second))
			if got := s.count(eventlog.TokenAcquired, "C") - acq; got < 20 {
				t.Fatalf("the restarted C acquired the token %d times in 5 s", got)
			}
			var first time.Time
			for _, e := range s.events {
				if e.Agent == "C" && e.Kind == eventlog.TokenAcquired && e.WallNS > restart.UnixNano() {
					first = time.Unix(0, e.WallNS)
					break
				}
			}
			t.Logf("first acquisition %v after the restart", first.Sub(restart))
			if s.nodes["C"].Rejected()["before-start"] > 0 && first.Sub(restart) < S-off {
				t.Errorf("C acquired %v after restart, within the window its peers' datagrams are refused", first.Sub(restart))
			}
		})
	}
}

func TestMaxClockSkewIsValidated(t *testing.T) {
	simCA.dir = ""
	cred := credentials(t, "A")
	for _, skew := range []time.Duration{-time.Millisecond, MaxMaxClockSkew + 1} {
		_, err := New(Config{Name: "A", Addr: netip.MustParseAddrPort("10.0.0.1:7400"), Key: cred.Key, CA: ca.NewVerifier(cred.CA),
			Policy: rw(time.Hour, false), Rand: rand.New(rand.NewPCG(1, 2)), MaxClockSkew: skew})
		if err == nil || !strings.HasPrefix(err.Error(), "max_clock_skew:") {
			t.Errorf("MaxClockSkew %v: %v, want an error naming max_clock_skew", skew, err)
		}
	}
}

// A fresh membership, started at once with agreeing clocks: the policy
// starts max_clock_skew after the node, so the creator's first Move is
// not refused as before-start by a peer that started with it, and the
// replies to it are not refused by the creator itself. Before, every
// run's first pass failed its Moves and paid the Move timeouts.
func TestFirstPassClearsTheStartWindow(t *testing.T) {
	s := newSim(t, 9)
	start := s.now
	s.addNode("B", rw(10*time.Millisecond, false), "A", "C")
	s.addNode("C", rw(10*time.Millisecond, false), "A", "B")
	s.addNode("A", rw(time.Millisecond, true), "B", "C")
	s.run(s.now.Add(time.Second))
	for name, n := range s.nodes {
		if r := n.Rejected()["before-start"]; r > 0 {
			t.Errorf("%s refused %d datagrams as before-start", name, r)
		}
	}
	if f := s.count(eventlog.PassFailed, ""); f > 0 {
		t.Errorf("%d passes failed on a lossless network", f)
	}
	for _, e := range s.events {
		if e.Kind == eventlog.TokenAcquired && e.Agent == "A" {
			if at := time.Unix(0, e.WallNS).Sub(start); at < DefaultMaxClockSkew {
				t.Errorf("A generated its token %v after its start, inside the start window of %v", at, DefaultMaxClockSkew)
			}
			break
		}
	}
	if acq := s.count(eventlog.TokenAcquired, ""); acq < 50 {
		t.Errorf("only %d acquisitions in 1 s of 10 ms holds", acq)
	}
}
