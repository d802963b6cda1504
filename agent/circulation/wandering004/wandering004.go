// Package wandering004 is the earlier variant of the Wandering Token, as
// seed 004 describes it (§5, Fig. 2, Table 2), beside package wandering
// (the journal version, seed 003 Fig. 1). What the two share is package
// wandering/hold: a token is held Δop while the protected operation A
// runs, or Δskip when it came early, and then passed to a member chosen
// at random. What differs is here:
//
//   - Regeneration (§5, §5.1): a fixed timeout Δmax = 3·Δmin (Table 2)
//     instead of 003's Δmin + exp(γgenerate), made adaptive: Δgen starts
//     at Δmax, is multiplied by K1 = 1.5 at each regeneration and moves
//     back toward Δmax by K2 = 0.05 of the difference at each token
//     received. A generated token is sent on at once, without running A
//     (Fig. 2's else branch; 003 runs A with it, line 31).
//   - Removal (§5): "the component discards a token t when it has been
//     enabled from less than Δmin time units by another token preceding
//     t. Precedence is based firstly on the timestamp included in the
//     token, and next on the generator identifier." There is no history
//     stack: one lasttoken (Fig. 2).
//   - Δmin from the membership: Table 2 writes Δmin = 1.5·(Δop·N) and
//     Δmax = 3·Δmin; its values column, and every table caption, say
//     Δmin = 600 with Δop = 4 for both N = 150 and N = 300, which the
//     formula does not give (900 and 1800). Config.Min, when set, wins;
//     the experiments set 600 s, the captions' value (docs/wandering.md).
//
// Our reading of Fig. 2, whose test compares token→timestamp with
// lasttoken→timestamp (two generation times, which would make every
// return of the same token early): the time compared with Δmin is when A
// last ran here (§5: "performing the protected operation only in case
// the component performed the protected operation more than Δmin time
// units ago"), and the token compared is Fig. 2's lasttoken, the last
// token kept here (run, skipped or generated). A token received within
// Δmin of A is discarded when lasttoken is another token that precedes
// it, and kept Δskip otherwise. Fig. 2 discards any other token
// (id ≠ lasttoken.id); §5's precedence is what lets "the first generated
// token ... persist", so we follow §5 by default. Config.Removal
// RemovalAny is Fig. 2's literal test instead (within Δmin of A, every
// token other than lasttoken is discarded, older or younger): the
// "domino effect" of §5, under which regenerated tokens remove each
// other (docs/wandering.md; docs/studies/wandering.md, 004 Table 5 both
// ways).
//
// Seed 004 passes the token with a 3-way protocol (§4: Move, Ack,
// Commit). Here it runs over the project's 4-way secure passing (002 §3,
// with EarlyStop), as package wandering does: the policy sees the same
// acquired / passed / failed events either way; only the loss and
// duplication properties of the passing differ (002's are stronger).
package wandering004

import (
	"fmt"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/circulation/wandering/hold"
	"tokenbed/agent/wire"
)

// Role is the policy's name in configuration files and logs.
const Role = "wandering-004"

// Config holds the time constants of Table 2 of seed 004.
type Config struct {
	// Op is Δop (Table 2: 4).
	Op time.Duration
	// Skip is Δskip (Table 2: 1).
	Skip time.Duration
	// N is the membership size the formula of Table 2 uses when Min is 0.
	N int
	// Min is Δmin; 0 means 1.5·Δop·N (Table 2's formula). The paper's
	// runs used 600 (Table 2's value, the captions of Tables 1, 3–5).
	Min time.Duration
	// Max is Δmax; 0 means 3·Δmin (Table 2).
	Max time.Duration
	// K1 and K2 adapt Δgen (§5.1, Fig. 2: K1_loss = 1.5, K2_loss = 0.05);
	// 0 means those values.
	K1, K2 float64
	// Removal is the token removal rule: RemovalPrecedence (§5's text,
	// the default; "" means it) or RemovalAny (Fig. 2's literal test).
	Removal Removal
	// GenerateAtStart makes the agent start with a token.
	GenerateAtStart bool
}

// Removal names a reading of 004's token removal rule. Both apply only to
// a token received within Δmin of the last A here.
type Removal string

const (
	// RemovalPrecedence is §5: "the component discards a token t when it
	// has been enabled from less than Δmin time units by another token
	// preceding t" (timestamp, then generator id). An older token than
	// lasttoken is kept (Δskip) and becomes lasttoken.
	RemovalPrecedence Removal = "precedence"
	// RemovalAny is Fig. 2 as printed: "if (token→id) ≠ (lasttoken→id)
	// then next": any token other than lasttoken is discarded, whichever
	// precedes; lasttoken is not updated (next skips "lasttoken = token").
	RemovalAny Removal = "any"
)

// Defaults of Fig. 2.
const (
	DefaultK1 = 1.5
	DefaultK2 = 0.05
)

// WithDefaults fills Min, Max, K1 and K2.
func (c Config) WithDefaults() Config {
	if c.Min == 0 {
		c.Min = time.Duration(1.5 * float64(c.Op) * float64(c.N))
	}
	if c.Max == 0 {
		c.Max = 3 * c.Min
	}
	if c.K1 == 0 {
		c.K1 = DefaultK1
	}
	if c.K2 == 0 {
		c.K2 = DefaultK2
	}
	if c.Removal == "" {
		c.Removal = RemovalPrecedence
	}
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Op <= 0:
		return circulation.Fieldf("op", "must be positive, got %v", c.Op)
	case c.Skip < 0 || c.Skip >= c.Op:
		return circulation.Fieldf("skip", "must be in [0, op), got %v (seed 004 lists Δskip < Δop)", c.Skip)
	case c.N < 0:
		return circulation.Fieldf("n", "must not be negative, got %d", c.N)
	case c.Min < 0 || c.Min == 0 && c.N == 0:
		return circulation.Fieldf("min", "must be positive, or 0 with n set (Δmin = 1.5·Δop·N), got %v", c.Min)
	case c.Max < 0:
		return circulation.Fieldf("max", "must not be negative, got %v", c.Max)
	case c.K1 != 0 && c.K1 < 1:
		return circulation.Fieldf("k1", "must be at least 1 (Δgen grows at each regeneration), got %v", c.K1)
	case c.K2 < 0 || c.K2 > 1:
		return circulation.Fieldf("k2", "must be in [0, 1], got %v", c.K2)
	case c.Removal != "" && c.Removal != RemovalPrecedence && c.Removal != RemovalAny:
		return circulation.Fieldf("removal", "want %q (§5, the default) or %q (Fig. 2 as printed), got %q", RemovalPrecedence, RemovalAny, c.Removal)
	}
	return nil
}

// Policy is the Wandering Token of seed 004. Use New.
type Policy struct {
	cfg Config
	h   circulation.Host
	// lastAccess: when A last ran here (zero: never, Fig. 2's timestamp 0).
	lastAccess time.Time
	// lastToken is Fig. 2's lasttoken: the last token kept here.
	lastToken wire.TokenID
	gen       time.Duration // Δgen
	held      *hold.Set
	regenAt   time.Time
}

var _ circulation.Policy = (*Policy)(nil)

func init() { circulation.Register[Section](Role, New) }

// New returns a policy; cfg is completed with WithDefaults.
func New(cfg Config) *Policy {
	cfg = cfg.WithDefaults()
	return &Policy{cfg: cfg, gen: cfg.Max, held: hold.NewSet()}
}

// Config is the policy's configuration, defaults filled.
func (p *Policy) Config() Config { return p.cfg }

// Gen is the current Δgen.
func (p *Policy) Gen() time.Duration { return p.gen }

// Name implements circulation.Policy.
func (p *Policy) Name() string { return Role }

// Start implements circulation.Policy.
func (p *Policy) Start(h circulation.Host, now time.Time) []circulation.Action {
	p.h = h
	p.regenAt = now.Add(p.gen)
	if p.cfg.GenerateAtStart {
		return []circulation.Action{{Kind: circulation.Generate, Reason: "start"}}
	}
	return nil
}

// Acquired implements circulation.Policy.
func (p *Policy) Acquired(now time.Time, t wire.TokenID, how circulation.How, reason string) []circulation.Action {
	p.regenAt = now.Add(p.gen)
	if how == circulation.ByGeneration {
		// Fig. 2, else branch: a new token, sent on at once, without A.
		p.lastToken = t
		return append(p.held.Hold(now, t, 0, false, ""), p.held.Route(now, p.h, p.cfg.Skip)...)
	}
	// Fig. 2: Δgen = Δgen − K2(Δgen − Δmax) at every token received.
	p.gen -= time.Duration(p.cfg.K2 * float64(p.gen-p.cfg.Max))
	if !p.lastAccess.IsZero() && now.Sub(p.lastAccess) <= p.cfg.Min {
		switch {
		case p.lastToken == t:
		case p.cfg.Removal == RemovalAny:
			// Fig. 2 as printed: enabled less than Δmin ago by another
			// token, whichever precedes; "next" keeps lasttoken.
			return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "other",
				Detail: fmt.Sprintf("A ran %v ago (≤ Δmin %v); lasttoken %v is another token", now.Sub(p.lastAccess), p.cfg.Min, p.lastToken)}}
		case p.lastToken.Compare(t) < 0:
			// §5's removal rule: enabled less than Δmin ago, and
			// lasttoken, another token, precedes t.
			return []circulation.Action{{Kind: circulation.Discard, Token: t, Reason: "precedence",
				Detail: fmt.Sprintf("A ran %v ago (≤ Δmin %v); %v precedes it", now.Sub(p.lastAccess), p.cfg.Min, p.lastToken)}}
		}
		p.lastToken = t // Fig. 2: sleep(Δskip); send(token)
		return append(p.held.Hold(now, t, p.cfg.Skip, false, ""), p.held.Route(now, p.h, p.cfg.Skip)...)
	}
	p.lastAccess, p.lastToken = now, t // Fig. 2: execute(A); send(token)
	return append(p.held.Hold(now, t, p.cfg.Op, true, "token"), p.held.Route(now, p.h, p.cfg.Skip)...)
}

// Passed implements circulation.Policy: back to select, the timeout
// re-armed with the current Δgen.
func (p *Policy) Passed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	p.held.Passed(t)
	p.regenAt = now.Add(p.gen)
	return nil
}

// PassFailed implements circulation.Policy.
func (p *Policy) PassFailed(now time.Time, t wire.TokenID, peer string) []circulation.Action {
	p.held.Failed(t, peer)
	return p.held.Route(now, p.h, p.cfg.Skip)
}

// Tick implements circulation.Policy: holds that are over, and the
// Δgen timeout while no token is held.
func (p *Policy) Tick(now time.Time) []circulation.Action {
	acts := p.held.Route(now, p.h, p.cfg.Skip)
	if p.held.Len() == 0 && !now.Before(p.regenAt) {
		waited := p.gen
		p.gen = time.Duration(p.cfg.K1 * float64(p.gen)) // Fig. 2: Δgen = Δgen·K1
		p.regenAt = now.Add(p.gen)
		acts = append(acts, circulation.Action{Kind: circulation.Generate, Reason: "loss",
			Detail: fmt.Sprintf("no token for Δgen %v; Δgen now %v", waited, p.gen)})
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
