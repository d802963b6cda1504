package passing

// The model check of 004 §4's 3-way exchange, with the world, explorer
// and scenarios of model_test.go: every datagram may be lost, duplicated
// once, reordered or delayed past any timeout, and any one node may
// crash. It asserts 004 §4's property, "when both partners leave the
// protocol, at most one holds the token" (in every state, not only at the
// end), and that without a crash the token is lost only when the
// commitment is: every quiescent state is a pass, a failure with the
// sender keeping the token, or a loss where a Commit that followed a real
// Ack never reached a waiting receiver (world.outcome). It also asserts
// that this loss is reachable: unlike the 4-way exchange, whose Commit
// retries make it rare, the 3-way exchange loses the token whenever its
// one Commit is lost.

import (
	"fmt"
	"math/big"
	"sync"
	"testing"
)

// A passes to B; if that fails, A tries B again in the same session (004
// §4: the operation "is retried"), while B may still wait for the Commit
// of the first try or may have given up.
var scenarioRetry = &scenario{name: "A→B fails, A→B again", nodes: []string{"A", "B"}, act: func(w *world) []action {
	a := w.eps["A"]
	if w.repasses > 0 || a == nil || !w.failed["sender@A@1"] || !a.Holds(tok) || a.Passing(tok) {
		return nil
	}
	return []action{{"A passes to B again", func(w *world) {
		w.repasses++
		if err := w.eps["A"].Pass(w.clk["A"], tok, "B"); err != nil {
			panic(err)
		}
		w.collect("A")
	}}}
}}

func threeWayConfig(ackRetries int) Config {
	c := boundedConfig(0, ackRetries, 0)
	c.Exchange = Exchange3Way
	return c
}

func TestModelExhaustive3Way(t *testing.T) {
	// The bound: how many repeated Moves a receiver answers (ack_retries)
	// and how many datagrams may be duplicated (-1: every datagram once).
	// One crash of any node is always allowed.
	cases := []struct {
		sc                  *scenario
		ackRetries, dups    int
		wantOutcomesAtLeast []string
	}{
		{scenarioSingle, 1, -1, []string{"passed-to-B", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed", "lost:crash-in-window"}},
		{scenarioRetry, 1, 1, []string{"passed-to-B", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed", "lost:crash-in-window"}},
		{scenarioReroute, 1, 1, []string{"passed-to-B", "passed-to-C", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioReturn, 1, 1, []string{"passed-to-A", "passed-to-B", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioDetour, 0, 1, []string{"passed-to-B", "passed-to-C", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed"}},
	}
	// All of it takes about a second: -short runs it whole.
	var mu sync.Mutex
	total := new(big.Int)
	t.Cleanup(func() {
		fmt.Printf("passing model check (3-way): explored %s distinct schedules exhaustively\n", total)
	})
	for _, c := range cases {
		name := fmt.Sprintf("%s/ack_retries=%d/dups=%d", c.sc.name, c.ackRetries, c.dups)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			x := &explorer{t: t, paths: map[string]*big.Int{}, outcomes: map[string]int{}, maxStates: 3_000_000}
			w := newWorld(c.sc, threeWayConfig(c.ackRetries))
			w.dupBudget = c.dups
			n := x.explore(w, nil)
			mu.Lock()
			total.Add(total, n)
			mu.Unlock()
			t.Logf("%d states, %d transitions, %s distinct schedules; quiescent outcomes %v",
				len(x.paths), x.transitions, n, x.outcomes)
			for _, o := range c.wantOutcomesAtLeast {
				if x.outcomes[o] == 0 {
					t.Errorf("outcome %q never reached: the model does not exercise it", o)
				}
			}
		})
	}
}

// The loss case exists and is the one 004 §4 names: A gets B's Ack in
// time, its one Commit is lost, and when both have left the protocol
// nobody holds the token. The same schedule under the 4-way exchange ends
// with B holding it: A resends the Commit when its timer fires.
func TestModel3WayLostCommitLosesToken(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		holders string
		outcome string
	}{
		{threeWayConfig(1), "[]", "lost:commit-not-delivered"},
		{boundedConfig(1, 1, 1), "[B]", "passed-to-B"},
	} {
		w := newWorld(scenarioSingle, c.cfg)
		w.deliver(0, false) // the Move reaches B, which acks
		w.deliver(0, false) // the Ack reaches A, which releases and commits
		w.net = nil         // the Commit is lost
		for !w.quiescent() {
			as := w.transitions()
			timer := -1
			for i, a := range as {
				if a.label == "timer A" || a.label == "timer B" {
					timer = i
					break
				}
			}
			if timer < 0 {
				break
			}
			as[timer].do(w)
			for len(w.net) > 0 { // the network is good again
				w.deliver(0, false)
			}
		}
		if !w.quiescent() || w.violation != "" {
			t.Fatalf("exchange %q: not quiescent or violation %q", c.cfg.Exchange, w.violation)
		}
		o, err := w.outcome()
		if err != nil {
			t.Fatalf("exchange %q: %v", c.cfg.Exchange, err)
		}
		if h := fmt.Sprint(w.holders()); h != c.holders || o != c.outcome {
			t.Errorf("exchange %q: holders %s outcome %s, want %s %s", c.cfg.Exchange, h, o, c.holders, c.outcome)
		}
	}
}

// The checker is not vacuous for the 3-way machines either: deliberately
// broken ones are caught.
func TestModelCatchesBrokenMachines3Way(t *testing.T) {
	for name, f := range map[string]Fault{"acquire on Move": FaultAcquireOnMove, "skip the Ack check": FaultSkipAckCheck} {
		cfg := threeWayConfig(1)
		cfg.Fault = f
		x := &explorer{t: t, paths: map[string]*big.Int{}, outcomes: map[string]int{}, maxStates: 3_000_000, expect: true}
		w := newWorld(scenarioSingle, cfg)
		w.dupBudget = -1
		x.explore(w, nil)
		if x.found == "" {
			t.Errorf("%s: no violation found in %d states", name, len(x.paths))
			continue
		}
		t.Logf("%s: caught: %s", name, x.found)
	}
}

// TestModelRandom3Way runs long random schedules of the 3-way exchange
// with 004's single sends and chains of many passes among three nodes.
// While a datagram is in flight a timer fires first with probability
// 0.02, not as often as a delivery as for the 4-way exchange: with one
// Commit per pass, a receiver's timer firing before it loses the token,
// and at even odds nearly every chain of 40 passes would end in a loss
// within its first few passes, leaving long chains unexplored.
func TestModelRandom3Way(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Exchange = Exchange3Way
	randomModel(t, cfg, *modelRuns, 0.02)
}
