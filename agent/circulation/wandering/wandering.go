// Package wandering is the Wandering Token policy of seed 003 (Fig. 1):
// soft mutual exclusion of a shared resource by a randomly wandering
// token. An agent that gets the token performs the protected operation for
// Δop, unless it did so less than Δmin ago, in which case it only keeps
// the token for Δskip; then it passes the token to a random member. An
// agent that sees no token for Δmin plus an exponential random time of
// mean γgenerate generates one; spurious tokens are removed by the
// timestamp sandwich rule (line 12).
//
// It plugs into the same passing operation as the random walk of 002 §3.2:
// only the routing rule differs.
package wandering

import (
	"fmt"
	"slices"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

type entry struct {
	id wire.TokenID
}

type held struct {
	until   time.Time
	passing bool
	failed  map[string]bool
}

// Policy is the Wandering Token policy. Use New.
type Policy struct {
	cfg        Config
	h          circulation.Host
	history    []entry // oldest first
	lastAccess time.Time
	held       map[wire.TokenID]*held
	regenAt    time.Time
	// Accesses counts protected operations started (Δop holds), Skips
	// the early tokens kept only Δskip.
	Accesses, Skips int
}

// New returns a policy; cfg is completed with WithDefaults.
// Role is the policy's name in configuration files and logs.
const Role = "wandering"

var _ circulation.Policy = (*Policy)(nil)

func init() { circulation.Register[Section](Role, New) }

func New(cfg Config) *Policy {
	return &Policy{cfg: cfg.WithDefaults(), held: map[wire.TokenID]*held{}}
}

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

// resetTimeout arms line 8's timeout: Δmin plus an exponential random time
// of mean γgenerate (a Poisson process of regenerations, so that agents do
// not synchronise).
func (p *Policy) resetTimeout(now time.Time) {
	x := time.Duration(p.h.Rand().ExpFloat64() * float64(p.cfg.Generate))
	p.regenAt = now.Add(p.cfg.Min + x)
}

// sandwich is line 12: discard token t if it is in the history and a token
// with a lower timestamp was received after it.
func (p *Policy) sandwich(t wire.TokenID) (wire.TokenID, bool) {
	for j := len(p.history) - 1; j >= 0; j-- {
		if p.history[j].id != t {
			continue
		}
		for i := j + 1; i < len(p.history); i++ {
			if p.history[i].id.Gen < t.Gen {
				return p.history[i].id, true
			}
		}
		return wire.TokenID{}, false
	}
	return wire.TokenID{}, false
}

func (p *Policy) push(t wire.TokenID) {
	p.history = append(p.history, entry{t})
	if len(p.history) > p.cfg.History {
		p.history = slices.Delete(p.history, 0, len(p.history)-p.cfg.History)
	}
}

// Acquired implements circulation.Policy (lines 9–27 and 29–33).
func (p *Policy) Acquired(now time.Time, t wire.TokenID, how circulation.How, reason string) []circulation.Action {
	p.resetTimeout(now)
	if how == circulation.ByPass {
		if older, ok := p.sandwich(t); ok {
			p.push(t)
			return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "sandwich",
				Detail: fmt.Sprintf("%v seen before, then %v with an earlier timestamp", t, older)}}
		}
	}
	p.push(t)
	hold := p.cfg.Op
	if how == circulation.ByPass && !p.lastAccess.IsZero() && now.Sub(p.lastAccess) <= p.cfg.Min {
		hold = p.cfg.Skip // line 21: an early token
		p.Skips++
	} else {
		p.lastAccess = now // lines 24–25 (and 31–32 for a generated token)
		p.Accesses++
	}
	p.held[t] = &held{until: now.Add(hold), failed: map[string]bool{}}
	return p.route(now)
}

// Passed implements circulation.Policy.
func (p *Policy) Passed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	delete(p.held, t)
	p.resetTimeout(now)
	return nil
}

// PassFailed implements circulation.Policy: another peer, as in 002 §3.
func (p *Policy) PassFailed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	if h := p.held[t]; h != nil {
		h.passing = false
		h.failed[peer] = true
	}
	return p.route(now)
}

func (p *Policy) route(now time.Time) []circulation.Action {
	var acts []circulation.Action
	ids := make([]wire.TokenID, 0, len(p.held))
	for t := range p.held {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, wire.TokenID.Compare)
	for _, t := range ids {
		h := p.held[t]
		if h.passing || now.Before(h.until) {
			continue
		}
		var cands []string
		for _, m := range p.h.Peers() {
			if !h.failed[m] {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			h.until = now.Add(max(p.cfg.Skip, time.Millisecond))
			clear(h.failed)
			continue
		}
		h.passing = true
		acts = append(acts, circulation.Action{Kind: circulation.Pass, Token: t, Peer: cands[p.h.Rand().IntN(len(cands))]})
	}
	return acts
}

// Tick implements circulation.Policy.
func (p *Policy) Tick(now time.Time) []circulation.Action {
	acts := p.route(now)
	if len(p.held) == 0 && !now.Before(p.regenAt) {
		p.resetTimeout(now)
		acts = append(acts, circulation.Action{Kind: circulation.Generate, Reason: "loss",
			Detail: fmt.Sprintf("no token for Δmin %v + exp(γ %v)", p.cfg.Min, p.cfg.Generate)})
	}
	return acts
}

// Deadline implements circulation.Policy.
func (p *Policy) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, h := range p.held {
		if !h.passing && (!ok || h.until.Before(d)) {
			d, ok = h.until, true
		}
	}
	if len(p.held) == 0 && (!ok || p.regenAt.Before(d)) {
		d, ok = p.regenAt, true
	}
	return d, ok
}
