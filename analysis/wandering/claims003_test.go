package wandering

import (
	"fmt"
	"strings"
	"testing"
)

// TestInverted: the sandwich rule keeps the lowest timestamp (003 line
// 12). With one clock the token removed is the one made later; a removal
// counts as against generation order only when the token kept carries a
// lower timestamp although it was made later in reference time.
func TestInverted(t *testing.T) {
	for _, c := range []struct {
		name  string
		lives []Life
		want  bool
	}{
		{"one clock: the later token goes", []Life{
			{Token: "0@A", From: 0, To: 100, How: "alive"},
			{Token: "10000000000@B", From: 10, To: 30, How: "discarded"},
		}, false},
		{"B's clock behind: the earlier token goes", []Life{
			{Token: "50000000000@A", From: 0, To: 30, How: "discarded"},
			{Token: "10000000000@B", From: 10, To: 100, How: "alive"},
		}, true},
		{"the other token gone before the removal", []Life{
			{Token: "50000000000@A", From: 0, To: 30, How: "discarded"},
			{Token: "10000000000@B", From: 10, To: 20, How: "lost"},
		}, false},
	} {
		i := 0
		for j, l := range c.lives {
			if l.How == "discarded" {
				i = j
			}
		}
		if got := inverted(c.lives, i); got != c.want {
			t.Errorf("%s: inverted %v, want %v", c.name, got, c.want)
		}
	}
}

// wtRun is a literal Wandering Token run of 1000 s: one token throughout
// and one agent busy but for idle seconds; n spurious tokens of 5 s
// each, every one overlapping a second operation for its 5 s (so two at
// once for 5n s).
func wtRun(idle float64, n int) *Run {
	r := &Run{Manifest: Manifest{Scenario: "wt", SpanS: 1000}}
	r.Ops = append(r.Ops, Op{Agent: "a", Start: 0, End: 1000 - idle})
	r.Tokens = append(r.Tokens, Life{Token: "0@a", From: 0, To: 1000, How: "alive", Generated: true})
	for i := range n {
		at := 10 + 10*float64(i)
		r.Ops = append(r.Ops, Op{Agent: fmt.Sprint("b", i), Start: at, End: at + 5})
		r.Tokens = append(r.Tokens, Life{Token: fmt.Sprintf("%d@b%d", int64(at)*1e9, i), From: at, To: at + 5, How: "discarded", Generated: true})
	}
	return r
}

// TestFig2Claims: the verdicts follow the figures and the tolerances
// the run's own counts give; a figure off the paper by more than its
// tolerance is Broken.
func TestFig2Claims(t *testing.T) {
	verdict := func(r *Run, what string) Claim {
		for _, c := range Fig2Claims(nil, r, 600) {
			if strings.Contains(c.What, what) {
				return c
			}
		}
		t.Fatalf("no claim %q", what)
		return Claim{}
	}
	// 10 spurious tokens: two at once 5% of the time, the paper's figure.
	if c := verdict(wtRun(50, 10), "2 at once"); !c.OK {
		t.Errorf("two at once 5%% against the paper's 5%%: %+v", c)
	}
	// 40 spurious tokens: 20%, and 40 stretches give ±2√2·20%/√40 =
	// ±8.9 points: outside.
	c := verdict(wtRun(50, 40), "2 at once")
	if c.OK || len(Broken([]Claim{c})) != 1 {
		t.Errorf("two at once 20%% against 5%% over 40 stretches: %+v", c)
	}
	// Idle 30% with no loss: the bound 10% has no sampling allowance.
	if c := verdict(wtRun(300, 0), "idle"); c.OK {
		t.Errorf("idle 30%% with no loss passed: %+v", c)
	}
	if c := verdict(wtRun(50, 0), "idle"); !c.OK {
		t.Errorf("idle 5%%: %+v", c)
	}
}

// TestStepsBeforeZero: intervals of a warm-up (before the measured
// span's time zero) count only for their part after zero.
func TestStepsBeforeZero(t *testing.T) {
	d := durations(steps([]float64{-100, -10, 20}, []float64{-96, 10, 30}, 100), 100)
	if len(d) != 2 || d[0] != 80 || d[1] != 20 {
		t.Errorf("durations %v, want [80 20]: (−100, −96) outside, (−10, 10) for 10 s, (20, 30)", d)
	}
}

// TestIdleAtRate: Fig. 2's idle share is compared at 003's loss rate.
// A literal run of 1000 s with a loss every 500 s on average but 4
// losses, each followed by 40 s without a token (and without A): idle
// 16% as run, 8% at two losses; the gaps are equal, so no allowance.
func TestIdleAtRate(t *testing.T) {
	r := &Run{Manifest: Manifest{Scenario: "wt", SpanS: 1000, LossEveryS: 500, LossModel: "transit"}}
	from := 0.0
	for i, to := range []float64{100, 300, 500, 700, 1000} {
		r.Ops = append(r.Ops, Op{Agent: "a", Start: from, End: to})
		r.Tokens = append(r.Tokens, Life{Token: fmt.Sprintf("%d@a", int64(from)*1e9), From: from, To: to, How: "lost", Generated: true})
		if i < 4 {
			r.Losses = append(r.Losses, Loss{AtS: to, Agent: "a", Token: r.Tokens[i].Token})
		}
		from = to + 40
	}
	r.Tokens[4].How = "alive"
	var idle Claim
	for _, c := range Fig2Claims(nil, r, 600) {
		if strings.Contains(c.What, "idle") {
			idle = c
		}
	}
	if !idle.OK || !strings.HasPrefix(idle.Ours, "8.0% (as run: 16.0% with 4 losses") {
		t.Errorf("idle at one loss per 500 s: %+v", idle)
	}
	r.LossEveryS = 250 // four losses expected: 16%, above the bound
	for _, c := range Fig2Claims(nil, r, 600) {
		if strings.Contains(c.What, "idle") && c.OK {
			t.Errorf("idle 16%% at one loss per 250 s passed: %+v", c)
		}
	}
}
