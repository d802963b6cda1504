package randomwalk

import (
	"time"

	"tokenbed/agent/circulation"
)

// Section is the policy's section of the agent's configuration
// ("randomwalk:"), as written: durations in paper time, unset fields
// taking the defaults of 002 §3.2–3.3.
type Section struct {
	Hold             time.Duration `yaml:"hold"`              // default 10s (002 §3.3)
	RegenerateAfter  *float64      `yaml:"regenerate_after"`  // default 10; 0 disables
	ExpectedReturn   time.Duration `yaml:"expected_return"`   // default members × hold
	RegenerateJitter *float64      `yaml:"regenerate_jitter"` // default 0.1
	GenerateAtStart  bool          `yaml:"generate_at_start"`
}

var _ circulation.Section[Config] = (*Section)(nil)

// Resolve implements circulation.Section: the defaults, every invalid
// field reported, durations in real time.
func (s *Section) Resolve(env circulation.Env) Config {
	c := Config{Hold: DefaultHold, RegenerateAfter: 10, RegenerateJitter: 0.1,
		GenerateAtStart: s.GenerateAtStart || env.Generate, JoinPeer: env.Join, ExpectedReturn: s.ExpectedReturn}
	if s.Hold < 0 {
		env.Errorf("hold", "must not be negative")
	} else if s.Hold > 0 {
		c.Hold = s.Hold
	}
	if s.RegenerateAfter != nil {
		c.RegenerateAfter = *s.RegenerateAfter
	}
	if s.RegenerateJitter != nil {
		c.RegenerateJitter = *s.RegenerateJitter
	}
	env.Report(c.Validate())
	// Compressed time: the hold and the expected return are application
	// time; the transit allowance is real network time already.
	c.Hold, c.ExpectedReturn = env.Scale(c.Hold), env.Scale(c.ExpectedReturn)
	c.Transit = env.Transit
	return c
}

// NominalHold is the hold of every visit (real time): the nominal
// interval of application time on the paper clock.
func (c Config) NominalHold() time.Duration { return c.Hold }
