package trend

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/internal/resultsdb"
	"tokenbed/internal/stats"
)

// openDB opens an empty results database for t, and the time its
// literal nights start from.
func openDB(t *testing.T) (*resultsdb.DB, time.Time) {
	t.Helper()
	db, err := resultsdb.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
}

// Read: a night is a campaign; a job's runs of one night are pooled; a
// night whose only run errored is missing; a figure that is not a count
// gives no series; --since keeps the latest nights.
func TestRead(t *testing.T) {
	db, t0 := openDB(t)
	put := func(camp, id, status string, failures float64, lat []float64) {
		t.Helper()
		x := resultsdb.Indexed{
			Run: resultsdb.Run{ID: id, Campaign: camp, Job: "j", Revision: "rev-" + camp, Status: status, Started: t0},
			Figures: []resultsdb.Figure{
				{Name: "network_failures.tolerated", Value: resultsdb.Val(failures)},
				{Name: "wall_seconds", Value: resultsdb.Val(12.5), Unit: "s"},
			},
			Samples: []resultsdb.Sample{{Name: "latency_s.A>B", Vals: lat}},
		}
		if err := db.PutRun(x); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []string{"c1", "c2", "c3"} {
		if err := db.UpsertCampaign(resultsdb.Campaign{ID: c, Started: t0.Add(time.Duration(i) * time.Hour), Status: resultsdb.CampaignPassed}); err != nil {
			t.Fatal(err)
		}
	}
	put("c1", "r1a", resultsdb.RunPass, 2, []float64{0.01, 0.02})
	put("c1", "r1b", resultsdb.RunFail, 3, []float64{0.03})
	put("c2", "r2", resultsdb.RunError, 9, []float64{9})
	put("c3", "r3", resultsdb.RunPass, 4, []float64{0.04})

	ss, err := Read(db, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Series{}
	for _, s := range ss {
		got[s.Figure] = s
	}
	if len(ss) != 4 { // the count, the distribution, p50, p99
		t.Fatalf("%d series: %v", len(ss), got)
	}
	c := got["network_failures.tolerated"]
	if c.Kind != Count || len(c.Nights) != 3 || c.Nights[0].Events != 5 || c.Nights[0].Exposure != 2 || !c.Nights[1].Missing || c.Nights[2].Events != 4 {
		t.Errorf("count series %+v", c)
	}
	if c.Nights[2].Night != "c3" || c.Nights[2].Revision != "rev-c3" {
		t.Errorf("night 3 is %q at %q", c.Nights[2].Night, c.Nights[2].Revision)
	}
	d := got["latency_s.A>B"]
	if d.Kind != Distribution || d.Unit != "s" || d.Better != "lower" || fmt.Sprint(stats.Sorted(d.Nights[0].Samples)) != "[0.01 0.02 0.03]" {
		t.Errorf("distribution series %+v", d)
	}
	if q := got["latency_s.A>B p99"]; q.Kind != Quantile || q.Q != 0.99 {
		t.Errorf("p99 series %+v", q)
	}
	if _, ok := got["wall_seconds"]; ok {
		t.Error("wall_seconds, not a count, gave a series")
	}

	ss, err = Read(db, Selection{Figure: "seconds", Scalars: []string{"wall_"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Kind != Distribution || ss[0].Unit != "s" || fmt.Sprint(ss[0].Nights[0].Samples) != "[12.5 12.5]" || !ss[0].Nights[1].Missing {
		t.Errorf("--scalar wall_: %+v", ss)
	}

	ss, err = Read(db, Selection{Figure: "tolerated", Since: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || len(ss[0].Nights) != 2 || ss[0].Nights[0].Night != "c2" || !ss[0].Nights[0].Missing {
		t.Errorf("--figure tolerated --since 2: %+v", ss)
	}
}

// A job whose runs are on two backends (sim-vs-real: real processes and
// the simulator) gives a series per backend, never one pooling both; a
// job on one backend keeps one series with no backend named.
func TestReadSplitsBackends(t *testing.T) {
	db, t0 := openDB(t)
	if err := db.UpsertCampaign(resultsdb.Campaign{ID: "c1", Started: t0, Status: resultsdb.CampaignPassed}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		id, job, backend string
		lat              []float64
	}{
		{"real", "sim-vs-real", "netns", []float64{0.0097, 0.0118}},
		{"sim", "sim-vs-real", "sim", []float64{0.0082}},
		{"e1", "endurance", "netns", []float64{0.009}},
		{"e2", "endurance", "netns", []float64{0.010}},
	} {
		x := resultsdb.Indexed{
			Run:     resultsdb.Run{ID: r.id, Campaign: "c1", Job: r.job, Backend: r.backend, Revision: "r1", Status: resultsdb.RunPass, Started: t0},
			Samples: []resultsdb.Sample{{Name: "latency_s.A>B", Vals: r.lat}},
		}
		if err := db.PutRun(x); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := Read(db, Selection{Figure: "latency_s.A>B p99"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range ss {
		got[s.Job+"["+s.Backend+"]"] = fmt.Sprint(stats.Sorted(s.Nights[0].Samples))
	}
	want := map[string]string{
		"sim-vs-real[netns]": "[0.0097 0.0118]",
		"sim-vs-real[sim]":   "[0.0082]",
		"endurance[]":        "[0.009 0.01]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	// One night: nothing to judge, but each finding names its backend.
	txt := Text(Analyze(ss, Options{}))
	for _, line := range []string{"sim-vs-real [sim] / latency_s.A>B p99", "sim-vs-real [netns] / latency_s.A>B p99", "endurance / latency_s.A>B p99"} {
		if !strings.Contains(txt, line) {
			t.Errorf("text lacks %q:\n%s", line, txt)
		}
	}
}
