// Package randomwalk is the circulation policy of the case study of seed
// 002 §3.2: hold the token for a while, then pass it to a member chosen
// uniformly at random from the local member cache; detect a lost token by
// its return time and regenerate it; remove spurious tokens with the
// sandwich rule; join by passing a fresh token into the membership.
package randomwalk

import (
	"fmt"
	"slices"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

// Config parameterises the policy. Durations are real time (the node
// configuration divides paper time by the time scale).
type Config struct {
	// Hold is how long the token stays at each visit (002 §3.3: 10 s),
	// standing for the operation the token protects.
	Hold time.Duration
	// RegenerateAfter is how many expected return times may pass without
	// a hit before the agent presumes the token lost and generates a new
	// one (002 §3.2: "several times"). 0 disables regeneration.
	RegenerateAfter float64
	// ExpectedReturn is the return time assumed before any is observed;
	// 0 means members × Hold, the mean return time of a random walk on a
	// complete graph (002 §3.3: 30 s for 3 agents holding 10 s).
	ExpectedReturn time.Duration
	// RegenerateJitter spreads the regeneration timeout uniformly by
	// ±this fraction, so that agents do not all regenerate at once.
	RegenerateJitter float64
	// GenerateAtStart makes the agent generate a token when it starts.
	GenerateAtStart bool
	// JoinPeer, if set, makes the agent join through that member: it
	// generates a token and passes it to JoinPeer at once (002 §3.2).
	JoinPeer string
	// Transit is what a pass may take on top of the hold, assumed per step
	// until return times are observed. In compressed time the hold shrinks
	// but the network does not, and an estimate of members × Hold alone
	// would regenerate tokens that are merely in transit. The agent's
	// configuration sets it to two Move timeouts.
	Transit time.Duration
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Hold < 0:
		return circulation.Fieldf("hold", "must not be negative, got %v", c.Hold)
	case c.RegenerateAfter < 0:
		return circulation.Fieldf("regenerate_after", "must not be negative, got %v", c.RegenerateAfter)
	case c.RegenerateAfter > 0 && c.RegenerateAfter < 1:
		return circulation.Fieldf("regenerate_after", "%v expected return times would regenerate tokens that are not lost; use at least 1 (the paper says several)", c.RegenerateAfter)
	case c.Transit < 0:
		return circulation.Fieldf("transit", "must not be negative, got %v", c.Transit)
	case c.ExpectedReturn < 0:
		return circulation.Fieldf("expected_return", "must not be negative, got %v", c.ExpectedReturn)
	case c.RegenerateAfter > 0 && c.Hold == 0 && c.ExpectedReturn == 0:
		return circulation.Fieldf("expected_return", "needed when hold is 0, else the expected return time would be 0 and every agent would regenerate at once")
	case c.RegenerateJitter < 0 || c.RegenerateJitter >= 1:
		return circulation.Fieldf("regenerate_jitter", "must be in [0, 1), got %v", c.RegenerateJitter)
	}
	return nil
}

type heldToken struct {
	until   time.Time // when the hold ends
	passing bool
	failed  map[string]bool // peers that failed since the hold ended
	join    bool
}

// Policy is the random-walk policy. Use New.
type Policy struct {
	cfg     Config
	h       circulation.Host
	held    map[wire.TokenID]*heldToken
	lastHit time.Time // last acquisition
	// Return time estimate: mean of the observed return times, used once
	// there are any (the paper compares the observed mean, 29.29 s, with
	// the expected 30 s).
	returns   int
	returnSum time.Duration
	hist      [2]wire.TokenID // the last two distinct tokens hit, older first
	regenAt   time.Time
}

// New returns the policy for cfg, which must be valid.
// DefaultHold is the hold of a configuration that sets none: the paper's
// 10 s per visit (002 §3.3).
const DefaultHold = 10 * time.Second

// Role is the policy's name in configuration files and logs.
const Role = "randomwalk"

var _ circulation.Policy = (*Policy)(nil)

func init() { circulation.Register[Section](Role, New) }

func New(cfg Config) *Policy {
	return &Policy{cfg: cfg, held: map[wire.TokenID]*heldToken{}}
}

// Name implements circulation.Policy.
func (p *Policy) Name() string { return Role }

// Start implements circulation.Policy.
func (p *Policy) Start(h circulation.Host, now time.Time) []circulation.Action {
	p.h = h
	p.lastHit = time.Time{}
	p.resetRegen(now)
	switch {
	case p.cfg.JoinPeer != "":
		return []circulation.Action{{Kind: circulation.Generate, Reason: "join", Detail: "joining through " + p.cfg.JoinPeer}}
	case p.cfg.GenerateAtStart:
		return []circulation.Action{{Kind: circulation.Generate, Reason: "start"}}
	}
	return nil
}

// ExpectedReturn is the current estimate of the return time: the mean of
// the observed return times, but never less than the configured value or,
// without one, members × Hold. The floor matters: while a spurious token
// circulates, hits come twice as often (even two at once), and an estimate
// fooled by that would regenerate yet more tokens.
func (p *Policy) ExpectedReturn() time.Duration {
	floor := p.cfg.ExpectedReturn
	members := time.Duration(len(p.h.Peers()) + 1)
	if floor == 0 {
		floor = members * p.cfg.Hold
	}
	if p.returns > 0 {
		return max(floor, p.returnSum/time.Duration(p.returns))
	}
	if p.cfg.ExpectedReturn == 0 {
		return floor + members*p.cfg.Transit
	}
	return floor
}

func (p *Policy) resetRegen(now time.Time) {
	if p.cfg.RegenerateAfter == 0 {
		p.regenAt = time.Time{}
		return
	}
	k := p.cfg.RegenerateAfter
	if j := p.cfg.RegenerateJitter; j > 0 {
		k *= 1 + j*(2*p.h.Rand().Float64()-1)
	}
	p.regenAt = now.Add(time.Duration(k * float64(p.ExpectedReturn())))
}

// Acquired implements circulation.Policy. It applies the sandwich rule
// (002 §3.2): an agent hit by A, then B, then A again, with A > B, knows
// both circulated at once and that A, the larger, is spurious: it discards
// A. Hits of B, A, B change nothing.
func (p *Policy) Acquired(now time.Time, t wire.TokenID, how circulation.How, reason string) []circulation.Action {
	if how == circulation.ByPass && !p.lastHit.IsZero() {
		p.returns++
		p.returnSum += now.Sub(p.lastHit)
	}
	p.lastHit = now
	p.resetRegen(now)
	if t != p.hist[1] {
		sandwich := t == p.hist[0] && t.Compare(p.hist[1]) > 0
		p.hist[0], p.hist[1] = p.hist[1], t
		if sandwich {
			return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "sandwich",
				Detail: fmt.Sprintf("hit by %v, %v, %v", t, p.hist[0], t)}}
		}
	}
	ht := &heldToken{until: now.Add(p.cfg.Hold), failed: map[string]bool{}}
	if reason == "join" {
		ht.until, ht.join = now, true
	}
	p.held[t] = ht
	return p.route(now)
}

// Passed implements circulation.Policy.
func (p *Policy) Passed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	delete(p.held, t)
	p.resetRegen(now)
	return nil
}

// PassFailed implements circulation.Policy: choose again among the peers
// that have not failed since the hold ended; when all have, hold the token
// for another period and start over.
func (p *Policy) PassFailed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	ht := p.held[t]
	if ht == nil {
		return nil
	}
	ht.passing = false
	ht.failed[peer] = true
	return p.route(now)
}

// route starts passes for the tokens whose hold is over.
func (p *Policy) route(now time.Time) []circulation.Action {
	var acts []circulation.Action
	for _, t := range p.heldIDs() {
		ht := p.held[t]
		if ht.passing || now.Before(ht.until) {
			continue
		}
		var cands []string
		if ht.join {
			cands = []string{p.cfg.JoinPeer}
		} else {
			for _, m := range p.h.Peers() {
				if !ht.failed[m] {
					cands = append(cands, m)
				}
			}
		}
		if len(cands) == 0 || ht.join && ht.failed[p.cfg.JoinPeer] {
			// Nobody to pass to: keep the token for another hold period.
			ht.until = now.Add(max(p.cfg.Hold, time.Millisecond))
			clear(ht.failed)
			ht.join = false
			continue
		}
		ht.passing = true
		acts = append(acts, circulation.Action{Kind: circulation.Pass, Token: t, Peer: cands[p.h.Rand().IntN(len(cands))]})
	}
	return acts
}

func (p *Policy) heldIDs() []wire.TokenID {
	ids := make([]wire.TokenID, 0, len(p.held))
	for t := range p.held {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, wire.TokenID.Compare)
	return ids
}

// Tick implements circulation.Policy: ends holds, and regenerates a token
// presumed lost (002 §3.2).
func (p *Policy) Tick(now time.Time) []circulation.Action {
	acts := p.route(now)
	if len(p.held) == 0 && !p.regenAt.IsZero() && !now.Before(p.regenAt) {
		est := p.ExpectedReturn()
		acts = append(acts, circulation.Action{Kind: circulation.Generate, Reason: "loss",
			Detail: fmt.Sprintf("no token for %v, %.1f × the expected return time %v", now.Sub(p.lastSeenOr(now)), p.cfg.RegenerateAfter, est)})
		p.resetRegen(now)
	}
	return acts
}

func (p *Policy) lastSeenOr(now time.Time) time.Time {
	if p.lastHit.IsZero() {
		return now
	}
	return p.lastHit
}

// Deadline implements circulation.Policy.
func (p *Policy) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, ht := range p.held {
		if !ht.passing && (!ok || ht.until.Before(d)) {
			d, ok = ht.until, true
		}
	}
	if len(p.held) == 0 && !p.regenAt.IsZero() && (!ok || p.regenAt.Before(d)) {
		d, ok = p.regenAt, true
	}
	return d, ok
}
