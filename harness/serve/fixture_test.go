package serve

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/analysis"
	"tokenbed/analysis/index"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/runner"
	"tokenbed/harness/sim"
	"tokenbed/internal/resultsdb"

	// The protocol whose runs the fixtures hold, both halves.
	_ "tokenbed/plugins/tokenpassing"
)

// night is one simulated run of the fixture: experiments/three-agents.yaml
// with its own seed and A–B on abProfile; failLatency adds a latency
// figure no run meets (A>B mean 1 ms), so its latency check fails with a
// failure bundle.
type night struct {
	runID, campaign, job, revision string
	seed                           int
	abProfile                      string
	failLatency                    bool
	started                        time.Time
}

// experiment is three-agents.yaml as the night changes it.
func (n night) experiment(t testing.TB) string {
	b, err := os.ReadFile("../../experiments/three-agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	for old, repl := range map[string]string{
		"seed: 7\n": fmt.Sprintf("seed: %d\n", n.seed),
		`{between: [A, B], profile: "delay 5ms"}`: fmt.Sprintf("{between: [A, B], profile: %q}", n.abProfile),
	} {
		if !strings.Contains(y, old) {
			t.Fatalf("experiments/three-agents.yaml has no %q to change", old)
		}
		y = strings.Replace(y, old, repl, 1)
	}
	if n.failLatency {
		y += "checks:\n  latency:\n    - {link: \"A>B\", mean: 1ms, tolerance: 0.15}\n"
	}
	return y
}

// simRun runs n in the simulator under root and analyzes it, as
// `harness run --backend sim` does; it returns the run directory.
func simRun(t testing.TB, root string, n night) string {
	t.Helper()
	e, err := experiments.Parse(n.runID+".yaml", []byte(n.experiment(t)))
	if err != nil {
		t.Fatal(err)
	}
	e.Replicas, e.TimeScale, e.NetworkTimeScale = 1, 1, 1
	be, err := backend.New(sim.Name, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runner.Run(t.Context(), runner.Options{Experiment: e, ExperimentFile: n.runID + ".yaml", ResultsRoot: root, RunID: n.runID,
		Backend: be, Impair: runner.ImpairSim, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("run %s: %v", n.runID, err)
	}
	if _, err := analysis.Analyze(dir); err != nil {
		t.Fatalf("analyze %s: %v", dir, err)
	}
	return dir
}

// indexRun indexes the run as `harness index` does (analysis/index),
// then files it as the night's job: the campaign, job, revision and
// start are the night's (the runs were made in one test, from one
// tree).
func indexRun(t testing.TB, db *resultsdb.DB, root string, n night) {
	t.Helper()
	x, err := index.IndexRun(root, n.runID, db)
	if err != nil {
		t.Fatal(err)
	}
	if x.Run.Damaged != "" {
		t.Fatalf("%s indexed as damaged: %s", n.runID, x.Run.Damaged)
	}
	x.Run.Campaign, x.Run.Job, x.Run.Revision, x.Run.Dirty = n.campaign, n.job, n.revision, false
	x.Run.Started, x.Run.Ended = n.started, n.started.Add(time.Second)
	if err := db.PutRun(x); err != nil {
		t.Fatal(err)
	}
}

// fixture is a results root of real simulated nights, indexed.
type fixture struct {
	root   string
	db     *resultsdb.DB
	nights []night
	failed night // the night's run whose latency check failed
}

// trendJob is the job whose figure the planted slowdown moves.
const trendJob = "three-agents-sim"

// newFixture simulates seven nights of the job trendJob, each with its
// own seed and revision; from the fifth on, A–B's delay is 1 ms longer
// (the planted slowdown, each pass crossing the link four times). The
// last night also ran a job whose latency check fails.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{root: t.TempDir()}
	var err error
	if f.db, err = resultsdb.Open(filepath.Join(f.root, "results.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	first := time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)
	for i := range 7 {
		at := first.Add(time.Duration(i) * 24 * time.Hour)
		c := resultsdb.Campaign{ID: fmt.Sprintf("night-%d", i+1), File: "experiments/nightly.yaml", Started: at,
			Ended: at.Add(time.Hour), Status: resultsdb.CampaignPassed, Revision: fmt.Sprintf("rev%d%s", i+1, "abcdef0123456789"[i:i+6]), Host: "test"}
		delay := "delay 5ms 1ms"
		if i >= 4 {
			delay = "delay 6ms 1ms"
		}
		n := night{runID: fmt.Sprintf("tb%06x", 0xa00+i), campaign: c.ID, job: trendJob, revision: c.Revision,
			seed: 100 + i, abProfile: delay, started: at.Add(time.Minute)}
		jobs := []night{n}
		if i == 6 {
			f.failed = night{runID: "tb0fa11d", campaign: c.ID, job: "latency-check", revision: c.Revision,
				seed: 7, abProfile: "delay 5ms 1ms", failLatency: true, started: at.Add(2 * time.Minute)}
			jobs = append(jobs, f.failed)
			c.Status = resultsdb.CampaignFailed
		}
		if err := f.db.UpsertCampaign(c); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			simRun(t, f.root, j)
			indexRun(t, f.db, f.root, j)
			status := "passed"
			if j.failLatency {
				status = "failed"
			}
			if err := f.db.UpsertJob(resultsdb.Job{Campaign: c.ID, Name: j.job, Kind: "experiment", Status: status,
				Started: j.started, Ended: j.started.Add(time.Second), Seconds: 1}); err != nil {
				t.Fatal(err)
			}
		}
		f.nights = append(f.nights, n)
	}
	return f
}
