package config

import (
	"strings"
	"testing"
)

// The passing configuration the node gets, and agent_started prints,
// carries the agent's seed: the seed of the 3-way exchange's pass ids.
func TestPassingCarriesTheAgentSeed(t *testing.T) {
	c, err := Load(write(t, "name: A\nlisten: 10.0.0.1:7400\nca: ca.crt\ncredentials: .\nseed: 77\npassing: {exchange: 3way}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.passing().Seed; got != 77 {
		t.Errorf("passing seed %d, want the agent's 77", got)
	}
	if d := r.Started("", 0).Detail; !strings.Contains(d, "Seed:77") {
		t.Errorf("agent_started detail %q does not show the pass ids' seed 77", d)
	}
}
