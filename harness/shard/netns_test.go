package shard_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/harness/shard"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

var agentBin string

func TestMain(m *testing.M) { testenv.MainWithAgent(m, &agentBin) }

// Real processes: experiments/endurance-smoke.yaml shortened to 16,000
// paper seconds in 2 replicas (16 s of wall time each at its time scale
// of 1000), as two shards in network namespaces through the userspace
// engine, each with its own run ID, CA and start, as two machines would
// run them; one after the other, as one machine's two cores are not two
// machines (side by side, each pass waits for the other shard's agents); merged, every check passes and each replica's
// acquisitions are judged on its own shard's start (run.json
// replica_start_ns).
func TestNetnsShardsMerged(t *testing.T) {
	testenv.RequireTUN(t, "creates network namespaces and TUN devices")
	e, err := experiments.Load(filepath.Join("..", "..", "experiments", "endurance-smoke.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.Replicas = 2
	const length = 16000 * time.Second
	root := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dirs := make([]string, 2)
	errs := make([]error, 2)
	for k := 1; k <= 2; k++ {
		info, err := shard.Plan("tb5a0002", results.Shard{K: k, N: 2}, e, "netns", runner.GitRevision())
		if err != nil {
			t.Fatal(err)
		}
		func() {
			dirs[k-1], errs[k-1] = runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: "endurance-smoke.yaml",
				ResultsRoot: filepath.Join(root, "shards"), RunID: info.RunID, Shard: info, Impair: runner.ImpairUserspace,
				ImpairReason: "test: the userspace engine", AgentBin: agentBin, RTPriority: 5, Duration: length, Log: quiet})
		}()
	}
	for k, err := range errs {
		if err != nil {
			t.Fatalf("shard %d/2: %v", k+1, err)
		}
	}
	out := filepath.Join(root, "merged")
	if _, err := shard.Merge(dirs, out); err != nil {
		t.Fatal(err)
	}
	s, err := analysis.Analyze(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range s.Order() {
		r := s.Requirements[name]
		t.Logf("%-12s %s  %s", name, r.Verdict, r.Detail)
		if r.Verdict != analysis.VerdictPass {
			t.Errorf("%s: %s, want pass", name, r.Verdict)
		}
	}
	var info results.RunInfo
	if err := results.ReadJSON(out, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.RunID != "tb5a0002" || info.Replicas != 2 || info.Status != "ok" {
		t.Errorf("run.json: run %s, replicas %d, status %s", info.RunID, info.Replicas, info.Status)
	}
}
