// Package baseline is the uncoordinated reference the Wandering Token is
// measured against: no token, and each agent runs the protected
// operation A (for Δop) periodically, with a random bias that breaks
// synchronous behaviour. Two period rules, one per seed:
//
//   - "003" (seed 003 §3): "The interval between two successive requests
//     from a given subscriber is 4 * 300 = 1200 seconds (equal to the
//     average return time in the token based simulation), incremented by
//     a random bias, chosen in the interval [-600, +600]": Period + U[−Period/2, +Period/2].
//   - "004" (seed 004 §2): "a system wide period ∆min perturbed by a
//     random bias, chosen in the interval [0,∆min/2]": Period + U[0, Period/2],
//     with Δmin = 600 and Δop = 4 (Table 1's caption).
//
// Neither seed says when an agent's first request comes; here it is at a
// uniform random point of a first interval drawn by the rule, so that the
// agents start out of phase (the papers' runs are long: 10^5 and 10^6
// time units, against periods of 600 to 1800).
//
// The agent still runs the passing operation beneath (it is a node like
// the others) but never generates nor passes a token; a token that
// reaches it anyway is passed on at once.
package baseline

import (
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

// Role is the policy's name in configuration files and logs.
const Role = "baseline"

// The period rules.
const (
	Rule003 = "003"
	Rule004 = "004"
)

// Config of the baseline.
type Config struct {
	// Op is Δop, how long A runs (both seeds: 4).
	Op time.Duration
	// Rule is Rule003 or Rule004.
	Rule string
	// Period is the rule's base: 003's mean interval (default 1200 s,
	// Δop·N_max), or 004's Δmin (default 600 s).
	Period time.Duration
}

// WithDefaults fills Period.
func (c Config) WithDefaults() Config {
	if c.Period == 0 {
		switch c.Rule {
		case Rule003:
			c.Period = 1200 * time.Second
		case Rule004:
			c.Period = 600 * time.Second
		}
	}
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Op <= 0:
		return circulation.Fieldf("op", "must be positive, got %v", c.Op)
	case c.Rule != Rule003 && c.Rule != Rule004:
		return circulation.Fieldf("rule", "%q: want %q (1200 ± 600 s, seed 003 §3) or %q (Δmin + U[0, Δmin/2], seed 004 §2)", c.Rule, Rule003, Rule004)
	case c.Period < 0:
		return circulation.Fieldf("period", "must not be negative, got %v", c.Period)
	}
	return nil
}

// Policy is the baseline. Use New.
type Policy struct {
	cfg  Config
	h    circulation.Host
	next time.Time // next start of A
	end  time.Time // end of the running A (zero: none)
}

var _ circulation.Policy = (*Policy)(nil)

func init() { circulation.Register[Section](Role, New) }

// New returns a policy; cfg is completed with WithDefaults.
func New(cfg Config) *Policy { return &Policy{cfg: cfg.WithDefaults()} }

// Config is the configuration, defaults filled.
func (p *Policy) Config() Config { return p.cfg }

// Name implements circulation.Policy.
func (p *Policy) Name() string { return Role }

// Interval draws the time from one request to the next by the rule.
func (p *Policy) Interval() time.Duration {
	u := p.h.Rand().Float64()
	per := float64(p.cfg.Period)
	if p.cfg.Rule == Rule003 {
		return time.Duration(per + (u-0.5)*per) // 1200 + U[−600, +600]
	}
	return time.Duration(per + u*per/2) // Δmin + U[0, Δmin/2]
}

// Start implements circulation.Policy.
func (p *Policy) Start(h circulation.Host, now time.Time) []circulation.Action {
	p.h = h
	p.next = now.Add(time.Duration(h.Rand().Float64() * float64(p.Interval())))
	return nil
}

// Acquired implements circulation.Policy: a token has no business here;
// it is passed on at once.
func (p *Policy) Acquired(now time.Time, t wire.TokenID, how circulation.How, reason string) []circulation.Action {
	return p.pass(t)
}

func (p *Policy) pass(t wire.TokenID) []circulation.Action {
	peers := p.h.Peers()
	if len(peers) == 0 {
		return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "baseline", Detail: "no token is used by the baseline"}}
	}
	return []circulation.Action{{Kind: circulation.Pass, Token: t, Peer: peers[p.h.Rand().IntN(len(peers))]}}
}

// Passed implements circulation.Policy.
func (p *Policy) Passed(time.Time, wire.TokenID, string) []circulation.Action { return nil }

// PassFailed implements circulation.Policy.
func (p *Policy) PassFailed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	return p.pass(t)
}

// Tick implements circulation.Policy: ends A when Δop is over, and starts
// it at the next request. The interval counts from one request to the
// next (both seeds speak of the interval between requests), so a request
// that comes while A still runs (an interval below Δop, impossible with
// the seeds' numbers) waits for its end.
func (p *Policy) Tick(now time.Time) []circulation.Action {
	var acts []circulation.Action
	if !p.end.IsZero() && !now.Before(p.end) {
		p.end = time.Time{}
		acts = append(acts, circulation.Action{Kind: circulation.OpEnd, Reason: "done"})
	}
	if p.end.IsZero() && !now.Before(p.next) {
		p.end = now.Add(p.cfg.Op)
		p.next = p.next.Add(p.Interval())
		acts = append(acts, circulation.Action{Kind: circulation.OpStart, Reason: "periodic"})
	}
	return acts
}

// Deadline implements circulation.Policy.
func (p *Policy) Deadline() (time.Time, bool) {
	if !p.end.IsZero() {
		return p.end, true // a request due meanwhile waits for the end
	}
	return p.next, true
}
