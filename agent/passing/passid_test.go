package passing

import (
	"slices"
	"testing"
	"time"

	"tokenbed/agent/wire"
)

// passIDsOf runs passes of tok from A to B, each failing, and returns
// the random ids of their Moves.
func passIDsOf(t *testing.T, seed uint64, self string, n int) []uint64 {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Exchange, cfg.Seed = Exchange3Way, seed
	e, err := NewEndpoint(cfg, self)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Hold(tok, 0); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	now := t0
	for range n {
		if err := e.Pass(now, tok, "peer"); err != nil {
			t.Fatal(err)
		}
		now = now.Add(cfg.MoveTimeout)
		e.Tick(now)
		for _, f := range e.Effects() {
			if f.Kind == SendMsg && f.Msg.Type == wire.Move {
				ids = append(ids, f.Msg.PassID)
			}
		}
	}
	return ids
}

// The ids come from Config.Seed and the agent's name alone: the same seed
// replays them, another seed or another agent draws others, and every
// pass draws a new one.
func TestPassIDsSeeded(t *testing.T) {
	a := passIDsOf(t, 7, "A", 5)
	if len(a) != 5 || slices.Contains(a, 0) {
		t.Fatalf("ids %x: want 5 non-zero", a)
	}
	if again := passIDsOf(t, 7, "A", 5); !slices.Equal(a, again) {
		t.Errorf("same seed and name: ids %x, then %x", a, again)
	}
	for _, c := range []struct {
		seed uint64
		self string
	}{{8, "A"}, {7, "C"}} {
		if other := passIDsOf(t, c.seed, c.self, 5); slices.Equal(a, other) {
			t.Errorf("seed %d name %s draws the ids of seed 7 name A: %x", c.seed, c.self, a)
		}
	}
	s := slices.Clone(a)
	slices.Sort(s)
	if len(slices.Compact(s)) != len(a) {
		t.Errorf("a pass reused an id: %x", a)
	}
	// The 4-way exchange has none.
	cfg := DefaultConfig()
	e, _ := NewEndpoint(cfg, "A")
	e.Hold(tok, 0)
	e.Pass(t0, tok, "B")
	for _, f := range e.Effects() {
		if f.Kind == SendMsg && f.Msg.PassID != 0 {
			t.Errorf("4-way %v carries pass id %x", f.Msg.Type, f.Msg.PassID)
		}
	}
}

// A Commit whose id is not that of a pass the receiver acknowledged is
// discarded silently (004 §4), and the receiver goes on waiting: the
// Commit with the id of its pass still gives it the token.
func TestCommitOfAnotherPassDiscarded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Exchange = Exchange3Way
	b, err := NewEndpoint(cfg, "B")
	if err != nil {
		t.Fatal(err)
	}
	move := Msg{Type: wire.Move, From: "A", To: "B", Token: tok, Session: 1, PassID: 0x1111, Cert: true}
	b.Deliver(t0, move)
	b.Effects()
	commit := move
	commit.Type, commit.Cert = wire.Commit, false
	for _, id := range []uint64{0x2222, 0} {
		commit.PassID = id
		b.Deliver(t0.Add(time.Millisecond), commit)
		fs := b.Effects()
		if len(fs) != 1 || fs[0].Kind != Rejected || fs[0].Reason != "other-pass" {
			t.Fatalf("Commit with id %x: effects %+v, want one rejection other-pass", id, fs)
		}
	}
	if b.Holds(tok) {
		t.Fatal("B holds the token on the Commit of another pass")
	}
	commit.PassID = move.PassID
	b.Deliver(t0.Add(2*time.Millisecond), commit)
	b.Effects()
	if !b.Holds(tok) {
		t.Fatal("B does not hold the token on its pass's Commit")
	}
}
