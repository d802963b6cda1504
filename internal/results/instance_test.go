package results

import "testing"

func TestInstanceRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		rep  int
		inst string
	}{{"A", 0, "A"}, {"A", 3, "A.r3"}, {"node.r", 12, "node.r.r12"}, {"x.r0", 0, "x.r0"}} {
		if got := Instance(c.name, c.rep); got != c.inst {
			t.Errorf("Instance(%q, %d) = %q, want %q", c.name, c.rep, got, c.inst)
		}
		if n, r := ParseInstance(c.inst); n != c.name || r != c.rep {
			t.Errorf("ParseInstance(%q) = %q, %d; want %q, %d", c.inst, n, r, c.name, c.rep)
		}
	}
	// Not a replica suffix: the whole name, replica 0.
	for _, s := range []string{"a.rx", "a.r", "a.r01", ".r3"} {
		if n, r := ParseInstance(s); n != s || r != 0 {
			t.Errorf("ParseInstance(%q) = %q, %d; want it unchanged, replica 0", s, n, r)
		}
	}
}
