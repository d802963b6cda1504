package wandering004

import (
	"fmt"
	"testing"

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
