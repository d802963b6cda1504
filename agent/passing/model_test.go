package passing

// This file checks requirements (i) and (ii) of 002 §2 against the state
// machines by exploring schedules of whole passing operations between
// Endpoints connected by an adversarial network:
//
//   - every in-flight datagram may be delivered, dropped or duplicated
//     (once: the copy can be delivered at any later time, which also models
//     a replay of a sniffed datagram), in any order;
//   - every timer may fire at any point, i.e. any datagram may be delayed
//     past any timeout;
//   - any one node may crash at any point (it stops for good).
//
// The exhaustive part enumerates every state reachable under these rules
// for small retry limits (the bound) and counts the distinct schedules,
// i.e. the paths from the initial state to quiescence. The randomized part
// runs long random schedules with the default limits and chains of many
// passes. Both assert, in every state, that no two live nodes hold the
// token, and, in every quiescent state, that the outcome is one that 002
// §3.1 describes.

import (
	"cmp"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tokenbed/agent/wire"
)

var (
	tok       = wire.TokenID{Gen: 1, Origin: "A"}
	modelSeed = flag.Uint64("model.seed", 0, "seed of TestModelRandom (0: from the clock, printed)")
	modelRuns = flag.Int("model.runs", 3000, "number of random schedules in TestModelRandom")
	modelDeep = flag.Bool("model.deep", false, "TestModelExhaustive also explores two retries of every message (minutes of CPU: make model-check)")
)

// inflight is a datagram in the network.
type inflight struct {
	m   Msg
	dup bool // already duplicated once
}

type scenario struct {
	name  string
	nodes []string
	// act returns the policy actions enabled in w: label and effect.
	act func(w *world) []action
}

type action struct {
	label string
	do    func(w *world)
}

type world struct {
	sc      *scenario
	eps     map[string]*Endpoint // nil once crashed
	clk     map[string]time.Time
	net     []inflight
	crashed string // "" if no crash yet
	// Justification of losses (002 §3.1).
	crashHolder bool            // the crashed node held the token
	crashWindow bool            // the crashed node had acked and not yet acquired
	released    map[uint64]bool // sessions whose sender got its Ack
	commitLive  map[uint64]bool // sessions whose Commit reached a receiver waiting for it
	ackLive     map[uint64]bool // sessions whose Ack reached a sender waiting for it
	acquired    map[uint64]bool
	failed      map[string]bool // "sender@session" or "receiver@session" that reported failure
	repasses    int             // policy actions taken
	dupBudget   int             // duplications left; negative: each datagram may be duplicated once
	violation   string
	// waiting: receivers that sent an Ack and have not yet reported how
	// their wait for the Commit ended (acquired, or commit timeout). No
	// detected failure may go unreported (002 §3.3 counts them).
	waiting map[wait]bool
}

// wait is a receiver's wait for the Commit of a session.
type wait struct {
	node    string
	session uint64
}

var t0 = time.Unix(1000, 0)

func newWorld(sc *scenario, cfg Config) *world {
	w := &world{sc: sc, eps: map[string]*Endpoint{}, clk: map[string]time.Time{},
		released: map[uint64]bool{}, commitLive: map[uint64]bool{}, ackLive: map[uint64]bool{}, acquired: map[uint64]bool{}, failed: map[string]bool{}, waiting: map[wait]bool{}}
	for _, n := range sc.nodes {
		ep, err := NewEndpoint(cfg, n)
		if err != nil {
			panic(err)
		}
		w.eps[n] = ep
		w.clk[n] = t0
	}
	// A holds the token and starts passing it to B.
	a := w.eps["A"]
	if err := a.Hold(tok, 0); err != nil {
		panic(err)
	}
	if err := a.Pass(t0, tok, "B"); err != nil {
		panic(err)
	}
	w.collect("A")
	return w
}

func (w *world) clone() *world {
	c := *w
	c.eps = map[string]*Endpoint{}
	for n, ep := range w.eps {
		if ep != nil {
			c.eps[n] = ep.clone()
		} else {
			c.eps[n] = nil
		}
	}
	c.clk = cloneMap(w.clk)
	c.net = slices.Clone(w.net)
	c.released = cloneMap(w.released)
	c.commitLive = cloneMap(w.commitLive)
	c.ackLive = cloneMap(w.ackLive)
	c.acquired = cloneMap(w.acquired)
	c.failed = cloneMap(w.failed)
	c.waiting = cloneMap(w.waiting)
	return &c
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// collect moves node n's effects into the world: datagrams into the
// network, outcomes into the bookkeeping.
func (w *world) collect(n string) {
	for _, f := range w.eps[n].Effects() {
		switch f.Kind {
		case SendMsg:
			// Attempt numbers and certificate flags are dropped: the
			// machines' states do not depend on them (certificates are
			// checked by the node package), and keeping them would only
			// multiply equivalent states.
			m := f.Msg
			m.Attempt, m.Cert = 0, false
			w.net = append(w.net, inflight{m: m})
			if m.Type == wire.Ack {
				w.waiting[wait{n, f.Session}] = true
			}
		case PassSucceeded:
			w.released[f.Session] = true
		case TokenAcquired:
			if f.Reason == "commit" {
				w.acquired[f.Session] = true
				delete(w.waiting, wait{n, f.Session})
			}
		case PassFailed:
			role := "receiver"
			if f.Reason == "ack_timeout" {
				role = "sender"
			} else {
				delete(w.waiting, wait{n, f.Session})
			}
			w.failed[fmt.Sprintf("%s@%s@%d", role, n, f.Session)] = true
		}
	}
	w.check()
}

func (w *world) holders() []string {
	var h []string
	for _, n := range w.sc.nodes {
		if ep := w.eps[n]; ep != nil && ep.Holds(tok) {
			h = append(h, n)
		}
	}
	return h
}

// check asserts requirement (ii) in every state.
func (w *world) check() {
	if h := w.holders(); len(h) > 1 && w.violation == "" {
		w.violation = fmt.Sprintf("two holders of %v: %v", tok, h)
	}
}

func (w *world) deliver(i int, keepCopy bool) {
	f := w.net[i]
	if keepCopy {
		w.net[i].dup = true
		if w.dupBudget > 0 {
			w.dupBudget--
		}
	} else {
		w.net = slices.Delete(w.net, i, i+1)
	}
	ep := w.eps[f.m.To]
	if ep == nil {
		return // sent to a crashed node
	}
	if f.m.Type == wire.Ack {
		if s := ep.senders[key{f.m.Token, f.m.Session, f.m.From}]; s != nil && s.Status() == AwaitAck && s.PassID() == f.m.PassID {
			w.ackLive[f.m.Session] = true
		}
	}
	if f.m.Type == wire.Commit {
		// Was a receiver waiting for this Commit, of a pass it
		// acknowledged? (independent of what the endpoint then does with it)
		if r := ep.receivers[key{f.m.Token, f.m.Session, f.m.From}]; r != nil && r.Waits(f.m.PassID) &&
			(r.Status() == AwaitCommit || r.Status() == ReceiverFailed && ep.cfg.Linger > 0) {
			w.commitLive[f.m.Session] = true
		}
	}
	ep.Deliver(w.clk[f.m.To], f.m)
	w.collect(f.m.To)
}

func (w *world) fire(n string) {
	d, _ := w.eps[n].Deadline()
	w.clk[n] = d
	w.eps[n].Tick(d)
	w.collect(n)
}

func (w *world) crash(n string) {
	ep := w.eps[n]
	w.crashed = n
	w.crashHolder = ep.Holds(tok)
	for _, r := range ep.receivers {
		if r.Status() == AwaitCommit || r.Status() == ReceiverFailed {
			w.crashWindow = true
		}
	}
	w.eps[n] = nil
}

// transitions lists every enabled step of w. There is no drop step: a
// datagram that is never delivered is a lost one, and every state with no
// timer armed is checked as if all datagrams still in flight were lost. A
// datagram not yet duplicated may be delivered while a copy stays in flight
// (a duplicate, or a replay, delivered at any later time).
func (w *world) transitions() []action {
	var as []action
	seen := map[inflight]bool{}
	for i, f := range w.net {
		if seen[f] {
			continue // identical datagrams: one representative
		}
		seen[f] = true
		as = append(as, action{"deliver " + f.m.String(), func(w *world) { w.deliver(i, false) }})
		if !f.dup && w.dupBudget != 0 {
			as = append(as, action{"deliver-and-duplicate " + f.m.String(), func(w *world) { w.deliver(i, true) }})
		}
	}
	for _, n := range w.sc.nodes {
		if ep := w.eps[n]; ep != nil {
			if _, ok := ep.Deadline(); ok {
				as = append(as, action{"timer " + n, func(w *world) { w.fire(n) }})
			}
		}
	}
	if w.sc.act != nil {
		as = append(as, w.sc.act(w)...)
	}
	if w.crashed == "" {
		for _, n := range w.sc.nodes {
			if w.eps[n] != nil {
				as = append(as, action{"crash " + n, func(w *world) { w.crash(n) }})
			}
		}
	}
	return as
}

// quiescent: no timer armed and no policy action pending, so nothing
// happens unless a datagram still in flight arrives; the outcome is
// checked as if they were all lost.
func (w *world) quiescent() bool {
	for _, ep := range w.eps {
		if ep != nil {
			if _, ok := ep.Deadline(); ok {
				return false
			}
		}
	}
	return w.sc.act == nil || len(w.sc.act(w)) == 0
}

// outcome classifies a quiescent state into the cases of 002 §3.1, or
// returns a violation.
func (w *world) outcome() (string, error) {
	for _, wt := range sortedKeys(w.waiting, wait.compare) {
		if w.eps[wt.node] != nil {
			return "", fmt.Errorf("%s acked session %d and never reported how its wait for the Commit ended (acquired or commit timeout)", wt.node, wt.session)
		}
	}
	h := w.holders()
	switch {
	case len(h) == 1 && h[0] == "A" && !w.anyAcquired():
		// The pass failed: no Ack reached A, A keeps the token.
		if !w.failed["sender@A@1"] {
			return "", fmt.Errorf("A holds the token but never saw its pass fail")
		}
		return "kept-by-sender", nil
	case len(h) == 1:
		return "passed-to-" + h[0], nil
	case len(h) == 0 && w.crashed != "" && (w.crashHolder || w.crashWindow):
		if w.crashHolder {
			return "lost:holder-crashed", nil
		}
		return "lost:crash-in-window", nil
	case len(h) == 0:
		// Only a Commit that never reached its waiting receiver may lose
		// the token (002 §3.1), and only after the sender got a real Ack.
		for s := range w.released {
			if !w.acquired[s] && !w.commitLive[s] && w.ackLive[s] {
				return "lost:commit-not-delivered", nil
			}
		}
		return "", fmt.Errorf("token lost without a crash of its holder and not by an undelivered Commit after a real Ack (released %v, acquired %v)", w.released, w.acquired)
	}
	return "", fmt.Errorf("unexplained outcome: holders %v, crashed %q (holder %v, window %v)", h, w.crashed, w.crashHolder, w.crashWindow)
}

func (w *world) anyAcquired() bool { return len(w.acquired) > 0 }

func (a wait) compare(b wait) int {
	if c := strings.Compare(a.node, b.node); c != 0 {
		return c
	}
	return cmp.Compare(a.session, b.session)
}

// fingerprint is a canonical encoding of the state: timers are relative to
// each node's clock, in-flight datagrams sorted. It is the hot spot of the
// exhaustive search, hence the hand-written encoding.
func (w *world) fingerprint() string {
	b := make([]byte, 0, 512)
	num := func(v int64) { b = strconv.AppendInt(b, v, 36); b = append(b, ',') }
	str := func(s string) { b = append(b, s...); b = append(b, ',') }
	k := func(k key) { num(k.token.Gen); str(k.token.Origin); num(int64(k.session)); str(k.peer) }
	for _, n := range w.sc.nodes {
		ep := w.eps[n]
		if ep == nil {
			b = append(b, 'X', ';')
			continue
		}
		c := w.clk[n]
		b = append(b, 'H')
		for _, t := range sortedKeys(ep.held, wire.TokenID.Compare) {
			num(t.Gen)
			str(t.Origin)
			num(int64(ep.held[t]))
		}
		b = append(b, 'F')
		for _, t := range sortedKeys(ep.soft, wire.TokenID.Compare) {
			sf := ep.soft[t]
			num(t.Gen)
			str(t.Origin)
			num(int64(sf.last))
			str(sf.lastPeer)
			num(int64(sf.completed))
			if sf.lastSent {
				b = append(b, '!')
			}
		}
		for _, kk := range sortedKeys(ep.senders, key.compare) {
			s := ep.senders[kk]
			b = append(b, 'S')
			k(kk)
			num(int64(s.Status()))
			n, d := counters(s)
			num(int64(n))
			num(int64(d.Sub(c)))
			str(passIDs(s))
		}
		for _, kk := range sortedKeys(ep.receivers, key.compare) {
			r := ep.receivers[kk]
			b = append(b, 'R')
			k(kk)
			num(int64(r.Status()))
			n, d := counters(r)
			num(int64(n))
			num(int64(d.Sub(c)))
			str(passIDs(r))
		}
		for _, kk := range sortedKeys(ep.finished, key.compare) {
			s := ep.finished[kk]
			b = append(b, 'D')
			k(kk)
			num(int64(s.Status()))
		}
		for _, g := range ep.gcQueue {
			b = append(b, 'G')
			k(g.k)
			num(int64(g.at.Sub(c)))
			if ep.finished[g.k] == g.s {
				b = append(b, '=')
			}
		}
		b = append(b, ';')
	}
	net := make([]string, len(w.net))
	for i, f := range w.net {
		m := f.m
		net[i] = string(rune('0'+m.Type)) + m.From + ">" + m.To + strconv.FormatUint(m.Session, 36) +
			strconv.FormatInt(m.Token.Gen, 36) + m.Token.Origin + strconv.FormatBool(m.Cert) + strconv.FormatBool(f.dup) +
			strconv.FormatUint(m.PassID, 36)
	}
	slices.Sort(net)
	for _, m := range net {
		str(m)
	}
	b = append(b, 'C')
	str(w.crashed)
	if w.crashHolder {
		b = append(b, 'h')
	}
	if w.crashWindow {
		b = append(b, 'w')
	}
	for _, m := range []map[uint64]bool{w.released, w.acquired, w.commitLive, w.ackLive} {
		b = append(b, '|')
		for _, s := range sortedKeys(m, cmp.Compare[uint64]) {
			num(int64(s))
		}
	}
	b = append(b, '|')
	for _, f := range sortedKeys(w.failed, strings.Compare) {
		str(f)
	}
	b = append(b, '|')
	for _, wt := range sortedKeys(w.waiting, wait.compare) {
		str(wt.node)
		num(int64(wt.session))
	}
	num(int64(w.repasses))
	num(int64(w.dupBudget))
	return string(b)
}

func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmp)
	return ks
}

// explorer enumerates the reachable states depth first, memoising the
// number of schedules from each state to quiescence.
type explorer struct {
	t           *testing.T
	found       string // with expectViolation: the first violation found
	expect      bool
	paths       map[string]*big.Int
	transitions int
	outcomes    map[string]int
	maxStates   int
}

func (x *explorer) explore(w *world, trace []string) *big.Int {
	fp := w.fingerprint()
	if p, ok := x.paths[fp]; ok {
		return p
	}
	if len(x.paths) > x.maxStates {
		x.t.Fatalf("state space exceeds %d states: bound too large", x.maxStates)
	}
	if w.violation != "" {
		if x.expect {
			if x.found == "" {
				x.found = w.violation + " after: " + strings.Join(trace, ", ")
			}
			return new(big.Int)
		}
		x.t.Fatalf("%s: requirement (ii) violated: %s\nschedule:\n  %s", w.sc.name, w.violation, strings.Join(trace, "\n  "))
	}
	n := new(big.Int)
	x.paths[fp] = n // placeholder; the graph is acyclic (see TestModelAcyclic)
	if w.quiescent() {
		o, err := w.outcome()
		if err != nil {
			if x.expect {
				if x.found == "" {
					x.found = err.Error() + " after: " + strings.Join(trace, ", ")
				}
				return new(big.Int)
			}
			x.t.Fatalf("%s: %v\nschedule:\n  %s", w.sc.name, err, strings.Join(trace, "\n  "))
		}
		x.outcomes[o]++
		n.SetInt64(1)
	}
	for _, a := range w.transitions() {
		x.transitions++
		w2 := w.clone()
		a.do(w2)
		n.Add(n, x.explore(w2, append(trace, a.label)))
	}
	return n
}

func boundedConfig(move, ack, commit int) Config {
	c := Config{MoveTimeout: 10, MoveRetries: move, AckTimeout: 10, AckRetries: ack, CommitTimeout: 10, CommitRetries: commit}
	c.Linger = c.DefaultLinger()
	return c
}

var (
	// A passes to B.
	scenarioSingle = &scenario{name: "A→B", nodes: []string{"A", "B"}}
	// A passes to B; if that fails, A passes to C with the same session
	// (002 §3: "another receiver is selected"). B's late Acks must not
	// matter.
	scenarioReroute = &scenario{name: "A→B fails, A→C", nodes: []string{"A", "B", "C"}, act: func(w *world) []action {
		a := w.eps["A"]
		if w.repasses > 0 || a == nil || !w.failed["sender@A@1"] || !a.Holds(tok) || a.Passing(tok) {
			return nil
		}
		return []action{{"A passes to C", func(w *world) {
			w.repasses++
			if err := w.eps["A"].Pass(w.clk["A"], tok, "C"); err != nil {
				panic(err)
			}
			w.collect("A")
		}}}
	}}
	// A passes to B; if that fails, A passes to C in the same session, and
	// C passes on to B (session 2): B may still wait for the Commit of
	// session 1 when the Move of session 2 arrives, and must report that
	// wait as failed (docs/studies/endurance.md, "The failure split").
	scenarioDetour = &scenario{name: "A→B fails, A→C→B", nodes: []string{"A", "B", "C"}, act: func(w *world) []action {
		a, c := w.eps["A"], w.eps["C"]
		switch {
		case w.repasses == 0 && a != nil && w.failed["sender@A@1"] && a.Holds(tok) && !a.Passing(tok):
			return []action{{"A passes to C", func(w *world) {
				w.repasses++
				if err := w.eps["A"].Pass(w.clk["A"], tok, "C"); err != nil {
					panic(err)
				}
				w.collect("A")
			}}}
		case w.repasses == 1 && c != nil && c.Holds(tok) && !c.Passing(tok):
			return []action{{"C passes to B", func(w *world) {
				w.repasses++
				if err := w.eps["C"].Pass(w.clk["C"], tok, "B"); err != nil {
					panic(err)
				}
				w.collect("C")
			}}}
		}
		return nil
	}}
	// A passes to B; once B holds the token it passes it back (session 2)
	// while datagrams of session 1 may still be in flight or replayed.
	scenarioReturn = &scenario{name: "A→B→A", nodes: []string{"A", "B"}, act: func(w *world) []action {
		b := w.eps["B"]
		if w.repasses > 0 || b == nil || !b.Holds(tok) || b.Passing(tok) {
			return nil
		}
		return []action{{"B passes to A", func(w *world) {
			w.repasses++
			if err := w.eps["B"].Pass(w.clk["B"], tok, "A"); err != nil {
				panic(err)
			}
			w.collect("B")
		}}}
	}}
)

func TestModelExhaustive(t *testing.T) {
	// The bound: retry limits, and how many datagrams may be duplicated
	// (-1: every datagram once). One crash of any node is always allowed.
	// A deep case runs only under -model.deep (make model-check): two
	// retries of every message, or the reroute and the return with a
	// duplicated datagram (854,115 and 1,146,981 states, 100 s and more
	// of one core each, where without one they have 110,427 and 124,979
	// states and take about 9 s), multiply the states explored for the
	// same rules; make test keeps within its time budget and still
	// explores duplicates in the single pass and in every 3-way scenario,
	// the reroute and the return among them.
	cases := []struct {
		sc                  *scenario
		move, ack, commit   int
		dups                int
		deep                bool
		wantOutcomesAtLeast []string
	}{
		{scenarioSingle, 1, 1, 1, -1, false, []string{"passed-to-B", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed", "lost:crash-in-window"}},
		{scenarioSingle, 2, 2, 2, -1, true, []string{"passed-to-B", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed", "lost:crash-in-window"}},
		{scenarioReroute, 1, 1, 1, 0, false, []string{"passed-to-B", "passed-to-C", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioReroute, 1, 1, 1, 1, true, []string{"passed-to-B", "passed-to-C", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioReturn, 1, 1, 1, 0, false, []string{"passed-to-A", "passed-to-B", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioReturn, 1, 1, 1, 1, true, []string{"passed-to-A", "passed-to-B", "lost:commit-not-delivered", "lost:holder-crashed"}},
		{scenarioDetour, 0, 0, 0, 0, false, []string{"passed-to-B", "passed-to-C", "kept-by-sender", "lost:commit-not-delivered", "lost:holder-crashed"}},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	var mu sync.Mutex
	total := new(big.Int)
	t.Cleanup(func() { fmt.Printf("passing model check: explored %s distinct schedules exhaustively\n", total) })
	for _, c := range cases {
		name := fmt.Sprintf("%s/retries=%d,%d,%d/dups=%d", c.sc.name, c.move, c.ack, c.commit, c.dups)
		t.Run(name, func(t *testing.T) {
			if c.deep && !*modelDeep {
				t.Skip("a deep bound: make model-check explores it (-model.deep)")
			}
			t.Parallel()
			n := exhaustive(t, c.sc, boundedConfig(c.move, c.ack, c.commit), c.dups, c.wantOutcomesAtLeast)
			mu.Lock()
			total.Add(total, n)
			mu.Unlock()
		})
	}
}

// exhaustive explores every schedule of sc under cfg with dups
// duplications allowed, fails t on a violation, checks that each outcome
// of want is reached, and returns the number of distinct schedules.
func exhaustive(t *testing.T, sc *scenario, cfg Config, dups int, want []string) *big.Int {
	x := &explorer{t: t, paths: map[string]*big.Int{}, outcomes: map[string]int{}, maxStates: 3_000_000}
	w := newWorld(sc, cfg)
	w.dupBudget = dups
	n := x.explore(w, nil)
	t.Logf("%d states, %d transitions, %s distinct schedules; quiescent outcomes %v",
		len(x.paths), x.transitions, n, x.outcomes)
	for _, o := range want {
		if x.outcomes[o] == 0 {
			t.Errorf("outcome %q never reached: the model does not exercise it", o)
		}
	}
	return n
}

// The checker is not vacuous: deliberately broken machines are caught.
func TestModelCatchesBrokenMachines(t *testing.T) { catchesBroken(t, boundedConfig(1, 1, 1)) }

// catchesBroken checks that the model check finds each deliberate fault
// of the machines cfg selects.
func catchesBroken(t *testing.T, base Config) {
	for name, f := range map[string]Fault{"acquire on Move": FaultAcquireOnMove, "skip the Ack check": FaultSkipAckCheck} {
		cfg := base
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

// The path counting above relies on the state graph being acyclic: every
// transition consumes a datagram, a duplication allowance, a timer
// firing (bounded by the retry limits) or the crash allowance.
func TestModelAcyclic(t *testing.T) {
	cfg := boundedConfig(1, 1, 1)
	onStack := map[string]bool{}
	done := map[string]bool{}
	var visit func(w *world)
	visit = func(w *world) {
		fp := w.fingerprint()
		if onStack[fp] {
			t.Fatalf("cycle through state %s", fp)
		}
		if done[fp] {
			return
		}
		onStack[fp] = true
		for _, a := range w.transitions() {
			w2 := w.clone()
			a.do(w2)
			visit(w2)
		}
		onStack[fp] = false
		done[fp] = true
	}
	w := newWorld(scenarioSingle, cfg)
	w.dupBudget = -1
	visit(w)
}

// TestModelRandom runs long random schedules with the default retry limits
// and chains of many passes among three nodes, beyond the exhaustive bound.
func TestModelRandom(t *testing.T) { randomModel(t, DefaultConfig(), *modelRuns, 1) }

// randomModel runs random schedules of the exchange cfg selects. A timer
// is picked with probability timerRate when a datagram could be delivered
// instead (1: timers and deliveries alike).
func randomModel(t *testing.T, cfg Config, runs int, timerRate float64) {
	steps := 4000
	if testing.Short() {
		runs /= 10
	}
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./agent/passing -run ModelRandom -model.seed %d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 2009))
	chain := &scenario{name: "random walk", nodes: []string{"A", "B", "C"}}
	chain.act = func(w *world) []action {
		var as []action
		for _, n := range chain.nodes {
			ep := w.eps[n]
			if ep == nil || !ep.Holds(tok) || ep.Passing(tok) || w.repasses >= 40 {
				continue
			}
			for _, p := range chain.nodes {
				if p != n {
					as = append(as, action{n + " passes to " + p, func(w *world) {
						w.repasses++
						if err := w.eps[n].Pass(w.clk[n], tok, p); err != nil {
							panic(err)
						}
						w.collect(n)
					}})
				}
			}
		}
		return as
	}
	outcomes := map[string]int{}
	passes := 0
	for run := 0; run < runs; run++ {
		w := newWorld(chain, cfg)
		w.dupBudget = -1
		// Each run draws its own duplication and crash rates. Loss is a
		// timer firing while datagrams are in flight (transitions), taken
		// with probability timerRate.
		dupRate := r.Float64() * 0.2
		crashRate := 0.0
		if r.IntN(4) == 0 {
			crashRate = 0.002
		}
		var trace []string
		for step := 0; step < steps && !w.quiescent(); step++ {
			as := w.transitions()
			// Bias: deliveries always, duplicates, crashes and early timers by rate.
			var pick action
			for {
				a := as[r.IntN(len(as))]
				switch {
				case strings.HasPrefix(a.label, "deliver-and-duplicate"):
					if r.Float64() >= dupRate {
						continue
					}
				case strings.HasPrefix(a.label, "crash"):
					if r.Float64() >= crashRate {
						continue
					}
				case strings.HasPrefix(a.label, "timer"):
					if len(w.net) > 0 && r.Float64() >= timerRate {
						continue
					}
				}
				pick = a
				break
			}
			pick.do(w)
			if len(trace) < 200 {
				trace = append(trace, pick.label)
			}
			if w.violation != "" {
				t.Fatalf("run %d: requirement (ii) violated: %s\nfirst steps:\n  %s", run, w.violation, strings.Join(trace, "\n  "))
			}
		}
		passes += w.repasses
		if !w.quiescent() {
			outcomes["step-limit"]++
			continue
		}
		// With several passes the per-session bookkeeping still applies:
		// a loss needs a crash or an undelivered Commit.
		o, err := w.outcome()
		if err != nil {
			t.Fatalf("run %d: %v\nfirst steps:\n  %s", run, err, strings.Join(trace, "\n  "))
		}
		outcomes[strings.SplitN(o, "-to-", 2)[0]]++
	}
	t.Logf("%d random schedules (%d passes attempted after the first), outcomes %v", runs, passes, outcomes)
	fmt.Printf("passing model check (%s): explored %d random schedules beyond the bound\n", cmp.Or(cfg.Exchange, DefaultExchange), runs)
	if outcomes["passed"] == 0 || outcomes["lost:commit-not-delivered"] == 0 {
		t.Errorf("random schedules did not reach both success and commit loss: %v", outcomes)
	}
}
