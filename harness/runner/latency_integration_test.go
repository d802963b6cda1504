package runner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis/pcaptimeline"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
	"tokenbed/internal/uml/umltest"
	"tokenbed/netem"
)

// Three agents with 5 ms toward B and 60 ms toward C (each way), an
// outage and a crash of the holder, through real sch_netem: inside User
// Mode Linux on a host without it.
const perLink = `
name: per-link
seed: 5
duration: 300s
time_scale: 20
defaults:
  agent:
    randomwalk: {hold: 2s, regenerate_after: 10}
    passing: {move_timeout: 300ms, ack_timeout: 300ms, commit_timeout: 300ms}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
links:
  - {between: [A, B], profile: "delay 5ms"}
  - {between: [A, C], profile: "delay 60ms"}
  - {between: [B, C], profile: "delay 60ms"}
schedule:
  - {action: outage, link: A-C, at: 60s, for: 2s}
  - {action: crash, agent: holder, at: 200s}
`

func TestPerLinkLatencyFollowsProfiles(t *testing.T) {
	requireRoot(t)
	if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge"}, MemMB: 1024,
		Timeout: 5 * time.Minute, Env: []string{testenv.AgentEnv + "=" + agentBin},
		RunOnHost: func() bool { return netem.CheckKernel(NewRunID()) == nil }}) {
		return
	}
	e, path := load(t, perLink)
	dir, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), Impair: ImpairKernel,
		AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	lat := map[string][]time.Duration{}
	for _, inst := range []string{"A", "B", "C"} {
		evs, err := eventlog.ReadFile(filepath.Join(dir, "logs", inst+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == eventlog.PassCompleted && ev.Reason == "earlystop" {
				lat[inst+">"+ev.Peer] = append(lat[inst+">"+ev.Peer], time.Duration(ev.LatencyNS))
			}
		}
	}
	p50 := func(k string) time.Duration {
		v := slices.Clone(lat[k])
		if len(v) < 5 {
			t.Fatalf("%s: only %d passes", k, len(v))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	// A pass is two round trips (Move, Ack, Commit, EarlyStop): 20 ms
	// toward B, 240 ms toward C, plus the agents' own time.
	ab, ac, bc := p50("A>B"), p50("A>C"), p50("B>C")
	t.Logf("pass latency p50: A>B %v, A>C %v, B>C %v (profiles: 4×5 ms, 4×60 ms)", ab, ac, bc)
	if ab < 20*time.Millisecond || ab > 30*time.Millisecond {
		t.Errorf("A>B p50 %v, want 20–30 ms for 2 round trips of 2×5 ms", ab)
	}
	for k, v := range map[string]time.Duration{"A>C": ac, "B>C": bc} {
		if v < 240*time.Millisecond || v > 255*time.Millisecond {
			t.Errorf("%s p50 %v, want 240–255 ms for 2 round trips of 2×60 ms", k, v)
		}
	}
	// The schedule's outage and crash happened, in order, and the capture
	// has the agents' datagrams with the annotations.
	hevs, err := eventlog.ReadFile(filepath.Join(dir, "logs", "harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range hevs {
		switch ev.Kind {
		case eventlog.OutageStart, eventlog.OutageEnd, eventlog.AgentCrash:
			kinds = append(kinds, string(ev.Kind)+" "+ev.Link+ev.Peer)
		}
	}
	want := "outage_start A>C,outage_start C>A,outage_end A>C,outage_end C>A,agent_crash "
	if got := strings.Join(kinds, ","); !strings.HasPrefix(got, want) || len(kinds) != 5 {
		t.Errorf("harness actions %q, want %q followed by the holder", got, want)
	}
	tl, err := pcaptimeline.ReadFile(filepath.Join(dir, results.CaptureFile), pcaptimeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tl.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Move", "Ack", "Commit", "EarlyStop", "outage_start", "agent_crash"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("capture timeline lacks %q", w)
		}
	}
	if os.Getenv("RUNNER_TEST_KEEP") != "" {
		t.Logf("results kept in %s", dir)
	}
}
