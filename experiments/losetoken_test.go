package experiments_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
)

const loseSrc = `
name: x
seed: %SEED%
duration: 10000000s
agents:
  - {name: A, generate: true}
  - {name: B}
schedule:
  - {action: lose-token, at: 0s, every: 10000s%DIST%}
`

func loseSteps(t *testing.T, seed, dist string) []time.Duration {
	t.Helper()
	src := strings.NewReplacer("%SEED%", seed, "%DIST%", dist).Replace(loseSrc)
	e, err := experiments.Parse("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var at []time.Duration
	for _, s := range e.Schedule {
		if s.Action != experiments.ActLoseToken {
			t.Fatalf("step %+v", s)
		}
		at = append(at, s.At)
	}
	return at
}

// lose-token's default spacing is exponential (003 Table 1: γ_loss, a mean
// time between loss events): over 10^7 s at a mean of 10^4 s the count is
// Poisson of mean 1000 (within 4 standard deviations, for each of five
// seeds), and the gaps have the exponential's standard deviation, equal
// to their mean. Periodic: exactly one every 10^4 s after at.
func TestLoseTokenSpacing(t *testing.T) {
	const lambda = 1000.0
	for _, seed := range []string{"1", "2", "3", "4", "5"} {
		at := loseSteps(t, seed, "")
		if n := float64(len(at)); math.Abs(n-lambda) > 4*math.Sqrt(lambda) {
			t.Errorf("seed %s: %v loss events, want Poisson(%v) within 4σ", seed, n, lambda)
		}
		var sum, sum2 float64
		prev := time.Duration(0)
		for _, a := range at {
			g := (a - prev).Seconds()
			sum, sum2, prev = sum+g, sum2+g*g, a
		}
		mean := sum / float64(len(at))
		sd := math.Sqrt(sum2/float64(len(at)) - mean*mean)
		if sd < 0.85*mean || sd > 1.15*mean {
			t.Errorf("seed %s: gaps mean %.0f s, sd %.0f s: not exponential", seed, mean, sd)
		}
	}
	if a, b := loseSteps(t, "7", ""), loseSteps(t, "7", ""); len(a) != len(b) || a[0] != b[0] || a[len(a)-1] != b[len(b)-1] {
		t.Error("the same seed gave other loss times")
	}
	per := loseSteps(t, "1", ", distribution: periodic")
	if len(per) != 999 || per[0] != 10000*time.Second || per[998] != 9990000*time.Second {
		t.Errorf("periodic: %d events from %v to %v, want 999 from 10000s to 9990000s", len(per), per[0], per[len(per)-1])
	}
}

func TestLoseTokenErrors(t *testing.T) {
	base := strings.NewReplacer("%SEED%", "1", "%DIST%", "").Replace(loseSrc)
	for _, tc := range []struct{ from, to, want string }{
		{"every: 10000s", "every: 0s", "x.yaml:9:41: schedule[0].every: lose-token needs a positive mean time between loss events"},
		{"every: 10000s", "every: 10000s, distribution: normal", `schedule[0].distribution: "normal": want exponential (the default) or periodic`},
		{"action: lose-token, at: 0s", "action: crash, agent: A, at: 0s", "schedule[0].every: every and distribution are for lose-token steps, not crash"},
		{"every: 10000s", "every: 10000s, agent: A", "schedule[0].action: lose-token takes at, every, distribution and until only"},
	} {
		_, err := experiments.Parse("x.yaml", []byte(strings.Replace(base, tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.to, err, tc.want)
		}
	}
}
