package experiments_test

import (
	"cmp"
	"slices"
	"testing"

	"tokenbed/experiments"
)

// A partition step keeps its groups; "*" is every agent no group names,
// and the cut is both directions between sides, none within one.
func TestPartitionParsesAndCutsBetweenSides(t *testing.T) {
	e, err := experiments.Parse("p.yaml", []byte(`name: p
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
  - {name: D}
  - {name: E}
schedule:
  - {action: partition, groups: [[A, B], [C], ["*"]], at: 30s, for: 10s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Schedule) != 1 || e.Schedule[0].Action != experiments.ActPartition || len(e.Schedule[0].Groups) != 3 {
		t.Fatalf("schedule %+v", e.Schedule)
	}
	sides, notes := e.Schedule[0].Sides([]string{"A", "B", "C", "D", "E"}, nil)
	if got := experiments.SidesText(sides); got != "A B | C | D E" || len(notes) > 0 {
		t.Fatalf("sides %q, notes %q; want A B | C | D E", got, notes)
	}
	cuts := experiments.Cuts(sides)
	side := map[string]int{"A": 0, "B": 0, "C": 1, "D": 2, "E": 2}
	var want [][2]string
	for _, x := range []string{"A", "B", "C", "D", "E"} {
		for _, y := range []string{"A", "B", "C", "D", "E"} {
			if side[x] != side[y] {
				want = append(want, [2]string{x, y})
			}
		}
	}
	less := func(a, b [2]string) int { return cmp.Compare(a[0]+">"+a[1], b[0]+">"+b[1]) }
	slices.SortFunc(cuts, less)
	slices.SortFunc(want, less)
	if !slices.Equal(cuts, want) {
		t.Errorf("cuts %v\nwant %v", cuts, want)
	}
}

// Bad partitions are errors at the field, with the line.
func TestPartitionErrors(t *testing.T) {
	expectErrors(t, `name: x
duration: 100s
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: partition, groups: [[A, B, C]], at: 1s, for: 1s}
  - {action: partition, groups: [[A], [Q]], at: 2s, for: 1s}
  - {action: partition, groups: [[A, B], [B, C]], at: 3s, for: 1s}
  - {action: partition, groups: [["*"], [A], ["*"]], at: 4s, for: 1s}
  - {action: partition, groups: [[A], [B]], link: A-B, at: 5s, for: 1s}
  - {action: partition, groups: [[A], [B]], at: 6s}
  - {action: outage, link: A-B, groups: [[A], [B]], at: 7s, for: 1s}
  - {action: partition, groups: [[A, B, C], ["*"]], at: 8s, for: 1s}
  - {action: partition, groups: [[A], []], at: 9s, for: 1s}
`, map[string]int{
		`schedule[0].groups: a partition needs at least two groups`:      8,
		`schedule[1].groups[1][0]: unknown agent "Q"`:                    9,
		`schedule[2].groups[1][0]: "B" is in group 0 already`:            10,
		`schedule[3].groups[2][0]: "*" is in group 0 already`:            11,
		`schedule[4].link: a partition names groups of agents`:           12,
		`schedule[5].for: a partition needs a positive length`:           13,
		`schedule[6].groups: groups are for partition steps, not outage`: 14,
		`schedule[7].groups: the groups cut no link`:                     15,
		`schedule[8].groups[1]: empty group`:                             16,
	})
}

// A target word joins its group when the step runs; one that resolves to
// nothing, or to an agent another group names, is left out and noted.
func TestPartitionResolvesTargetWords(t *testing.T) {
	e, err := experiments.Parse("p.yaml", []byte(`name: p
protocol: ftn
duration: 100s
agents:
  - {name: s0, role: server}
  - {name: s1, role: server}
  - {name: s2, role: server}
  - {name: c0}
  - {name: c1}
schedule:
  - {action: partition, groups: [[leader, c0], ["*"]], at: 30s, for: 10s}
  - {action: partition, groups: [[leader, c0], [s1, s2]], at: 50s, for: 10s}
`))
	if err != nil {
		t.Fatal(err)
	}
	agents := []string{"s0", "s1", "s2", "c0", "c1"}
	leader := func(name string) func(string) (string, bool) {
		return func(w string) (string, bool) { return name, name != "" && w == "leader" }
	}
	for _, c := range []struct {
		step   int
		leader string
		sides  string
		notes  int
	}{
		{0, "s1", "s1 c0 | s0 s2 c1", 0},
		{0, "", "c0 | s0 s1 s2 c1", 1},
		{1, "s0", "s0 c0 | s1 s2", 0},
		{1, "s2", "c0 | s1 s2", 1}, // s2 stays with the group that names it
	} {
		sides, notes := e.Schedule[c.step].Sides(agents, leader(c.leader))
		if got := experiments.SidesText(sides); got != c.sides || len(notes) != c.notes {
			t.Errorf("step %d, leader %q: sides %q, notes %q; want %q and %d notes", c.step, c.leader, got, notes, c.sides, c.notes)
		}
	}
}
