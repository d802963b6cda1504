package shard_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/harness/shard"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
	_ "tokenbed/plugins/tokenpassing"
)

const base = "tb5a0001"

// simExperiment is testdata/four-replicas.yaml as harness run --backend
// sim --replicas 4 runs it: paper speed, four replicas.
func simExperiment(t *testing.T) *experiments.Experiment {
	t.Helper()
	e, err := experiments.Load(filepath.Join("testdata", "four-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.TimeScale, e.NetworkTimeScale = 1, 1
	return e
}

// simRun runs e (or its shard info's part of it) in the simulator under
// root, as harness run --backend sim does, and analyses it.
func simRun(t *testing.T, e *experiments.Experiment, root, runID string, info *results.ShardInfo) string {
	t.Helper()
	be := &sim.Backend{World: sim.New(sim.Config{})}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: "four-replicas.yaml", ResultsRoot: root, RunID: runID,
		Backend: be, Impair: runner.ImpairSim, ImpairReason: "simulated", Shard: info, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
	if _, err := analysis.Analyze(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// simShards runs shards ks of n of e and returns their directories.
func simShards(t *testing.T, e *experiments.Experiment, root string, n int, ks ...int) []string {
	t.Helper()
	var dirs []string
	for _, k := range ks {
		info, err := shard.Plan(base, results.Shard{K: k, N: n}, e, sim.Name, runner.GitRevision())
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, simRun(t, e, root, info.RunID, info))
	}
	return dirs
}

// wallClock masks what is read off the wall clock, and so differs between
// any two runs, even whole ones of one seed: run.json's started and
// finished, summary.json's wall_seconds, and the report's line that
// divides paper time by wall time. Nothing else is masked.
var wallClock = regexp.MustCompile(`(?m)^\s*"(started|finished|wall_seconds)": .*$|replayed in \d+ s of wall time \(\d+ paper s per wall s\)`)

// For the simulator, a run sharded and merged is the whole run: the same
// seed and replicas, 2 and 3 shards, every file of the results directory
// compared byte for byte but the wall clock's fields (wallClock). Only the
// merged directory has shards/ (each shard's own shard.json and run.json),
// and only a run has progress.json (its last progress line, stamped with
// the wall clock).
func TestSimShardsMergeToTheWholeRun(t *testing.T) {
	e := simExperiment(t)
	root := t.TempDir()
	whole := simRun(t, e, filepath.Join(root, "whole"), base, nil)
	wantFiles := files(t, whole, "progress.json")
	if !slices.Contains(wantFiles, "capture.pcapng") || !slices.Contains(wantFiles, "logs/C.r3.jsonl") || !slices.Contains(wantFiles, "report.md") {
		t.Fatalf("whole run's files: %v", wantFiles)
	}
	for _, n := range []int{2, 3} {
		ks := make([]int, n)
		for i := range ks {
			ks[i] = i + 1
		}
		// Given in reverse: the merge orders shards itself.
		dirs := simShards(t, e, filepath.Join(root, "shards", string(rune('0'+n))), n, ks...)
		slices.Reverse(dirs)
		out := filepath.Join(root, "merged", string(rune('0'+n)))
		res, err := shard.Merge(dirs, out)
		if err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		if len(res.MissingShards) != 0 {
			t.Fatalf("%d shards: missing %v", n, res.MissingShards)
		}
		s, err := analysis.Analyze(out)
		if err != nil {
			t.Fatal(err)
		}
		// Latency has no figures to compare with, and fairness no phase
		// long enough, here; the rest pass (the same bytes as the whole
		// run's summary, below).
		if len(s.Failed()) > 0 || !slices.Equal(s.NotJudged(), []string{"latency", "fairness"}) {
			t.Errorf("%d shards: failed %v, not judged %v", n, s.Failed(), s.NotJudged())
		}
		got := files(t, out, "shards")
		if !slices.Equal(got, wantFiles) {
			t.Fatalf("%d shards: merged files\n%v\nwhole run's\n%v", n, got, wantFiles)
		}
		for _, f := range wantFiles {
			a, _ := os.ReadFile(filepath.Join(whole, f))
			b, _ := os.ReadFile(filepath.Join(out, f))
			a, b = wallClock.ReplaceAll(a, nil), wallClock.ReplaceAll(b, nil)
			if !bytes.Equal(a, b) {
				t.Errorf("%d shards: %s differs from the whole run's (%d and %d bytes, first difference at byte %d)", n, f, len(b), len(a), firstDiff(a, b))
			}
		}
	}
}

// A merge without one shard: its replicas are named in run.json, and no
// check passes on the others alone; each says which replicas it did not
// see, and the report's notes say so.
func TestMissingShardLeavesItsReplicasNotJudged(t *testing.T) {
	e := simExperiment(t)
	root := t.TempDir()
	dirs := simShards(t, e, filepath.Join(root, "shards"), 3, 1, 3)
	out := filepath.Join(root, "merged")
	res, err := shard.Merge(dirs, out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.MissingShards, []string{"2/3"}) || !slices.Equal(res.MissingReplicas, []int{1}) {
		t.Fatalf("missing %v, replicas %v: want 2/3, [1]", res.MissingShards, res.MissingReplicas)
	}
	var info results.RunInfo
	if err := results.ReadJSON(out, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.MissingReplicas, []int{1}) || !slices.Equal(info.MissingShards, []string{"2/3"}) {
		t.Errorf("run.json: missing_shards %v, missing_replicas %v", info.MissingShards, info.MissingReplicas)
	}
	s, err := analysis.Analyze(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Requirements) == 0 {
		t.Fatal("no checks")
	}
	for name, r := range s.Requirements {
		if r.Verdict == analysis.VerdictPass {
			t.Errorf("%s passes with replica 1 unseen: %s", name, r.Detail)
		}
	}
	// The checks that pass on the whole run (TestSimShardsMergeToTheWholeRun;
	// latency has no figures here and fairness no phase long enough).
	for _, name := range []string{"loss", "duplication", "validation", "liveness", "agents"} {
		r, ok := s.Requirements[name]
		if !ok || r.Verdict != analysis.VerdictNotJudged || !strings.Contains(r.Detail, "shards 2/3 missing: replicas 1 not seen; on the replicas merged: ") {
			t.Errorf("%s: want not judged, naming the missing shard and replicas: %+v", name, r)
		}
	}
	report, _ := os.ReadFile(filepath.Join(out, results.ReportFile))
	if !strings.Contains(string(report), "shards 2/3 missing: replicas 1 not seen") {
		t.Errorf("report.md does not name the missing replicas")
	}
}

// Merging refuses shards that are not the parts of one run, naming the
// shard directory and the field; each case is a directory of literal
// shard.json files (testdata/refuse/CASE/*/).
func TestMergeRefuses(t *testing.T) {
	cases := []struct{ name, want string }{
		{"other-experiment", "testdata/refuse/other-experiment/b: shard.json: experiment_sha256"},
		{"other-seed", "testdata/refuse/other-seed/b: shard.json: seed \"8\", but testdata/refuse/other-seed/a has \"7\""},
		{"other-revision", "testdata/refuse/other-revision/b: shard.json: git_revision"},
		{"other-run", "testdata/refuse/other-run/b: shard.json: base_run_id \"tb000002\""},
		{"other-count", "testdata/refuse/other-count/b: shard.json: of \"3\""},
		{"duplicate", "testdata/refuse/duplicate/b: shard.json: shard 1/2 is also testdata/refuse/duplicate/a: a duplicate shard"},
		{"overlap", "testdata/refuse/overlap/b: shard.json: items: replica 0 is also in testdata/refuse/overlap/a: overlapping shards"},
		{"wrong-items", "testdata/refuse/wrong-items/b: shard.json: items [2]: shard 2/2 of 3 replicas holds [1 2]"},
		{"seeds", "testdata/refuse/seeds/a: shard.json: unit \"seeds\""},
		{"not-a-shard", "testdata/refuse/not-a-shard/a: no shard.json: not a shard"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs, _ := filepath.Glob(filepath.Join("testdata", "refuse", c.name, "*"))
			if len(dirs) == 0 {
				t.Fatal("no shard directories")
			}
			out := filepath.Join(t.TempDir(), "merged")
			_, err := shard.Merge(dirs, out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Errorf("a refused merge wrote %s", out)
			}
		})
	}
}

// files lists dir's files, relative, sorted, but those under skip.
func files(t *testing.T, dir, skip string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == skip {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
