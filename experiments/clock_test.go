package experiments_test

import (
	"strings"
	"testing"
	"time"

	"tokenbed/agent/clock"
	"tokenbed/experiments"
)

// An agent's clock is defaults.clock overridden field by field by its
// own; a drift out of range is an error at the line of the field that
// set it.
func TestClockOverDefaults(t *testing.T) {
	src := `
name: x
duration: 100s
defaults:
  clock: {offset: 1.5s, drift: 1e-4}
agents:
  - {name: A, generate: true, clock: {offset: -2s}}
  - {name: B}
  - {name: C, clock: {drift: -5e-5}}
`
	e, err := experiments.Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]clock.Skew{"A": {Offset: -2 * time.Second, Drift: 1e-4}, "B": {Offset: 1500 * time.Millisecond, Drift: 1e-4},
		"C": {Offset: 1500 * time.Millisecond, Drift: -5e-5}}
	for _, a := range e.Agents {
		if a.Clock != want[a.Name] {
			t.Errorf("%s: clock %+v, want %+v", a.Name, a.Clock, want[a.Name])
		}
	}
	for _, tc := range []struct{ src, want string }{
		{strings.Replace(src, "drift: -5e-5", "drift: 0.2", 1), "x.yaml:9:30: agents[2].clock.drift: 0.2: want |drift| < 0.1"},
		{strings.Replace(src, "drift: 1e-4", "drift: -0.1", 1), "x.yaml:5:32: defaults.clock.drift: -0.1"},
	} {
		_, err := experiments.Parse("x.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}
