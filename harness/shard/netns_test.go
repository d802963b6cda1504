package shard_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/harness/shard"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

var agentBin string

func TestMain(m *testing.M) { testenv.MainWithAgent(m, &agentBin) }

// Real processes: testdata/netns-two-replicas.yaml (endurance-smoke in
// two replicas of 4,000 paper seconds, 400 holds each) as two shards side
// by side in network namespaces through the userspace engine, each with
// its own run ID, CA and start, as two machines would run them; merged,
// every check passes (latency has no figures to compare with, for the
// reason the file gives), and each replica is judged on its own shard's
// start (run.json replica_start_ns).
func TestNetnsShardsMerged(t *testing.T) {
	testenv.RequireTUN(t, "creates network namespaces and TUN devices")
	e, err := experiments.Load(filepath.Join("testdata", "netns-two-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dirs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k := 1; k <= 2; k++ {
		info, err := shard.Plan("tb5a0002", results.Shard{K: k, N: 2}, e, "netns", runner.GitRevision())
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[k-1], errs[k-1] = runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: "netns-two-replicas.yaml",
				ResultsRoot: filepath.Join(root, "shards"), RunID: info.RunID, Shard: info, Impair: runner.ImpairUserspace,
				ImpairReason: "test: the userspace engine", AgentBin: agentBin, RTPriority: 5, Log: quiet})
		}()
	}
	wg.Wait()
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
		want := analysis.VerdictPass
		if name == "latency" {
			want = analysis.VerdictNotJudged
		}
		if r.Verdict != want {
			t.Errorf("%s: %s, want %s", name, r.Verdict, want)
		}
	}
	var info results.RunInfo
	if err := results.ReadJSON(out, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	if info.RunID != "tb5a0002" || info.Replicas != 2 || info.Status != "ok" || len(info.ReplicaStartNS) != 2 {
		t.Errorf("run.json: run %s, replicas %d, status %s, replica_start_ns %v", info.RunID, info.Replicas, info.Status, info.ReplicaStartNS)
	}
}
