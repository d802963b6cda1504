package resource

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tokenbed/experiments"
	_ "tokenbed/harness/protocol/tokenpassing" // the protocol the agents run
	"tokenbed/harness/runner"
	"tokenbed/internal/testenv"
)

var agentBin string

func TestMain(m *testing.M) { testenv.MainWithAgent(m, &agentBin) }

// A small Wandering Token run on the netns backend (20 agents, Table 1's
// Δop and Δskip, N_max 20 so that the resource is fully booked, 1,000
// paper seconds at time scale 50): every operation the agents logged is
// one connection in the resource server's log, and the two sources'
// shares of each concurrency level agree within Tolerance (the
// connections' set-up and close lags; see Tolerance). At scale 200 an
// operation lasts 20 ms and, on a machine loaded by another 150-agent
// run, the lags' 99th percentiles reached 160 ms: the shares differed by
// 4.5%; at scale 50 an operation lasts 80 ms.
func TestAgentsAndServerAgreeOnNetns(t *testing.T) {
	testenv.RequireRoot(t, "creates network namespaces")
	var agents strings.Builder
	for i := 0; i < 20; i++ {
		gen := ""
		if i == 0 {
			gen = ", generate: true"
		}
		fmt.Fprintf(&agents, "  - {name: w%02d%s}\n", i, gen)
	}
	src := `name: resource-agreement
seed: 16
duration: 1000s
time_scale: 50
network_time_scale: 50
warm_start: true
defaults:
  role: wandering
  agent:
    wandering: {op: 4s, skip: 100ms, nmax: 20}
    passing: {move_timeout: 5s, ack_timeout: 5s, commit_timeout: 5s}
    operation: {kind: resource}
agents:
` + agents.String()
	path := filepath.Join(t.TempDir(), "exp.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := experiments.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
		Impair: runner.ImpairNone, AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r, err := AnalyzeRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	x := r.Replicas[0]
	if x.Ops < 50 {
		t.Fatalf("%d operations in 1,000 s with 20 agents booked at N_max: the operation hook did not run", x.Ops)
	}
	// An operation that started in the last moment of the run may be
	// stopped before its connection is accepted: at most one per agent.
	if x.Matched != x.Conns || x.Ops-x.Matched > 20 {
		t.Errorf("%d operations, %d connections, %d matched: want every connection matched and every operation but those cut by the stop", x.Ops, x.Conns, x.Matched)
	}
	if x.Diff > Tolerance {
		t.Errorf("the server's log disagrees with the agents' by %.2f%% at level %d (tolerance %.0f%%)", 100*x.Diff, x.DiffLevel, 100*Tolerance)
	}
}
