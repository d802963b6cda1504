package runner

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	tpanalysis "tokenbed/analysis/tokenpassing"
	"tokenbed/harness/runner/runnertest"
)

func runQuiet(t *testing.T, src string) string {
	t.Helper()
	e, path := load(t, src)
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairNone,
		AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertClean(t, dir) })
	return dir
}

func readLog(t *testing.T, dir, name string) []eventlog.Event {
	t.Helper()
	return runnertest.ReadLog(t, dir, name)
}

// A scheduled join works as 002 §3.2 has it, with real
// processes: the joining agent starts with a fresh token and one member's
// address, passes the token to it, and from then on takes part in the
// circulation (others pass it tokens); the analysis counts its hits.
func TestJoinEndToEnd(t *testing.T) {
	requireRoot(t)
	dir := runQuiet(t, `
name: join
seed: 5
duration: 120s
time_scale: 10
defaults:
  agent:
    randomwalk: {hold: 1s}
    passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
  - {name: D, later: true}
schedule:
  - {action: join, agent: D, via: B, at: 20s}
`)
	d := readLog(t, dir, "D")
	var started, generated, passedToB bool
	fromOthers := 0
	for _, ev := range d {
		switch {
		case ev.Kind == eventlog.AgentStarted:
			started = true
		case ev.Kind == eventlog.TokenAcquired && ev.Reason == "generated":
			generated = true
		case ev.Kind == eventlog.PassSucceeded && ev.Peer == "B" && generated && fromOthers == 0:
			passedToB = true
		case ev.Kind == eventlog.TokenAcquired && strings.Contains(ev.Reason, "commit"):
			fromOthers++
		}
	}
	if !started || !generated || !passedToB {
		t.Fatalf("D: started %v, generated its joining token %v, passed it to B first %v", started, generated, passedToB)
	}
	if fromOthers < 3 {
		t.Errorf("D acquired %d tokens from the membership after joining, want several", fromOthers)
	}
	// The members learned D: someone other than B passed it a token.
	learned := false
	for _, m := range []string{"A", "C"} {
		for _, ev := range readLog(t, dir, m) {
			learned = learned || ev.Kind == eventlog.PassSucceeded && ev.Peer == "D"
		}
	}
	if !learned {
		t.Error("neither A nor C ever passed a token to D")
	}
	for _, ev := range readLog(t, dir, "harness") {
		if ev.Kind == eventlog.AgentExit && ev.Peer == "D" && !strings.Contains(ev.Detail, "signal") && ev.Detail != "exit status 0" {
			t.Errorf("D exited: %s", ev.Detail)
		}
	}
	s, err := analysis.Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	hits := -1
	for _, a := range tpanalysis.FiguresOf(s).Agents {
		if a.Agent == "D" {
			hits = a.Hits
		}
	}
	t.Logf("D: %d tokens acquired from the membership after joining; analysis counts %d hits of D", fromOthers, hits)
	if hits < fromOthers {
		t.Errorf("analysis counts %d hits of D, the log %d acquisitions from others", hits, fromOthers)
	}
}

// A restart the schedule cannot prove impossible but
// that meets a running agent is skipped with a logged reason, and the
// run goes on; "restart: holder" restarts the holder that crashed last.
func TestRestartOfRunningAgentSkipped(t *testing.T) {
	requireRoot(t)
	dir := runQuiet(t, `
name: restarts
seed: 9
duration: 60s
time_scale: 10
defaults:
  agent:
    randomwalk: {hold: 1s}
    passing: {move_timeout: 100ms, ack_timeout: 100ms, commit_timeout: 100ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: crash, agent: holder, at: 10s}
  - {action: restart, agent: A, at: 15s}
  - {action: restart, agent: B, at: 16s}
  - {action: restart, agent: C, at: 17s}
  - {action: crash, agent: holder, at: 30s}
  - {action: restart, agent: holder, at: 35s}
`)
	var crashed []string
	var restarted, skipped []string
	for _, ev := range readLog(t, dir, "harness") {
		switch {
		case ev.Kind == eventlog.AgentCrash:
			crashed = append(crashed, ev.Peer)
		case ev.Kind == eventlog.AgentRestart:
			restarted = append(restarted, ev.Peer)
		case ev.Reason == "restart_skipped":
			skipped = append(skipped, ev.Peer)
			if !strings.Contains(ev.Detail, "is running") {
				t.Errorf("skip without its reason: %+v", ev)
			}
		}
	}
	if len(crashed) != 2 || len(restarted) != 2 || len(skipped) != 2 {
		t.Fatalf("crashed %v, restarted %v, skipped %v: want 2 crashes, 2 restarts, 2 skips", crashed, restarted, skipped)
	}
	if restarted[0] != crashed[0] || restarted[1] != crashed[1] {
		t.Errorf("restarted %v, want the crashed %v", restarted, crashed)
	}
}
