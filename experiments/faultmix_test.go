package experiments_test

import (
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
)

const swarmBase = `name: x
seed: 3
duration: 600s
agents:
  - {name: A, generate: true}
  - {name: B}
`

// The swarm section loads as written, and each mistake in it is
// reported at its field and line, all at once.
func TestFaultMix(t *testing.T) {
	e, err := experiments.Parse("ok.yaml", []byte(swarmBase+`swarm:
  outages: {count: 3, min: 200ms, max: 5s}
  crashes: {count: 1, min: 1s, max: 30s}
  restarts: 0.8
  profile_changes: {count: 2, min: 1s, max: 60s}
  duplicate: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	want := experiments.FaultMix{Outages: experiments.FaultKind{Count: 3, Min: 200 * time.Millisecond, Max: 5 * time.Second},
		Crashes: experiments.FaultKind{Count: 1, Min: time.Second, Max: 30 * time.Second}, Restarts: 0.8,
		ProfileChanges: experiments.FaultKind{Count: 2, Min: time.Second, Max: time.Minute}, Duplicate: 5}
	if e.Swarm == nil || *e.Swarm != want {
		t.Errorf("swarm = %+v, want %+v", e.Swarm, want)
	}
	if e, err := experiments.Parse("none.yaml", []byte(swarmBase)); err != nil || e.Swarm != nil {
		t.Errorf("without a swarm section: %v, %+v", err, e)
	}
	_, err = experiments.Parse("bad.yaml", []byte(swarmBase+`swarm:
  outages: {count: 3, min: 5s, max: 1s}
  crashes: {count: 1, min: 1s, max: 700s}
  restarts: 2
  profile_changes: {count: 1, min: 1s, max: 2s}
  reorder: 120
`))
	if err == nil {
		t.Fatal("a bad swarm section loads")
	}
	for _, w := range []string{
		"bad.yaml:8:", "swarm.outages", "min ≤ max",
		"swarm.crashes.max", "not shorter than the run",
		"swarm.restarts", "0..1",
		"swarm.reorder", "0..100",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}
