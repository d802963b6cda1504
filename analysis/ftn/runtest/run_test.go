// Package runtest runs the FTN experiments through the harness and
// judges them with the checker (analysis/ftn): in the simulator without
// root, and as root on network namespaces and in Docker containers. All
// are skipped under -short.
package runtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/analysis"
	"tokenbed/analysis/ftn"
	"tokenbed/analysis/pcaptimeline"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/ctrbackend"
	"tokenbed/harness/backend/ctrbackend/ctrtest"
	_ "tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/protocol"
	_ "tokenbed/harness/protocol/ftn"
	"tokenbed/harness/runner"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
	"tokenbed/internal/testenv"
	"tokenbed/netem"
)

var agentBin string

// TestMain builds the agent for the netns run, except under -short,
// where every test here skips. The runs with real processes (netns and
// containers) run side by side (t.Parallel): each has its own run ID,
// namespaces and results directory, and they spend their time waiting
// on the experiment's real time, not on the CPU. The simulated runs,
// which use a whole core, run before them, one at a time.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	testenv.MainWithAgent(m, &agentBin)
}

const experiment = "../../../experiments/ftn-leader-partition.yaml"

// resultsRoot is where the runs write: a temporary directory, removed
// after the test, unless TOKENBED_KEEP_RESULTS names one to keep them in
// (to read a failure's logs and capture afterwards).
func resultsRoot(t *testing.T) string {
	if d := os.Getenv("TOKENBED_KEEP_RESULTS"); d != "" {
		return d
	}
	return t.TempDir()
}

func judge(t *testing.T, dir string) {
	t.Helper()
	r, err := ftn.CheckDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range ftn.Names {
		q := r.Requirement(n)
		fmt.Fprintf(&b, "%-16s %-10s %s\n  %s\n", n, q.Verdict, q.Value, q.Detail)
		if q.Verdict != analysis.VerdictPass {
			t.Errorf("%s: %s: %s", n, q.Verdict, q.Detail)
		}
	}
	// The capture's view, from capture.pcapng alone: its checks pass, and
	// it saw the holds the clients logged.
	cr, err := ftn.CheckCaptureDir(dir, r.BaseWall)
	if err != nil {
		t.Fatal(err)
	}
	if cr == nil {
		t.Fatalf("%s: no capture", dir)
	}
	for _, n := range ftn.CaptureNames {
		q := cr.Requirement(n)
		fmt.Fprintf(&b, "%-16s %-10s %s\n  %s\n", n, q.Verdict, q.Value, q.Detail)
		if q.Verdict != analysis.VerdictPass {
			t.Errorf("%s: %s: %s", n, q.Verdict, q.Detail)
		}
	}
	v := ftn.Compare(r, cr)
	if len(cr.Holds) < len(r.Holds)/2 {
		t.Errorf("the capture shows %d holds, the histories %d", len(cr.Holds), len(r.Holds))
	}
	t.Logf("%s\n%s\n%s", dir, b.String(), v.Markdown())
	// The run's own analysis (harness run, harness analyze) composes the
	// same checkers, registered by analysis/ftn, in the same order.
	sum, err := analysis.Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	order := append(slices.Clone(ftn.Names), ftn.CaptureNames...)
	if !slices.Equal(sum.Order(), order) || len(sum.Failed()) > 0 {
		t.Errorf("analysis.Analyze: checks %v, failed %v; want %v, none failed", sum.Order(), sum.Failed(), order)
	}
	for _, n := range ftn.Names {
		if sum.Requirements[n].Verdict != r.Requirement(n).Verdict {
			t.Errorf("%s: analysis %s, CheckDir %s", n, sum.Requirements[n].Verdict, r.Requirement(n).Verdict)
		}
	}
	for _, n := range ftn.CaptureNames {
		if sum.Requirements[n].Verdict != cr.Requirement(n).Verdict {
			t.Errorf("%s: analysis %s, CheckCaptureDir %s", n, sum.Requirements[n].Verdict, cr.Requirement(n).Verdict)
		}
	}
}

func load(t *testing.T) *experiments.Experiment { t.Helper(); return loadFile(t, experiment) }

func loadFile(t *testing.T, file string) *experiments.Experiment {
	t.Helper()
	e, err := experiments.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.Lookup(e.Protocol); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExperimentSimulated: ftn-leader-partition.yaml in the simulator
// (the processes' own code, signed datagrams, virtual time; seeded, so a
// failure replays exactly).
func TestExperimentSimulated(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60 s experiment in virtual time (several seconds of CPU)")
	}
	judge(t, simulate(t, load(t), experiment))
}

// simulate runs e (from file) in the simulator and returns its results
// directory.
func simulate(t *testing.T, e *experiments.Experiment, file string) string {
	t.Helper()
	be, err := backend.New(sim.Name, backend.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runner.Run(context.Background(), runner.Options{Experiment: e, ExperimentFile: file, ResultsRoot: resultsRoot(t),
		Backend: be, Impair: runner.ImpairSim, ImpairReason: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExperimentNetns: the same experiment with real processes on
// network namespaces (3 servers, 10 clients, a leader crash and a
// partition), unimpaired links: its checker passes.
func TestExperimentNetns(t *testing.T) {
	t.Parallel() // real time, little CPU (see TestMain)
	testenv.RequireRoot(t, "creates network namespaces")
	dir := runReal(t, nil)
	judge(t, dir)
	decodes(t, dir)
}

// decodes: the reader of `harness pcap` (analysis/pcaptimeline) shows
// the run's capture as FTN datagrams, every one decoded (none refused),
// and no token passing session: a real capture, not only the literal
// ones of its golden test.
func decodes(t *testing.T, dir string) {
	t.Helper()
	tl, err := pcaptimeline.ReadFile(filepath.Join(dir, results.CaptureFile), pcaptimeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tl.FTN == nil || tl.FTN.Transmissions < 1000 || tl.FTN.Refused != 0 || len(tl.Groups) != 0 || len(tl.Malformed) != 0 {
		var n, refused int
		if tl.FTN != nil {
			n, refused = tl.FTN.Transmissions, tl.FTN.Refused
		}
		t.Errorf("harness pcap of %s: %d FTN transmissions (want over 1000), %d refused, %d token passing sessions, %d malformed; want FTN only, none refused",
			dir, n, refused, len(tl.Groups), len(tl.Malformed))
	}
}

// TestExperimentInContainers: the same experiment with every server and
// client in a Docker container (the container backend: a protocol's
// processes run in namespaces, containers and the simulator alike): its
// checker passes, both views.
func TestExperimentInContainers(t *testing.T) {
	t.Parallel() // real time, little CPU (see TestMain)
	testenv.RequireRoot(t, "creates network namespaces and containers")
	ctrtest.Serialize(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prov, err := ctrbackend.Connect(ctx, log)
	if errors.Is(err, ctrbackend.ErrNoEngine) {
		t.Skipf("SKIP: no Docker engine on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	prov.Close()
	dir := runReal(t, ctrbackend.New(ctrbackend.Options{AgentBin: agentBin, Log: log}))
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil || info.Backend != "container" {
		t.Errorf("run.json: backend %q, %v; want container", info.Backend, err)
	}
	judge(t, dir)
	decodes(t, dir)
}

// runReal runs ftn-leader-partition.yaml with real processes on be (nil:
// network namespaces) and returns its results directory.
func runReal(t *testing.T, be backend.Backend) string {
	t.Helper()
	dir, _ := runRealFile(t, be, experiment, nil)
	return dir
}

// impairment is how a real run impairs its links: the links' profiles
// and the outages need netem: the kernel's, else the userspace engine
// (as harness run --impair auto, without UML).
func impairment(t *testing.T, id string) string {
	t.Helper()
	if err := netem.CheckKernel(id); err != nil {
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			t.Skipf("no sch_netem (%v) and no /dev/net/tun for the userspace engine", err)
		}
		return runner.ImpairUserspace
	}
	return runner.ImpairKernel
}

// TestBrokenServerCaughtOnTheWire: ftn-5-restart.yaml in the simulator
// with every server deliberately broken (it serves tokens reclaimed from
// a DOWN server without querying the clients, 001 "Receiving global
// state"): the histories and, independently, the capture both find the
// overlap; with correct servers neither does. Seeded: the same schedule
// every time.
func TestBrokenServerCaughtOnTheWire(t *testing.T) {
	if testing.Short() {
		t.Skip("two 60 s experiments in virtual time")
	}
	const path = "../../../experiments/ftn-5-restart.yaml"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, broken := range []bool{false, true} {
		text := string(src)
		if broken {
			text = strings.Replace(text, "    tick: 50ms\n", "    tick: 50ms\n    server: {skip_recovery_query: true}\n", 1)
			if text == string(src) {
				t.Fatalf("%s: no '    tick: 50ms' line to add the broken servers' setting to", path)
			}
		}
		file := filepath.Join(t.TempDir(), "ftn-5-restart.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := experiments.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		dir := simulate(t, e, file)
		r, err := ftn.CheckDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := ftn.CheckCaptureDir(dir, r.BaseWall)
		if err != nil || cr == nil {
			t.Fatalf("capture: %v", err)
		}
		want := analysis.VerdictPass
		if broken {
			want = analysis.VerdictFail
		}
		for _, q := range []analysis.Requirement{r.MutualExclusion, cr.MutualExclusion} {
			if q.Verdict != want {
				t.Errorf("broken servers %v: mutual exclusion %s (%s), want %s", broken, q.Verdict, q.Detail, want)
			}
		}
		t.Logf("broken servers %v:\n  histories: %s: %s\n  capture: %s: %s", broken, r.MutualExclusion.Verdict, r.MutualExclusion.Detail,
			cr.MutualExclusion.Verdict, cr.MutualExclusion.Detail)
	}
}
