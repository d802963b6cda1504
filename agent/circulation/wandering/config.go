package wandering

import (
	"time"

	"tokenbed/agent/circulation"
)

// Config holds the parameters of Table 1 of seed 003.
type Config struct {
	// Op is Δop, how long the protected operation holds the token
	// (Table 1: 4 s).
	Op time.Duration
	// Skip is Δskip, how long an early token is kept (Table 1: 0.1 s).
	Skip time.Duration
	// NMax is the number of agents that saturates the resource (Table 1:
	// 300).
	NMax int
	// Min is Δmin; 0 means Op × NMax / 2 (line 2; Table 1: 600 s).
	Min time.Duration
	// Generate is γgenerate, the mean of the random part of the
	// regeneration timeout; 0 means Min × NMax (line 3; Table 1: 180,000 s).
	Generate time.Duration
	// GenerateAtStart makes the agent start with a token.
	GenerateAtStart bool
	// LastAccess is when line 18's lastaccess is taken: LastAccessEnd
	// ("" means it), after execute(A) returns, as lines 25 and 32 are
	// written; or LastAccessStart, when A starts.
	LastAccess LastAccess
	// History is how many tokens the sandwich rule remembers (line 35
	// pushes every token; a bound keeps memory finite). 0 means 64: with
	// one visit per Δmin or so, 64 visits reach back far beyond the
	// return time (about 2Δmin, §2) that the rule needs.
	History int
}

// LastAccess names a reading of Fig. 1 lines 25 and 32.
type LastAccess string

const (
	// LastAccessEnd is Fig. 1 as written: execute(A) (line 24) returns,
	// then lastaccess = time (line 25), so line 18's Δmin counts from
	// the end of A. While A runs the loop is not in select (line 8): a
	// token that arrives then is read after the send, when lastaccess is
	// already the end of A, so it is early.
	LastAccessEnd LastAccess = "end"
	// LastAccessStart takes lastaccess when A starts: Δmin counts from
	// the start, Δop earlier than as written.
	LastAccessStart LastAccess = "start"
)

// WithDefaults fills Min, Generate, LastAccess and History from the
// formulas of Fig. 1.
func (c Config) WithDefaults() Config {
	if c.LastAccess == "" {
		c.LastAccess = LastAccessEnd
	}
	if c.Min == 0 {
		c.Min = c.Op * time.Duration(c.NMax) / 2 // line 2
	}
	if c.Generate == 0 {
		c.Generate = c.Min * time.Duration(c.NMax) // line 3
	}
	if c.History == 0 {
		c.History = 64
	}
	return c
}

// Validate names the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Op <= 0:
		return circulation.Fieldf("op", "must be positive, got %v", c.Op)
	case c.Skip < 0 || c.Skip >= c.Op:
		return circulation.Fieldf("skip", "must be in [0, op), got %v (seed 003 assumes Δskip ≪ Δop)", c.Skip)
	case c.NMax <= 0:
		return circulation.Fieldf("nmax", "must be positive, got %d", c.NMax)
	case c.Min < 0:
		return circulation.Fieldf("min", "must not be negative, got %v", c.Min)
	case c.Generate < 0:
		return circulation.Fieldf("generate", "must not be negative, got %v", c.Generate)
	case c.LastAccess != "" && c.LastAccess != LastAccessEnd && c.LastAccess != LastAccessStart:
		return circulation.Fieldf("lastaccess", "want %q (line 25 as written, the default) or %q (when A starts), got %q", LastAccessEnd, LastAccessStart, c.LastAccess)
	case c.History < 0:
		return circulation.Fieldf("history", "must not be negative, got %d", c.History)
	}
	return nil
}

// Section is the policy's section of the agent's configuration
// ("wandering:"), as written: durations in paper time, unset fields taking
// the values of Table 1 of seed 003.
type Section struct {
	Op              time.Duration `yaml:"op"`       // Δop, default 4s
	Skip            time.Duration `yaml:"skip"`     // Δskip, default 100ms
	NMax            int           `yaml:"nmax"`     // default 300
	Min             time.Duration `yaml:"min"`      // Δmin, default op × nmax / 2
	Generate        time.Duration `yaml:"generate"` // γgenerate, default min × nmax
	GenerateAtStart bool          `yaml:"generate_at_start"`
	// LastAccess: "end" (line 25 as written, the default) or "start";
	// see Config.LastAccess.
	LastAccess LastAccess `yaml:"lastaccess"`
}

var _ circulation.Section[Config] = (*Section)(nil)

// Resolve implements circulation.Section: Table 1's values where the
// section sets none, every invalid field reported, durations in real time.
func (s *Section) Resolve(env circulation.Env) Config {
	c := Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 300, Min: s.Min,
		Generate: s.Generate, GenerateAtStart: s.GenerateAtStart || env.Generate, LastAccess: s.LastAccess}
	if s.Op != 0 {
		c.Op = s.Op
	}
	if s.Skip != 0 {
		c.Skip = s.Skip
	}
	if s.NMax != 0 {
		c.NMax = s.NMax
	}
	env.Report(c.Validate())
	c = c.WithDefaults()
	c.Op, c.Skip, c.Min, c.Generate = env.Scale(c.Op), env.Scale(c.Skip), env.Scale(c.Min), env.Scale(c.Generate)
	return c
}
