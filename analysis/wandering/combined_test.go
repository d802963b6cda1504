package wandering

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadReal reads a literal real run (testdata/realrun: two agents,
// time scale 200, the resource server's log): the intervals between an
// agent's operations are in the agents' policy time (wall × 200: 6 s and
// 2 s of wall time are 1200 and 400 paper s), and a restart is counted.
func TestLoadReal(t *testing.T) {
	r, err := LoadReal("testdata/realrun")
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 2 || r.Ops != 4 || r.Crashes != 1 {
		t.Errorf("N %d, %d operations, %d restarts; want 2, 4, 1", r.N, r.Ops, r.Crashes)
	}
	iv := slices.Clone(r.Intervals)
	slices.Sort(iv)
	if len(iv) != 2 || math.Abs(iv[0]-400) > 1e-6 || math.Abs(iv[1]-1200) > 1e-6 {
		t.Errorf("intervals %v, want [400 1200] paper s", iv)
	}
	// Operations at 1, 2, 4 and 7 s of wall time, 20 ms each: the longest
	// quiet stretch is [4.02, 7) s, in the agents' time ×200.
	if math.Abs(r.Quiet-596) > 1e-6 || math.Abs(r.QuietAt-604) > 1e-6 || math.Abs(r.SpanS-1204) > 1e-6 {
		t.Errorf("quiet %v s at %v, span %v; want 596 at 604, 1204", r.Quiet, r.QuietAt, r.SpanS)
	}
	if r.Resource.Conns != 4 || r.Resource.Matched != 4 {
		t.Errorf("server: %d connections, %d matched; want 4, 4", r.Resource.Conns, r.Resource.Matched)
	}
}

// TestCombined writes the paper | sim | real report for the literal run
// beside a literal twin (A busy [0, 4) s, B [2, 6) s of 10 s): the twin's
// shares, the real intervals below 1200 s (one of two: 1200 is not
// below) and the run table.
func TestCombined(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/sim")); err != nil {
		t.Fatal(err)
	}
	path, err := Combined(dir, []string{"testdata/realrun"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| sim, r-wandering-n2 (one loss at 5 s) | 40.0% | 40.0% | 20.0% | 0.00% | 20.0% |",
		"| 2 | real (policy time) | 2 | 50.0% | ",
		"| testdata/realrun | wandering-real-2 | 2 | 200 | 2000 | ok | 4 | 1 | r-wandering-n2 (seed 2) | 2 |",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("combined.md lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "combined_interarrival_cdf.png")); err != nil {
		t.Error(err)
	}
}
