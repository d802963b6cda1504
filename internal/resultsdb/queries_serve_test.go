package resultsdb

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRunFacetsAndPreviousRun: the facets are the distinct non-empty
// values, sorted; the run before a run is the previous of its job in any
// campaign, or outside campaigns the previous of its experiment and
// backend outside campaigns, ties on the start broken by ID.
func TestRunFacetsAndPreviousRun(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := time.Date(2026, 11, 20, 2, 0, 0, 0, time.UTC)
	day := func(n int) time.Time { return at.Add(time.Duration(n) * 24 * time.Hour) }
	runs := []Run{
		{ID: "tb000001", Campaign: "n1", Job: "end-sim", Experiment: "endurance", Backend: "sim", Status: RunPass, Started: day(0)},
		{ID: "tb000002", Campaign: "n2", Job: "end-sim", Experiment: "endurance", Backend: "sim", Status: RunFail, Started: day(1)},
		{ID: "tb000003", Campaign: "n2", Job: "end-netns", Experiment: "endurance", Backend: "netns", Status: RunPass, Started: day(1)},
		{ID: "tb000004", Experiment: "endurance", Backend: "sim", Status: RunPass, Started: day(2)},
		{ID: "tb000005", Experiment: "endurance", Backend: "sim", Status: RunPass, Started: day(2)},
		{ID: "tb000006", Experiment: "three-agents", Backend: "", Status: RunError, Started: day(3)},
	}
	for _, r := range runs {
		if err := d.PutRun(Indexed{Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := d.RunFacets()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Experiments, []string{"endurance", "three-agents"}) || !slices.Equal(f.Backends, []string{"netns", "sim"}) ||
		!slices.Equal(f.Statuses, []string{"error", "fail", "pass"}) {
		t.Errorf("facets %+v", f)
	}
	for _, c := range []struct{ run, want string }{
		{"tb000001", ""},
		{"tb000002", "tb000001"}, // its job's night before
		{"tb000003", ""},         // its job has no earlier run
		{"tb000004", ""},         // outside campaigns: the campaigns' runs do not count
		{"tb000005", "tb000004"}, // the same start: the smaller ID is before
		{"tb000006", ""},
	} {
		r, err := d.RunByID(c.run)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.PreviousRun(r); err != nil || got != c.want {
			t.Errorf("PreviousRun(%s) = %q, %v; want %q", c.run, got, err, c.want)
		}
	}
}
