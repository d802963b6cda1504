package runner

import (
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner/runnertest"
	"tokenbed/harness/sim"
)

// clockExperiment gives A a clock 1.5 s ahead running 100 ppm fast and B
// one 0.5 s behind (defaults.clock's drift overridden), C the reference.
// max_clock_skew covers the 2 s between A and B (agent/node, Restarts).
const clockExperiment = `
name: clocks
seed: 9
duration: 20s
defaults:
  profile: "delay 1ms"
  clock: {drift: 1e-4}
  agent:
    randomwalk: {hold: 200ms}
    max_clock_skew: 3s
agents:
  - {name: A, generate: true, clock: {offset: 1.5s}}
  - {name: B, clock: {offset: -500ms, drift: 0}}
  - {name: C, clock: {drift: 0}}
`

// The clock field reaches each agent, in the simulator and as a real
// process in a namespace: every record keeps the reference time in
// wall_ns and the agent's own reading, offset + (1+drift)·(elapsed), in
// local_ns; the tokens an agent generates carry its own reading (002
// §3.2, 003 Fig. 1 line 30); C, on the reference clock, logs no local_ns;
// and the token still circulates among the three.
func TestClockOffsetsReachTheAgents(t *testing.T) {
	t.Parallel() // real time, stamps compared within each record (runner_test.go says why)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name string
		be   func(t *testing.T) backend.Backend
	}{
		{"sim", func(t *testing.T) backend.Backend {
			be, err := backend.New(sim.Name, backend.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return be
		}},
		{"netns", func(t *testing.T) backend.Backend {
			requireRoot(t)
			return nsbackend.New()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, path := load(t, clockExperiment)
			impair := ImpairSim
			if c.name != "sim" {
				impair = hostImpair()
			}
			dir, err := Run(t.Context(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
				Backend: c.be(t), Impair: impair, ImpairReason: "test", AgentBin: agentBin, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []struct {
				name   string
				offset time.Duration
				drift  float64
			}{{"A", 1500 * time.Millisecond, 1e-4}, {"B", -500 * time.Millisecond, 0}, {"C", 0, 0}} {
				checkLocal(t, runnertest.ReadLog(t, dir, a.name), a.name, a.offset, a.drift)
			}
		})
	}
}

func checkLocal(t *testing.T, evs []eventlog.Event, name string, offset time.Duration, drift float64) {
	t.Helper()
	var origin int64 // the first stamped record: the driver's start is at most that
	acquired, generated := 0, 0
	for _, e := range evs {
		if e.Kind == eventlog.TokenAcquired {
			acquired++
		}
		if offset == 0 && drift == 0 {
			if e.LocalNS != 0 {
				t.Errorf("%s %s: local_ns on the reference clock", name, e.Kind)
			}
			continue
		}
		if e.LocalNS == 0 {
			// A real agent logs these two outside its driver's run.
			if e.Kind != eventlog.AgentStarted && e.Kind != eventlog.AgentStopping {
				t.Errorf("%s %s: no local_ns", name, e.Kind)
			}
			continue
		}
		if origin == 0 {
			origin = e.WallNS
		}
		// The drift term: at most drift × time since the start (≤ 20 s,
		// 2 ms at 100 ppm), and 1 ms for the real agent's start before its
		// first record.
		got := time.Duration(e.LocalNS - e.WallNS)
		want := offset + time.Duration(drift*float64(e.WallNS-origin))
		if math.Abs(float64(got-want)) > float64(time.Millisecond) {
			t.Errorf("%s %s at +%v: local − reference %v, want %v", name, e.Kind, time.Duration(e.WallNS-origin), got, want)
		}
		if e.Kind == eventlog.TokenAcquired && e.Reason == "generated" {
			generated++
			if id, err := wire.ParseTokenID(e.Token); err != nil || id.Gen != e.LocalNS {
				t.Errorf("%s generated %s: timestamp not the local reading %d (%v)", name, e.Token, e.LocalNS, err)
			}
		}
	}
	if acquired < 5 {
		t.Errorf("%s acquired the token %d times in 20 s (hold 200 ms): it did not circulate", name, acquired)
	}
	if name == "A" && generated != 1 {
		t.Errorf("A generated %d tokens, want 1", generated)
	}
}
