package msg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// placementSeed is the seed of every random name below: a failure
// replays exactly.
const placementSeed = 23

// randomNames draws k distinct names of 1..16 printable bytes.
func randomNames(k int) []string {
	rnd := rand.New(rand.NewPCG(placementSeed, 0x706c))
	seen := map[string]bool{}
	var ns []string
	for len(ns) < k {
		b := make([]byte, 1+rnd.IntN(16))
		for i := range b {
			b[i] = byte(' ' + rnd.IntN(95))
		}
		if !seen[string(b)] {
			seen[string(b)] = true
			ns = append(ns, string(b))
		}
	}
	return ns
}

func allReady(n int) []State {
	s := make([]State, n)
	for i := range s {
		s[i] = Ready
	}
	return s
}

// within checks that count is within 5 standard deviations of a binomial
// mean (k trials of probability p): far beyond chance for a uniform
// placement, far inside what a skewed one gives.
func within(t *testing.T, what string, count, k int, p float64) {
	t.Helper()
	mean := float64(k) * p
	sd := math.Sqrt(float64(k) * p * (1 - p))
	if math.Abs(float64(count)-mean) > 5*sd {
		t.Errorf("%s: %d, want %.0f ± %.0f (5 sd)", what, count, mean, 5*sd)
	}
}

// The placement of a few names is fixed: servers and clients of
// different builds must agree on it (the unit traces rely on these).
func TestSequenceFixed(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		want []int
	}{
		{"f", 3, []int{1, 2, 0}},
		{"c", 3, []int{2, 0, 1}},
		{"h", 3, []int{2, 1, 0}},
	} {
		if got := Sequence(c.name, c.n); !slices.Equal(got, c.want) {
			t.Errorf("Sequence(%q, %d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

// Every name's sequence is a permutation of the servers, and its owner
// is the first server of it that is not DOWN (-1 when all are).
func TestOwnerIsFirstActive(t *testing.T) {
	rnd := rand.New(rand.NewPCG(placementSeed, 1))
	for _, name := range randomNames(2000) {
		n := 1 + rnd.IntN(9)
		seq := Sequence(name, n)
		if p := slices.Sorted(slices.Values(seq)); !isIota(p) {
			t.Fatalf("Sequence(%q, %d) = %v: not a permutation", name, n, seq)
		}
		states := make([]State, n)
		for i := range states {
			states[i] = State(rnd.IntN(3))
		}
		want := -1
		for _, i := range seq {
			if states[i] != Down {
				want = i
				break
			}
		}
		if got := Owner(name, states); got != want {
			t.Fatalf("Owner(%q, %v) = %d, want %d (sequence %v)", name, states, got, want, seq)
		}
	}
	if Owner("a", nil) != -1 || Owner("a", make([]State, 4)) != -1 {
		t.Error("no server, or every server DOWN: want owner -1")
	}
}

func isIota(p []int) bool {
	for i, v := range p {
		if v != i {
			return false
		}
	}
	return true
}

// "this algorithm equalizes distribution" (001 "Token distribution"):
// over many names every server serves its share, and with one server
// DOWN its names spread evenly over the survivors.
func TestPlacementEqualizes(t *testing.T) {
	const k = 20000
	names := randomNames(k)
	for _, n := range []int{3, 5, 7} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			all := allReady(n)
			count := make([]int, n)
			for _, name := range names {
				count[Owner(name, all)]++
			}
			for i, c := range count {
				within(t, fmt.Sprintf("names of server %d of %d", i, n), c, k, 1/float64(n))
			}
			// Server 0 DOWN: where do its names go?
			down := allReady(n)
			down[0] = Down
			moved := make([]int, n)
			total := 0
			for _, name := range names {
				if Owner(name, all) == 0 {
					moved[Owner(name, down)]++
					total++
				}
			}
			if moved[0] != 0 {
				t.Errorf("%d names stay with the DOWN server", moved[0])
			}
			for i := 1; i < n; i++ {
				within(t, fmt.Sprintf("server 0's names taken by server %d", i), moved[i], total, 1/float64(n-1))
			}
		})
	}
}

// "... and minimizes reassignment": a server going DOWN moves only its
// own names, and one coming back takes only names, from whichever server
// served them, that its sequence puts before every other active server;
// no name moves between two servers that did not change. From any mix of
// states, one change at a time, over many steps; and once every server
// is back, each name is where it was at the start.
func TestPlacementMinimizesReassignment(t *testing.T) {
	const k = 5000
	names := randomNames(k)
	rnd := rand.New(rand.NewPCG(placementSeed, 2))
	for _, n := range []int{3, 5} {
		states := allReady(n)
		start := make([]int, k)
		for i, name := range names {
			start[i] = Owner(name, states)
		}
		owner := slices.Clone(start)
		for step := 0; step < 40; step++ {
			x := rnd.IntN(n)
			goingDown := states[x] != Down
			if goingDown && countActive(states) == 1 {
				continue // keep one server up: no owner otherwise
			}
			if goingDown {
				states[x] = Down
			} else {
				states[x] = Booting // BOOTING is responsible (001 "Server states")
			}
			moved, had := 0, 0
			for i, name := range names {
				o := Owner(name, states)
				if owner[i] == x {
					had++
				}
				if o != owner[i] {
					moved++
					if goingDown && owner[i] != x {
						t.Fatalf("n=%d step %d: %q moved from %d to %d when %d went DOWN", n, step, name, owner[i], o, x)
					}
					if !goingDown && o != x {
						t.Fatalf("n=%d step %d: %q moved from %d to %d when %d came back", n, step, name, owner[i], o, x)
					}
				}
				owner[i] = o
			}
			if goingDown && moved != had {
				t.Fatalf("n=%d step %d: %d names moved, the DOWN server had %d", n, step, moved, had)
			}
		}
		for x := range states {
			states[x] = Ready
		}
		for i, name := range names {
			if o := Owner(name, states); o != start[i] {
				t.Fatalf("n=%d: every server back, %q is served by %d, was %d", n, name, o, start[i])
			}
		}
	}
}

func countActive(states []State) int {
	c := 0
	for _, s := range states {
		if s != Down {
			c++
		}
	}
	return c
}
