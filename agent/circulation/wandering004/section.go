package wandering004

import (
	"time"

	"tokenbed/agent/circulation"
)

// Section is the policy's section of the agent's configuration
// ("wandering-004:"), as written: paper time, unset fields taking Table 2's
// values (Δop 4, Δskip 1) and the captions' Δmin = 600 unless n is given
// for Table 2's formula.
type Section struct {
	Op   time.Duration `yaml:"op"`   // Δop, default 4s
	Skip time.Duration `yaml:"skip"` // Δskip, default 1s
	N    int           `yaml:"n"`    // for Δmin = 1.5·Δop·N when min is not set
	Min  time.Duration `yaml:"min"`  // Δmin, default 600s unless n is set
	Max  time.Duration `yaml:"max"`  // Δmax, default 3 × min
	K1   float64       `yaml:"k1"`   // default 1.5
	K2   float64       `yaml:"k2"`   // default 0.05
	// Removal: "precedence" (§5, the default) or "any" (Fig. 2 as
	// printed: any token other than lasttoken); see Config.Removal.
	Removal         Removal `yaml:"removal"`
	GenerateAtStart bool    `yaml:"generate_at_start"`
}

var _ circulation.Section[Config] = (*Section)(nil)

// Resolve implements circulation.Section.
func (s *Section) Resolve(env circulation.Env) Config {
	c := Config{Op: 4 * time.Second, Skip: time.Second, N: s.N, Min: s.Min, Max: s.Max, K1: s.K1, K2: s.K2, Removal: s.Removal,
		GenerateAtStart: s.GenerateAtStart || env.Generate}
	if s.Op != 0 {
		c.Op = s.Op
	}
	if s.Skip != 0 {
		c.Skip = s.Skip
	}
	if c.Min == 0 && c.N == 0 {
		c.Min = 600 * time.Second
	}
	env.Report(c.Validate())
	c = c.WithDefaults()
	c.Op, c.Skip, c.Min, c.Max = env.Scale(c.Op), env.Scale(c.Skip), env.Scale(c.Min), env.Scale(c.Max)
	return c
}
