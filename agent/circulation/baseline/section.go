package baseline

import (
	"time"

	"tokenbed/agent/circulation"
)

// Section is the policy's section of the agent's configuration
// ("baseline:"), in paper time. An agent's generate flag means nothing to
// it: the baseline never makes a token.
type Section struct {
	Op     time.Duration `yaml:"op"`     // Δop, default 4s
	Rule   string        `yaml:"rule"`   // "003" (1200 ± 600 s) or "004" (Δmin + U[0, Δmin/2])
	Period time.Duration `yaml:"period"` // default 1200s (003) or 600s (004)
}

var _ circulation.Section[Config] = (*Section)(nil)

// Resolve implements circulation.Section.
func (s *Section) Resolve(env circulation.Env) Config {
	c := Config{Op: 4 * time.Second, Rule: s.Rule, Period: s.Period}
	if s.Op != 0 {
		c.Op = s.Op
	}
	env.Report(c.Validate())
	c = c.WithDefaults()
	c.Op, c.Period = env.Scale(c.Op), env.Scale(c.Period)
	return c
}
