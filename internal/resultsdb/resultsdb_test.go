package resultsdb

import (
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func open(t *testing.T) (*DB, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "results.db")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, p
}

func TestOpenSetsVersionAndRefusesNewer(t *testing.T) {
	d, p := open(t)
	if v, err := d.Version(); err != nil || v != SchemaVersion {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion)
	}
	// Reopening an up-to-date database migrates nothing and keeps rows.
	if err := d.UpsertCampaign(Campaign{ID: "c1", Status: CampaignRunning}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := d2.CampaignByID("c1"); err != nil || c.Status != CampaignRunning {
		t.Fatalf("after reopen: %+v, %v", c, err)
	}
	if _, err := d2.SQL().Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if _, err := Open(p); !errors.Is(err, ErrNewer) {
		t.Fatalf("Open of a newer database: %v, want ErrNewer", err)
	}
}

func TestRunRoundTripAndReplace(t *testing.T) {
	d, _ := open(t)
	t0 := time.Date(2026, 11, 28, 1, 2, 3, 456789, time.UTC)
	x := Indexed{
		Run: Run{ID: "r1", Campaign: "c1", Job: "j", Experiment: "three-agents", Protocol: "tokenpassing",
			Backend: "sim", Revision: "abc123", Dirty: true, Seed: math.MaxUint64 - 1, Host: "h", Cores: 2,
			Kernel: "6.1", Started: t0, Ended: t0.Add(time.Minute), Status: RunPass,
			Overrides: `{"profiles.lan.delay_add":"1ms"}`, Dir: "r1"},
		Checks: []Check{{Name: "latency", Verdict: "pass", Value: "p99 11ms", Detail: "d"}},
		Figures: []Figure{
			{Name: "p99_ms", Value: Val(11.5), Unit: "ms", N: 400, Lo: Val(11), Hi: Val(12), Paper: Val(11.2)},
			{Name: "nan", Value: Val(math.NaN())},
		},
		Samples: []Sample{{Name: "latency_ms", Vals: []float64{1, 2.5, math.Inf(1)}}},
	}
	if err := d.PutRun(x); err != nil {
		t.Fatal(err)
	}
	r, err := d.RunByID("r1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, x.Run) {
		t.Fatalf("run read back\n got %+v\nwant %+v", r, x.Run)
	}
	figs, err := d.Figures("r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 2 || figs[0].Name != "nan" || figs[0].Value.Valid || !figs[1].Paper.Valid || figs[1].Paper.V != 11.2 {
		t.Fatalf("figures: %+v (NaN must read back NULL)", figs)
	}
	vs, err := d.Samples("r1", "latency_ms")
	if err != nil || !reflect.DeepEqual(vs, x.Samples[0].Vals) {
		t.Fatalf("samples %v, %v", vs, err)
	}
	// Putting the run again with fewer checks replaces, not merges.
	x.Checks = nil
	x.Figures = x.Figures[1:]
	if err := d.PutRun(x); err != nil {
		t.Fatal(err)
	}
	if cs, _ := d.Checks("r1"); len(cs) != 0 {
		t.Fatalf("checks after replace: %+v", cs)
	}
	if fs, _ := d.Figures("r1"); len(fs) != 1 {
		t.Fatalf("figures after replace: %+v", fs)
	}
	if err := d.DeleteRun("r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunByID("r1"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("deleted run: %v", err)
	}
	if _, err := d.Samples("r1", "latency_ms"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("deleted run's samples: %v", err)
	}
}

func TestFilterAndSeries(t *testing.T) {
	d, _ := open(t)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var xs []Indexed
	for i, rev := range []string{"aaa1", "aaa2", "bbb1"} {
		id := "r" + string(rune('0'+i))
		xs = append(xs, Indexed{
			Run:     Run{ID: id, Campaign: "c" + id, Job: "ftn", Experiment: "ftn-5x50", Backend: "sim", Revision: rev, Started: t0.Add(time.Duration(i) * 24 * time.Hour), Status: RunPass},
			Figures: []Figure{{Name: "failover_s", Value: Val(float64(i + 1)), Unit: "s"}},
		})
	}
	xs = append(xs, Indexed{Run: Run{ID: "other", Job: "swarm", Experiment: "three-agents", Backend: "netns", Started: t0, Status: RunFail},
		Figures: []Figure{{Name: "p99_ms", Value: Val(3)}}})
	if err := d.PutRuns(xs); err != nil {
		t.Fatal(err)
	}
	runs, err := d.Runs(RunFilter{Revision: "aaa"})
	if err != nil || len(runs) != 2 || runs[0].ID != "r1" {
		t.Fatalf("revision prefix aaa: %+v, %v (newest first)", runs, err)
	}
	if runs, _ := d.Runs(RunFilter{Status: RunFail}); len(runs) != 1 || runs[0].ID != "other" {
		t.Fatalf("status fail: %+v", runs)
	}
	ps, err := d.Series(RunFilter{Job: "ftn"}, "failover_s")
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, p := range ps {
		got = append(got, p.Value.V)
	}
	if !reflect.DeepEqual(got, []float64{1, 2, 3}) || ps[2].Revision != "bbb1" {
		t.Fatalf("series %v (%+v), want oldest first 1 2 3", got, ps)
	}
	names, err := d.FigureNames(RunFilter{})
	if err != nil || !reflect.DeepEqual(names, []string{"failover_s", "p99_ms"}) {
		t.Fatalf("figure names %v, %v", names, err)
	}
}

func TestDecodeSamplesRejectsBadLength(t *testing.T) {
	if _, err := DecodeSamples(make([]byte, 7)); err == nil {
		t.Fatal("7 bytes decoded")
	}
}
