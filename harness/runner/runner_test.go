package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
)

var agentBin string

func TestMain(m *testing.M) { testenv.MainWithAgent(m, &agentBin) }

func requireRoot(t *testing.T) { testenv.RequireRoot(t, "creates network namespaces") }

// Parallel tests: TestKernelRunWithDuplication,
// TestKernelRunFallsBackToUserspace, TestLoseTokenRealAgents and
// TestClockOffsetsReachTheAgents run side by side (t.Parallel), after
// every other test of the package. Each waits on its run's real time
// with little CPU (the UML guests take a CPU each, umltest), checks
// counts of events, or clock readings against the wall time stamped in
// the same record, rather than delays, and looks only at its own run:
// none calls assertClean, whose agent-process check covers every run of
// this binary. The tests that judge delays or rates (TestSimAgainstReal,
// TestPerLinkLatencyFollowsProfiles, TestPartitionCutsTheLinksBetweenGroups,
// the insider tests) stay serial.

// An experiment without profiles runs on any kernel (impairment none).
const plain = `
name: plain
seed: 11
duration: 80s
time_scale: 10
replicas: 2
defaults:
  agent:
    # 10 ms wall: the creator's first Move leaves inside its peers'
    # start-up window unless the runner waits it out (Protocol.Settle).
    randomwalk: {hold: 100ms}
    passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: crash, agent: C, at: 10s}
  - {action: restart, agent: C, at: 20s}
  - {action: crash, agent: holder, at: 70s}
`

func load(t *testing.T, src string) (*experiments.Experiment, string) {
	p := filepath.Join(t.TempDir(), "exp.yaml")
	os.WriteFile(p, []byte(src), 0o644)
	e, err := experiments.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

func TestRunWritesResultsAndLeavesNothing(t *testing.T) {
	requireRoot(t)
	e, path := load(t, plain)
	root := t.TempDir()
	var poll time.Duration // hold 0: idle CPUs poll while the agents run
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: root, Impair: ImpairNone,
		AgentBin: agentBin, CPULatency: &poll, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{results.RunFile, results.TopologyFile, results.ExperimentFile, results.CaptureFile,
		"ca/ca.crt", "ca/A.crt", "ca/C.r1.crt", "logs/harness.jsonl", "logs/A.jsonl", "logs/C.r1.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("results: %v", err)
		}
	}
	keys, _ := filepath.Glob(filepath.Join(dir, "ca", "*.key"))
	if len(keys) > 0 {
		t.Errorf("private keys in the results: %v", keys)
	}
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil || info.Status != "ok" || info.Replicas != 2 {
		t.Errorf("run.json: %+v %v", info, err)
	}
	// What the host's CPUs did while the agents ran, read from
	// /proc/stat: the agents and the harness kept them busy.
	if h := info.HostCPU; h == nil || h.Error != "" || h.WallS < 1 || h.BusyS <= 0 || h.StealS < 0 || h.StealFraction < 0 || h.StealFraction > 1 {
		t.Errorf("run.json host_cpu: %+v", h)
	} else if h.LatencyBoundUS == nil || *h.LatencyBoundUS != 0 || h.LatencyError != "" {
		t.Errorf("run.json host_cpu: PM QoS bound %v (%s), want 0 µs held", h.LatencyBoundUS, h.LatencyError)
	}
	// The schedule was carried out, each step in the replica whose shard
	// holds it: the first crash in replica 0, the last in replica 1.
	hevs, err := eventlog.ReadFile(filepath.Join(dir, "logs", "harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var crashes []string
	restarted, hostCPU := false, false
	for _, ev := range hevs {
		hostCPU = hostCPU || ev.Reason == "host_cpu" && strings.Contains(ev.Detail, "stolen by the hypervisor")
		switch ev.Kind {
		case eventlog.AgentCrash:
			crashes = append(crashes, ev.Peer)
		case eventlog.AgentRestart:
			restarted = ev.Peer == "C"
		}
	}
	if len(crashes) != 2 || crashes[0] != "C" || !strings.HasSuffix(crashes[1], ".r1") || !restarted {
		t.Errorf("crashes %v (want C, then the holder of replica 1), restart of C %v", crashes, restarted)
	}
	if !hostCPU {
		t.Error("harness log: no host_cpu notice")
	}
	// Every agent log is complete and valid, and the token moved. The
	// token creators start once their peers are past the start-up window
	// in which an agent refuses datagrams signed before its start plus the
	// clock skew (Protocol.Settle): only C, restarted in replica 0, may
	// refuse any as before-start.
	acq := 0
	for _, inst := range []string{"A", "B", "C", "A.r1", "B.r1", "C.r1"} {
		evs, err := eventlog.ReadFile(filepath.Join(dir, "logs", inst+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var beforeStart uint64
		for _, ev := range evs {
			switch {
			case ev.Kind == eventlog.TokenAcquired:
				acq++
			case ev.Kind == eventlog.DatagramRejected && ev.Reason == "before-start":
				beforeStart++
			case ev.Kind == eventlog.RejectionsSummary:
				beforeStart += ev.Counts["before-start"]
			}
		}
		if beforeStart > 0 && inst != "C" {
			t.Errorf("%s refused %d datagrams as before-start: a token creator started inside its peers' start-up window", inst, beforeStart)
		}
	}
	if acq < 30 {
		t.Errorf("only %d acquisitions", acq)
	}
	assertClean(t, dir)
}

// assertClean checks that the run left nothing behind: only its own
// objects are looked at, so other runs on the machine do not disturb it.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	id := filepath.Base(dir)
	if names, _ := nsbackend.Leftovers(id); len(names) > 0 {
		t.Errorf("namespaces left: %v", names)
	}
	if LiveRuns()[id] {
		t.Errorf("run %s still registered", id)
	}
	out, _ := exec.Command("pgrep", "-f", agentBin).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("agent processes left: %s", out)
	}
	tmp, _ := filepath.Glob(filepath.Join(os.TempDir(), "tokenbed-"+id+"-keys-*"))
	if len(tmp) > 0 {
		t.Errorf("key directories left: %v", tmp)
	}
}

// Ctrl-C in the middle of a run: everything is removed, and the results
// directory says the run was interrupted.
func TestInterruptedRunCleansUp(t *testing.T) {
	requireRoot(t)
	e, path := load(t, plain)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	dir, err := Run(ctx, Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairNone,
		AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		t.Fatal("interrupted run returned no error")
	}
	var info results.RunInfo
	results.ReadJSON(dir, results.RunFile, &info)
	if info.Status != "interrupted" {
		t.Errorf("run.json status %q, want interrupted", info.Status)
	}
	if _, err := eventlog.ReadFile(filepath.Join(dir, "logs", "A.jsonl")); err != nil {
		t.Errorf("partial agent log unreadable: %v", err)
	}
	assertClean(t, dir)
}

func TestRefusesToRunWithoutAskedImpairment(t *testing.T) {
	e, path := load(t, strings.Replace(plain, "defaults:", "defaults:\n  profile: \"delay 5ms\"", 1))
	_, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairNone, AgentBin: agentBin})
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("got %v, want a refusal to run without impairment", err)
	}
}
