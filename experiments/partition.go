package experiments

import (
	"fmt"
	"slices"
	"strings"

	"tokenbed/internal/strictyaml"
)

// Rest is the group member that stands for every agent no group names
// (after the target words are resolved): `groups: [[s0, c0], ["*"]]`
// cuts s0 and c0 off from everyone else. It cannot be an agent name.
const Rest = "*"

// checkPartition validates a partition step's groups: at least two, none
// empty, each member an agent, a target word of the protocol or Rest (in
// one group at most), and no member in two groups. Words are resolved
// when the step runs; without them the groups must cut some link.
func checkPartition(path string, groups [][]string, agents []string, targets []string, yf *strictyaml.File) {
	if len(groups) < 2 {
		yf.Errorf(path+".groups", "a partition needs at least two groups (lists of agents), got %d", len(groups))
		return
	}
	seen := map[string]int{}
	words := false
	for gi, g := range groups {
		if len(g) == 0 {
			yf.Errorf(fmt.Sprintf("%s.groups[%d]", path, gi), "empty group")
		}
		for mi, m := range g {
			mpath := fmt.Sprintf("%s.groups[%d][%d]", path, gi, mi)
			switch {
			case m == Rest:
			case slices.Contains(targets, m):
				words = true
			case slices.Contains(agents, m):
			default:
				known := append([]string{Rest}, targets...)
				yf.Errorf(mpath, "unknown agent %q (a member is an agent, %s)", m, strings.Join(known, " or "))
				continue
			}
			if prev, dup := seen[m]; dup {
				yf.Errorf(mpath, "%q is in group %d already: groups are disjoint", m, prev)
				continue
			}
			seen[m] = gi
		}
	}
	if words {
		return
	}
	sides, _ := Step{Groups: groups}.Sides(agents, nil)
	if len(Cuts(sides)) == 0 {
		yf.Errorf(path+".groups", "the groups cut no link (%q stands for agents no group names, and there are none)", Rest)
	}
}

// Sides resolves a partition step's groups to agent names: a target word
// through resolve (the protocol's observer, when the step runs: "leader"
// is whoever leads then), then Rest to every agent of agents that no
// group names. A word that resolves to nothing, or to an agent another
// group names, is left out; notes say so. Empty sides are dropped.
func (s Step) Sides(agents []string, resolve func(word string) (string, bool)) (sides [][]string, notes []string) {
	named := map[string]int{}
	for gi, g := range s.Groups {
		for _, m := range g {
			if slices.Contains(agents, m) {
				named[m] = gi
			}
		}
	}
	resolved := make([][]string, len(s.Groups))
	rest := -1
	for gi, g := range s.Groups {
		for _, m := range g {
			switch {
			case m == Rest:
				rest = gi
			case slices.Contains(agents, m):
				resolved[gi] = append(resolved[gi], m)
			default: // a target word
				a, ok := "", false
				if resolve != nil {
					a, ok = resolve(m)
				}
				if !ok {
					notes = append(notes, fmt.Sprintf("%s resolves to no agent: left out of group %d", m, gi))
					continue
				}
				if other, dup := named[a]; dup && other != gi {
					notes = append(notes, fmt.Sprintf("%s is %s, which group %d names: it stays there", m, a, other))
					continue
				}
				named[a] = gi
				if !slices.Contains(resolved[gi], a) {
					resolved[gi] = append(resolved[gi], a)
				}
			}
		}
	}
	if rest >= 0 {
		for _, a := range agents {
			if _, ok := named[a]; !ok {
				resolved[rest] = append(resolved[rest], a)
			}
		}
	}
	for _, g := range resolved {
		if len(g) > 0 {
			sides = append(sides, g)
		}
	}
	return sides, notes
}

// Cuts lists the directions a partition into sides cuts: both directions
// between every two agents on different sides, and none within a side.
func Cuts(sides [][]string) [][2]string {
	var ds [][2]string
	for i, a := range sides {
		for j, b := range sides {
			if i == j {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					ds = append(ds, [2]string{x, y})
				}
			}
		}
	}
	return ds
}

// SidesText is sides as "a b | c d", for logs and reports.
func SidesText(sides [][]string) string {
	parts := make([]string, len(sides))
	for i, g := range sides {
		parts[i] = strings.Join(g, " ")
	}
	return strings.Join(parts, " | ")
}
