package runner

import (
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/analysis"
	tpanalysis "tokenbed/analysis/tokenpassing"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner/runnertest"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// loseWandering is seed 003's policy on five agents (Table 1's Δop and
// Δskip; N_max 5, so Δmin 10 s and γ_generate 50 s) with a token loss
// event every 1000 s on average (the exponential reading of γ_loss) over
// 4·10^4 s: about 40 losses.
const loseWandering = `
name: lose-token
seed: 11
duration: 40000s
defaults:
  role: wandering
  profile: "delay 1ms"
  agent:
    wandering: {nmax: 5}
agents:
  - {name: a0, generate: true}
  - {name: a1}
  - {name: a2}
  - {name: a3}
  - {name: a4}
schedule:
  - {action: lose-token, at: 0s, every: 1000s}
`

// A lose-token step in the simulator: the loss events come at the
// configured rate (the schedule's count within 4σ of Poisson(40)); each
// one the harness injects is a token lost in transit at the holder's
// next pass (token_lost, and no agent acquires that token again), the
// analysis counts it as an explained loss, and the policy regenerates
// after each (line 29 of 003 Fig. 1): a token_regenerated follows every
// loss, and a token is alive at the end.
func TestLoseTokenInTheSimulator(t *testing.T) {
	e, path := load(t, loseWandering)
	scheduled := 0
	for _, s := range e.Schedule {
		if s.Action == "lose-token" {
			scheduled++
		}
	}
	if lambda := 40.0; math.Abs(float64(scheduled)-lambda) > 4*math.Sqrt(lambda) {
		t.Errorf("%d loss events scheduled in 4·10^4 s at a mean of 1000 s: not Poisson(40) within 4σ", scheduled)
	}
	be, err := backend.New(sim.Name, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Run(t.Context(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
		Backend: be, Impair: ImpairSim, ImpairReason: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Simulated agents ran on virtual time: no host CPU to report.
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil || info.HostCPU != nil {
		t.Errorf("simulated run.json host_cpu %+v (%v), want none", info.HostCPU, err)
	}
	injected, skipped := 0, 0
	for _, ev := range runnertest.ReadLog(t, dir, "harness") {
		switch ev.Reason {
		case "lose_token":
			injected++
		case "lose_token_skipped":
			skipped++
		}
	}
	if injected+skipped != scheduled || injected < scheduled*3/4 {
		t.Errorf("%d loss events scheduled, %d injected, %d skipped (no holder for 5 s)", scheduled, injected, skipped)
	}
	var lost, regen []int64 // mono_ns
	lostTok := map[string]bool{}
	acquiredAfter := map[string]int64{}
	for i := range 5 {
		evs, err := eventlog.ReadFile(filepath.Join(dir, "logs", "a"+string(rune('0'+i))+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			switch ev.Kind {
			case eventlog.TokenLost:
				lost = append(lost, ev.MonoNS)
				lostTok[ev.Token] = true
			case eventlog.TokenRegenerated:
				regen = append(regen, ev.MonoNS)
			case eventlog.TokenAcquired:
				acquiredAfter[ev.Token] = max(acquiredAfter[ev.Token], ev.MonoNS)
			}
		}
	}
	t.Logf("%d loss events scheduled, %d injected, %d skipped; %d token_lost, %d regenerations", scheduled, injected, skipped, len(lost), len(regen))
	if len(lost) != injected {
		t.Errorf("%d token_lost for %d injected loss events", len(lost), injected)
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	sort.Slice(regen, func(i, j int) bool { return regen[i] < regen[j] })
	for _, l := range lost {
		j := sort.Search(len(regen), func(j int) bool { return regen[j] > l })
		if j == len(regen) {
			t.Errorf("no regeneration after the loss at mono %d", l)
		}
	}
	for tok := range lostTok {
		if at, ok := acquiredAfter[tok]; ok && at > lost[len(lost)-1] {
			t.Errorf("token %s, lost in transit, was acquired again", tok)
		}
	}
	if n := lossesOfCause(t, dir, "lost-in-transit"); n != injected {
		t.Errorf("analysis: %d losses lost-in-transit, want the %d injected", n, injected)
	}
}

// lossesOfCause counts the analysis's token losses of cause c, each
// explained.
func lossesOfCause(t *testing.T, dir, c string) int {
	t.Helper()
	s, err := analysis.Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range tpanalysis.FiguresOf(s).Losses {
		if l.Cause == c {
			if !l.Explain {
				t.Errorf("a %s loss is not explained", c)
			}
			n++
		}
	}
	return n
}

// The same fault on real agents in namespaces: the harness sends SIGUSR1
// to the holder, and the process loses the next token it passes. Three
// random-walk agents, a loss every 5 s for 30 s (periodic): every
// injected event is one token_lost, and the random walk's loss detection
// regenerates (002 §3.2) so that every event finds a holder.
func TestLoseTokenRealAgents(t *testing.T) {
	requireRoot(t)
	t.Parallel() // real time, counts of events (runner_test.go says why)
	e, path := load(t, `
name: lose-token-real
seed: 4
duration: 30s
defaults:
  profile: "delay 1ms"
  agent:
    randomwalk: {hold: 200ms, expected_return: 600ms, regenerate_after: 3}
agents:
  - {name: A, generate: true}
  - {name: B}
  - {name: C}
schedule:
  - {action: lose-token, at: 0s, every: 5s, distribution: periodic}
`)
	impair := hostImpair()
	dir, err := Run(t.Context(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
		Backend: nsbackend.New(), Impair: impair, ImpairReason: "test", AgentBin: agentBin, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	injected := 0
	for _, ev := range runnertest.ReadLog(t, dir, "harness") {
		if ev.Reason == "lose_token" {
			injected++
		}
	}
	lost, regen := 0, 0
	for _, a := range []string{"A", "B", "C"} {
		for _, ev := range runnertest.ReadLog(t, dir, a) {
			switch ev.Kind {
			case eventlog.TokenLost:
				lost++
			case eventlog.TokenRegenerated:
				regen++
			}
		}
	}
	if injected != 5 || lost != injected || regen < lost-1 {
		t.Errorf("%d loss events injected (want 5), %d token_lost, %d regenerations", injected, lost, regen)
	}
	if n := lossesOfCause(t, dir, "lost-in-transit"); n != lost {
		t.Errorf("analysis: %d losses lost-in-transit, want %d", n, lost)
	}
}

// hostImpair is the impairment of a run on this host: kernel netem
// where the kernel has it, else the userspace engine.
func hostImpair() string {
	if netem.CheckKernel(NewRunID()) == nil {
		return ImpairKernel
	}
	return ImpairUserspace
}
