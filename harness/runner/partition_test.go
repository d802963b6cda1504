package runner

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner/runnertest"
	"tokenbed/harness/sim"
)

// A partition step cuts exactly the links between its groups, at once,
// and heals them at once: the harness log has one outage_start and one
// outage_end per direction between A,B and C,D and none within a side,
// and during the cut the token passes within a side and never across
// (passes across fail and the sender keeps the token, 002 §3), while
// before and after it does cross. The same experiment runs in the
// simulator and in namespaces here, and in containers in ctrbackend's
// tests: the step is the core's, and each backend's links must honour it.
func TestPartitionCutsTheLinksBetweenGroups(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name  string
		scale float64
		// slack (paper time, as the logs are) is how far apart a real
		// backend's harness sets the cuts of one step (one direction
		// after another), and how long after the cut a pass whose Commit
		// left before it may still complete: the simulator has neither.
		slack time.Duration
		be    func(t *testing.T) backend.Backend
	}{
		{"sim", 1, 0, func(t *testing.T) backend.Backend {
			be, err := backend.New(sim.Name, backend.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return be
		}},
		{"netns", 10, 500 * time.Millisecond, func(t *testing.T) backend.Backend {
			requireRoot(t)
			return nsbackend.New()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := c.be(t)
			e, path := load(t, fmt.Sprintf(runnertest.PartitionExperiment, c.scale))
			impair := ImpairSim
			if c.name != "sim" {
				impair = hostImpair()
			}
			dir, err := Run(t.Context(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(),
				Backend: be, Impair: impair, ImpairReason: "test", AgentBin: agentBin, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runnertest.CheckPartition(t, dir, 20*time.Second, c.slack)
		})
	}
}
