package baseline

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/circulation/wandering/trace"
)

// TestRules replays testdata/*.txt: the baseline's operations in time.
func TestRules(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var d *trace.Driver
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "new" {
				a := trace.ArgsOf(t, td)
				c := Config{Op: a.Dur("op"), Rule: a.Str("rule"), Period: a.Dur("period")}
				if err := c.Validate(); err != nil {
					return "error: " + err.Error() + "\n"
				}
				p := New(c)
				d = trace.New(p, uint64(a.Int("seed", 1)))
				return fmt.Sprintf("Δop %v rule %s period %v\n", p.Config().Op, p.Config().Rule, p.Config().Period)
			}
			return d.Run(t, td)
		})
	})
}

// TestIntervals checks both period rules over many draws: the range
// (003: [600, 1800] s; 004: [600, 900] s) and the mean of a uniform
// (within 1%). Seeded.
func TestIntervals(t *testing.T) {
	for _, c := range []struct {
		rule         string
		lo, hi, mean float64
	}{{Rule003, 600, 1800, 1200}, {Rule004, 600, 900, 750}} {
		p := New(Config{Op: 4 * time.Second, Rule: c.rule})
		p.Start(&trace.Host{Name: "a", R: rand.New(rand.NewPCG(5, 5))}, trace.T0)
		const n = 20000
		var sum float64
		for range n {
			x := p.Interval().Seconds()
			if x < c.lo || x > c.hi {
				t.Fatalf("rule %s: interval %.1f s outside [%v, %v]", c.rule, x, c.lo, c.hi)
			}
			sum += x
		}
		if m := sum / n; m < 0.99*c.mean || m > 1.01*c.mean {
			t.Errorf("rule %s: mean interval %.1f s, want %v", c.rule, m, c.mean)
		}
	}
}
