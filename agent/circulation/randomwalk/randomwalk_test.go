package randomwalk

import (
	"math/rand/v2"
	"testing"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

type host struct {
	peers []string
	r     *rand.Rand
}

func (h *host) Self() string     { return "A" }
func (h *host) Peers() []string  { return h.peers }
func (h *host) Rand() *rand.Rand { return h.r }
func newHost(p ...string) *host  { return &host{peers: p, r: rand.New(rand.NewPCG(1, 1))} }
func tok(gen int64) wire.TokenID { return wire.TokenID{Gen: gen, Origin: "X"} }
func at(ms int) time.Time        { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }

func kinds(as []circulation.Action) []circulation.ActionKind {
	var k []circulation.ActionKind
	for _, a := range as {
		k = append(k, a.Kind)
	}
	return k
}

// 002 §3.2: hit by A, B, A with A > B: discard A; B, A, B: nothing.
func TestSandwichRule(t *testing.T) {
	p := New(Config{Hold: 10 * time.Millisecond})
	p.Start(newHost("B", "C"), at(0))
	big, small := tok(20), tok(10)
	step := func(ms int, tk wire.TokenID) []circulation.Action {
		acts := p.Acquired(at(ms), tk, circulation.ByPass, "")
		acts = append(acts, p.Tick(at(ms+10))...)
		for _, a := range acts {
			if a.Kind == circulation.Pass {
				p.Passed(at(ms+11), a.Token, a.Peer)
			}
		}
		return acts
	}
	step(0, small)
	step(100, big)
	if acts := step(200, small); len(acts) != 1 || acts[0].Kind != circulation.Pass {
		t.Fatalf("B, A, B with B < A: %v, want just a pass", acts)
	}
	acts := step(300, big)
	if len(acts) != 1 || acts[0].Kind != circulation.Discard || acts[0].Token != big || acts[0].Reason != "sandwich" {
		t.Fatalf("A, B, A with A > B: %+v, want the larger token discarded", acts)
	}
}

func TestRegenerationTiming(t *testing.T) {
	hold, transit := 10*time.Millisecond, 100*time.Millisecond
	p := New(Config{Hold: hold, RegenerateAfter: 10, Transit: transit})
	p.Start(newHost("B", "C"), at(0))
	// Before any return time is observed: 10 × 3 members × (hold + transit).
	want := at(0).Add(10 * 3 * (hold + transit))
	d, ok := p.Deadline()
	if !ok || !d.Equal(want) {
		t.Fatalf("first regeneration deadline %v, want %v", d.Sub(at(0)), want.Sub(at(0)))
	}
	if acts := p.Tick(want.Add(-time.Millisecond)); len(acts) != 0 {
		t.Fatalf("regenerated early: %v", acts)
	}
	acts := p.Tick(want)
	if len(acts) != 1 || acts[0].Kind != circulation.Generate || acts[0].Reason != "loss" {
		t.Fatalf("at the deadline: %+v, want a regeneration", acts)
	}
	// With observed returns of 50 ms, the estimate is their mean (above
	// the floor of 3 × hold), and holding a token defers regeneration.
	q := New(Config{Hold: hold, RegenerateAfter: 10, Transit: transit})
	q.Start(newHost("B", "C"), at(0))
	for i := 0; i < 4; i++ {
		q.Acquired(at(50*i), tok(1), circulation.ByPass, "")
		q.Tick(at(50*i + 10))
		q.Passed(at(50*i+11), tok(1), "B")
	}
	if got := q.ExpectedReturn(); got != 50*time.Millisecond {
		t.Fatalf("expected return %v, want the observed 50ms", got)
	}
	q.Acquired(at(1000), tok(1), circulation.ByPass, "")
	if _, ok := q.Deadline(); !ok {
		t.Fatal("no deadline while holding")
	}
	if acts := q.Tick(at(5000)); len(acts) != 1 || acts[0].Kind != circulation.Pass {
		t.Fatalf("holding: %v, want the pass, never a regeneration", kinds(acts))
	}
}

func TestFailedPassChoosesAnotherPeer(t *testing.T) {
	p := New(Config{Hold: 10 * time.Millisecond})
	p.Start(newHost("B", "C", "D"), at(0))
	p.Acquired(at(0), tok(1), circulation.ByPass, "")
	acts := p.Tick(at(10))
	tried := map[string]bool{acts[0].Peer: true}
	for i := 0; i < 2; i++ {
		acts = p.PassFailed(at(20+i), tok(1), acts[0].Peer)
		if len(acts) != 1 || tried[acts[0].Peer] {
			t.Fatalf("after failures with %v: %+v, want a peer not yet tried", tried, acts)
		}
		tried[acts[0].Peer] = true
	}
	// All three failed: hold another period, then start over.
	if acts = p.PassFailed(at(30), tok(1), acts[0].Peer); len(acts) != 0 {
		t.Fatalf("every peer failed: %+v, want to keep the token", acts)
	}
	if d, _ := p.Deadline(); !d.Equal(at(40)) {
		t.Fatalf("retry at %v, want after one hold", d.Sub(at(0)))
	}
	if acts = p.Tick(at(40)); len(acts) != 1 || acts[0].Kind != circulation.Pass {
		t.Fatalf("after the extra hold: %+v", acts)
	}
}

func TestJoinPassesAtOnceToTheJoinPeer(t *testing.T) {
	p := New(Config{Hold: time.Hour, JoinPeer: "M"})
	acts := p.Start(newHost("M"), at(0))
	if len(acts) != 1 || acts[0].Kind != circulation.Generate || acts[0].Reason != "join" {
		t.Fatalf("start: %+v, want a token generated to join with", acts)
	}
	acts = p.Acquired(at(0), tok(5), circulation.ByGeneration, "join")
	if len(acts) != 1 || acts[0].Kind != circulation.Pass || acts[0].Peer != "M" {
		t.Fatalf("join token: %+v, want an immediate pass to M", acts)
	}
}

func TestValidateNamesFields(t *testing.T) {
	for field, c := range map[string]Config{
		"hold":              {Hold: -1},
		"regenerate_after":  {RegenerateAfter: 0.5, Hold: time.Second},
		"expected_return":   {RegenerateAfter: 10},
		"regenerate_jitter": {RegenerateJitter: 1},
		"transit":           {Transit: -1},
	} {
		err := c.Validate()
		if err == nil || err.Error()[:len(field)] != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
