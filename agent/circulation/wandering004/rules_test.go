package wandering004

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/circulation/wandering/trace"
)

// TestRules replays testdata/*.txt, one trace per rule of seed 004 (§5,
// §5.1, Fig. 2, Table 2). `new` makes the policy (op, skip, n, min, max,
// k1, k2, seed); the other commands are package trace's; `gen?` prints
// Δgen.
func TestRules(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var d *trace.Driver
		var p *Policy
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				a := trace.ArgsOf(t, td)
				c := Config{Op: a.Dur("op"), Skip: a.Dur("skip"), N: a.Int("n", 0), Min: a.Dur("min"), Max: a.Dur("max"),
					K1: a.Float("k1"), K2: a.Float("k2"), Removal: Removal(a.Str("removal"))}
				if err := c.Validate(); err != nil {
					return "error: " + err.Error() + "\n"
				}
				p = New(c)
				d = trace.New(p, uint64(a.Int("seed", 1)))
				cc := p.Config()
				return fmt.Sprintf("Δop %v Δskip %v Δmin %v Δmax %v K1 %v K2 %v removal %v\n", cc.Op, cc.Skip, cc.Min, cc.Max, cc.K1, cc.K2, cc.Removal)
			case "gen?":
				return fmt.Sprintf("Δgen %v\n", p.Gen())
			}
			return d.Run(t, td)
		})
	})
}

// k_load = Δop·N/Δmin (004 §3) at the captions' values: Δop 4, Δmin 600
// give 1 at N = 150 and 2 at N = 300 (the overload of Tables 3–5); it is
// printed in the agent's start record.
func TestKLoad(t *testing.T) {
	c := Config{Op: 4 * time.Second, Skip: time.Second, Min: 600 * time.Second}.WithDefaults()
	for _, tc := range []struct {
		n    int
		want float64
	}{{150, 1}, {300, 2}, {75, 0.5}} {
		if got := c.KLoad(tc.n); got != tc.want {
			t.Errorf("N=%d: k_load %v, want %v", tc.n, got, tc.want)
		}
	}
	if got, want := c.Describe(300), "k_load=2 (Δop·N/Δmin, 004 §3; N=300)"; got != want {
		t.Errorf("Describe: %q, want %q", got, want)
	}
}
