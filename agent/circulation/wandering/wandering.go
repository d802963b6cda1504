// Package wandering is the Wandering Token policy of seed 003 (Fig. 1):
// soft mutual exclusion of a shared resource by a randomly wandering
// token. An agent that gets the token performs the protected operation A
// for Δop, unless it did so Δmin ago or less, in which case it only keeps
// the token for Δskip; then it passes the token to a random member. An
// agent that sees no token for Δmin plus an exponential random time of
// mean γgenerate generates one; spurious tokens are removed by the
// timestamp sandwich rule.
//
// Comments cite the lines of Fig. 1 ("line 12"). Line 12 asks whether
// any earlier visit of the token is followed by a token with a lower
// timestamp (∃ i, j), not only the latest earlier visit: the two differ
// once the bounded history has dropped entries, or after a token survived
// a sandwich (a sandwiched token is discarded and pushed, line 35, so the
// latest visit is then the discarded one). Lines 24 and 31 log
// op_started/op_finished (circulation.OpStart/OpEnd).
//
// It plugs into the project's 4-way secure passing operation (002 §3),
// like the random walk of 002 §3.2: only the routing rule differs. Seed
// 003 assumes the same 4-way protocol (§3: "a 4-way secure token passing
// protocol ... Ciuffoletti (2007)"). The earlier variant of seed 004 is
// package wandering004.
package wandering

import (
	"fmt"
	"slices"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/wandering/hold"
	"tokenbed/agent/wire"
)

// Role is the policy's name in configuration files and logs.
const Role = "wandering"

// Policy is the Wandering Token policy. Use New.
type Policy struct {
	cfg     Config
	h       circulation.Host
	history []wire.TokenID // line 35's stack, oldest first
	// lastAccess is line 25's lastaccess.timestamp; zero is line 4's
	// timestamp 0 (the figure names it lasttoken there), so the first
	// token always runs A. Config.LastAccess says whether it is taken
	// when A starts or when it ends.
	lastAccess time.Time
	// running counts the executions of A in progress (OpStart given,
	// OpEnd not yet).
	running int
	held    *hold.Set
	regenAt time.Time
	// Accesses counts protected operations started (Δop holds), Skips
	// the early tokens kept only Δskip.
	Accesses, Skips int
}

var _ circulation.Policy = (*Policy)(nil)

func init() { circulation.Register[Section](Role, New) }

// New returns a policy; cfg is completed with WithDefaults.
func New(cfg Config) *Policy {
	return &Policy{cfg: cfg.WithDefaults(), held: hold.NewSet()}
}

// Config is the policy's configuration, defaults filled.
func (p *Policy) Config() Config { return p.cfg }

// Name implements circulation.Policy.
func (p *Policy) Name() string { return Role }

// Start implements circulation.Policy.
func (p *Policy) Start(h circulation.Host, now time.Time) []circulation.Action {
	p.h = h
	p.resetTimeout(now)
	if p.cfg.GenerateAtStart {
		return []circulation.Action{{Kind: circulation.Generate, Reason: "start"}}
	}
	return nil
}

// resetTimeout arms line 8's timeout: Δmin plus a random time. The figure
// writes poisson(γgenerate) and §2 explains it as the waiting time of a
// Poisson process with N_max events per Δmin·N_max: an exponential time
// of mean γgenerate, so that the first of N_max agents times out about
// Δmin after the fixed part, every 2Δmin on average.
func (p *Policy) resetTimeout(now time.Time) {
	x := time.Duration(p.h.Rand().ExpFloat64() * float64(p.cfg.Generate))
	p.regenAt = now.Add(p.cfg.Min + x)
}

// sandwich is line 12: ∃ i, j, i < j ∧ history(j).id = token.id ∧
// history(i).timestamp < token.timestamp, with history a stack (index 0
// the latest push): t was seen before (j), and a token with a lower
// timestamp was seen after that visit (i). The timestamp is the token's
// generation time (line 30), Gen; equal timestamps sandwich nothing.
// It returns the earlier-stamped token, for the log.
func (p *Policy) sandwich(t wire.TokenID) (wire.TokenID, bool) {
	seen := false
	for _, e := range p.history { // oldest first: e after the first visit of t
		if e == t {
			seen = true
		} else if seen && e.Gen < t.Gen {
			return e, true
		}
	}
	return wire.TokenID{}, false
}

// push is line 35.
func (p *Policy) push(t wire.TokenID) {
	p.history = append(p.history, t)
	if len(p.history) > p.cfg.History {
		p.history = slices.Delete(p.history, 0, len(p.history)-p.cfg.History)
	}
}

// Acquired implements circulation.Policy: lines 9–27 for a token
// received, lines 29–33 for one generated.
func (p *Policy) Acquired(now time.Time, t wire.TokenID, how circulation.How, reason string) []circulation.Action {
	p.resetTimeout(now)
	if how == circulation.ByPass {
		if older, ok := p.sandwich(t); ok {
			// Line 15: silently remove the token. The figure falls through
			// to lines 17–27, but a discarded token can be neither used
			// nor sent; line 35 still pushes it.
			p.push(t)
			return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "sandwich",
				Detail: fmt.Sprintf("%v seen before, then %v with an earlier timestamp", t, older)}}
		}
	}
	// Line 35 pushes after the send; pushing at arrival is the same to
	// line 12, which reads the history only when the next token arrives.
	p.push(t)
	if how == circulation.ByPass && p.early(now) {
		p.Skips++ // line 18: A ran Δmin ago or less; line 21: keep it Δskip
		return append(p.held.Hold(now, t, p.cfg.Skip, false, ""), p.route(now)...)
	}
	// Lines 24–25 (received) or 31–32 (generated): execute A for Δop.
	if p.cfg.LastAccess == LastAccessStart {
		p.lastAccess = now
	}
	p.running++
	p.Accesses++
	why := "token"
	if how == circulation.ByGeneration {
		why = "generated"
	}
	return append(p.held.Hold(now, t, p.cfg.Op, true, why), p.route(now)...)
}

// early is line 18: time − lastaccess ≤ Δmin. With lastaccess taken at
// the end of A (line 25 as written), a token that arrives while A runs
// is early too: the loop reads it only after line 27's send, and by then
// line 25 has set lastaccess.
func (p *Policy) early(now time.Time) bool {
	if p.cfg.LastAccess == LastAccessEnd && p.running > 0 {
		return true
	}
	return !p.lastAccess.IsZero() && now.Sub(p.lastAccess) <= p.cfg.Min
}

// route passes the tokens whose hold is over; an execution of A that
// ends here is line 24's execute(A) returning, so line 25 (or 32) sets
// lastaccess now when it is read at the end.
func (p *Policy) route(now time.Time) []circulation.Action {
	acts := p.held.Route(now, p.h, p.cfg.Skip)
	for _, a := range acts {
		if a.Kind == circulation.OpEnd {
			p.running--
			if p.cfg.LastAccess == LastAccessEnd {
				p.lastAccess = now
			}
		}
	}
	return acts
}

// Passed implements circulation.Policy: line 27's send is over, the loop
// returns to line 8 and re-arms the timeout.
func (p *Policy) Passed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	p.held.Passed(t)
	p.resetTimeout(now)
	return nil
}

// PassFailed implements circulation.Policy: another peer, as in 002 §3.
func (p *Policy) PassFailed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	p.held.Failed(t, peer)
	return p.route(now)
}

// Tick implements circulation.Policy: holds that are over (line 27), and
// line 8's timeout, which runs only while the agent holds no token (the
// loop waits in select only between tokens).
func (p *Policy) Tick(now time.Time) []circulation.Action {
	acts := p.route(now)
	if p.held.Len() == 0 && !now.Before(p.regenAt) {
		p.resetTimeout(now)
		acts = append(acts, circulation.Action{Kind: circulation.Generate, Reason: "loss",
			Detail: fmt.Sprintf("no token for Δmin %v + exp(γ %v)", p.cfg.Min, p.cfg.Generate)})
	}
	return acts
}

// Deadline implements circulation.Policy.
func (p *Policy) Deadline() (time.Time, bool) {
	d, ok := p.held.Deadline()
	if p.held.Len() == 0 && (!ok || p.regenAt.Before(d)) {
		d, ok = p.regenAt, true
	}
	return d, ok
}
