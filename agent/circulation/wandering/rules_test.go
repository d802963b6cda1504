package wandering

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"tokenbed/agent/circulation/wandering/trace"
)

// TestRules replays testdata/*.txt: one file per rule of Fig. 1 (seed
// 003), each a deterministic trace. `new` makes the policy (op, skip, nmax
// and optional min, generate, history, lastaccess, seed); the other commands are
// package trace's. Regenerate with -rewrite after checking the diff
// against the figure.
func TestRules(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var d *trace.Driver
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if td.Cmd == "new" {
				var c Config
				seed := uint64(1)
				for _, a := range td.CmdArgs {
					v := a.Vals[0]
					dur := func() time.Duration {
						x, err := time.ParseDuration(v)
						if err != nil {
							t.Fatalf("%s: %s: %v", td.Pos, a.Key, err)
						}
						return x
					}
					switch a.Key {
					case "op":
						c.Op = dur()
					case "skip":
						c.Skip = dur()
					case "min":
						c.Min = dur()
					case "generate":
						c.Generate = dur()
					case "nmax":
						fmt.Sscan(v, &c.NMax)
					case "history":
						fmt.Sscan(v, &c.History)
					case "lastaccess":
						c.LastAccess = LastAccess(v)
					case "seed":
						fmt.Sscan(v, &seed)
					default:
						t.Fatalf("%s: unknown argument %s", td.Pos, a.Key)
					}
				}
				if err := c.Validate(); err != nil {
					return "error: " + err.Error() + "\n"
				}
				p := New(c)
				d = trace.New(p, seed)
				cc := p.Config()
				return fmt.Sprintf("Δop %v Δskip %v N_max %d Δmin %v γgenerate %v history %d lastaccess %s\n", cc.Op, cc.Skip, cc.NMax, cc.Min, cc.Generate, cc.History, cc.LastAccess)
			}
			return d.Run(t, td)
		})
	})
}

// TestRegenerationTimeout checks line 8's timeout over many draws:
// never before Δmin, and Δmin plus an exponential time of mean γgenerate
// (mean within 3%, standard deviation equal to the mean within 5%: an
// exponential's). Seeded, so it cannot flake.
func TestRegenerationTimeout(t *testing.T) {
	c := Config{Op: 4 * time.Second, Skip: 100 * time.Millisecond, NMax: 300}.WithDefaults()
	p := New(c)
	p.Start(&trace.Host{Name: "a", Members: []string{"b"}, R: rand.New(rand.NewPCG(3, 3))}, trace.T0)
	const n = 20000
	var sum, sum2 float64
	for i := range n {
		now := trace.T0.Add(time.Duration(i) * time.Hour)
		p.Tick(now) // no token held and not due: re-arms nothing
		p.resetTimeout(now)
		d, _ := p.Deadline()
		x := d.Sub(now) - c.Min
		if x < 0 {
			t.Fatalf("timeout %v before Δmin %v", d.Sub(now), c.Min)
		}
		sum += x.Seconds()
		sum2 += x.Seconds() * x.Seconds()
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if g := c.Generate.Seconds(); mean < 0.97*g || mean > 1.03*g || sd < 0.95*mean || sd > 1.05*mean {
		t.Errorf("random part: mean %.0f s, sd %.0f s; want exponential of mean γ %.0f s", mean, sd, g)
	}
}
