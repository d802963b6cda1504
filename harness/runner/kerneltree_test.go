package runner

import "testing"

// A direction that duplicates only after a profile step must be placed on
// a device of its own from the start: the kernel would refuse the step on
// a shared tree in the middle of the run.
func TestLaterDuplicatesFindsProfileSteps(t *testing.T) {
	e, _ := load(t, dupLink+`schedule:
  - {action: profile, link: "C>B", profile: "delay 2ms duplicate 1%", at: 10s}
  - {action: profile, link: "A-C", profile: "delay 2ms duplicate 1%", at: 20s}
  - {action: profile, link: "B>C", profile: "delay 9ms", at: 30s}
`)
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"C", "B", true}, {"B", "C", false}, // one direction only
		{"A", "C", true}, {"C", "A", true}, // both
		{"A", "B", false}, // duplicates from the start, not by a step
		{"B", "A", false},
	} {
		if got := laterDuplicates(e, c.from, c.to); got != c.want {
			t.Errorf("laterDuplicates(%s>%s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
