package netem

import "testing"

// FuzzParse: Parse never panics, and for any accepted input String∘Parse is
// a fixed point and Parse(String(p)) equals p.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"delay 40ms 5ms 25% distribution normal loss 1%",
		"loss state 1% 2% 3% 4% 5% ecn",
		"loss gemodel 1 2 3 4",
		"delay 1s reorder 5 50 gap 3 duplicate 1 2 corrupt 3 4",
		"rate 1.5Mbit -14 48 5 limit 1k",
		"slot distribution pareto 1ms 2ms packets 3 bytes 4kb",
		"slot 1 2", "d 1 2 3", "loss 1e2", "delay 0x10",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		c := p.String()
		q, err := Parse(c)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String %q does not parse: %v", s, c, err)
		}
		if !q.Equal(p) {
			t.Fatalf("Parse(%q) = %+v, Parse(String) = %+v", s, p, q)
		}
		if c2 := q.String(); c2 != c {
			t.Fatalf("String not a fixed point: %q then %q", c, c2)
		}
	})
}
