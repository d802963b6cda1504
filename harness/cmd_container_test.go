package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/ctrbackend"
	"tokenbed/harness/backend/ctrbackend/ctrtest"
	"tokenbed/harness/runner"
	"tokenbed/internal/testenv"
	"tokenbed/netem"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t, "the netem pre-flight creates a namespace")
}

func loadExp(t *testing.T, src string) (*experiments.Experiment, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "exp.yaml")
	os.WriteFile(p, []byte(src), 0o644)
	e, err := experiments.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

const plainExp = `
name: plain
seed: 1
duration: 10s
agents:
  - {name: A, generate: true}
  - {name: B}
`

// The container backend resolves the impairment path itself: it never
// runs an experiment that needs impairment without it, and says why.
func TestContainerImpairment(t *testing.T) {
	requireRoot(t)
	plain, _ := loadExp(t, plainExp)
	profiled, _ := loadExp(t, strings.Replace(plainExp, "agents:", "links:\n  - {between: [A, B], profile: \"delay 5ms\"}\nagents:", 1))
	outage, _ := loadExp(t, plainExp+"schedule:\n  - {action: outage, link: A-B, at: 2s, for: 1s}\n")
	hostNetem := netem.CheckKernel(runner.NewRunID())
	id := runner.NewRunID()

	path, why, err := containerChoice(runner.ImpairAuto, plain, id)
	if err != nil || path != runner.ImpairNone {
		t.Errorf("auto, no profiles: %q (%s) %v; want none", path, why, err)
	}
	for name, e := range map[string]*experiments.Experiment{"profile": profiled, "outage": outage} {
		path, _, err := containerChoice(runner.ImpairAuto, e, id)
		if hostNetem == nil {
			if err != nil || path != runner.ImpairKernel {
				t.Errorf("auto, %s, host has netem: %q %v; want kernel", name, path, err)
			}
			continue
		}
		// Without host netem the userspace engine takes over where a TUN
		// device can be made (this machine kind), and says why.
		if userspaceAvailable() {
			if err != nil || path != runner.ImpairUserspace {
				t.Errorf("auto, %s, no netem: %q %v; want userspace", name, path, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "lacks sch_netem") || !strings.Contains(err.Error(), "--backend netns") {
			t.Errorf("auto, %s, no netem, no TUN: %q %v; want a refusal naming sch_netem and --backend netns", name, path, err)
		}
		_, _, err = containerChoice(runner.ImpairNone, e, id)
		if err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("none, %s: %v; want a refusal", name, err)
		}
	}
	_, _, err = containerChoice(runner.ImpairKernel, plain, id)
	if hostNetem == nil && err != nil {
		t.Errorf("kernel on a host with netem: %v", err)
	}
	if hostNetem != nil && (err == nil || !strings.HasPrefix(err.Error(), "--impair kernel:") || !strings.Contains(err.Error(), "CONFIG_NET_SCH_NETEM")) {
		t.Errorf("kernel on a host without netem: %v; want the no-netem error", err)
	}
	if _, _, err := containerChoice(runner.ImpairUML, plain, id); err == nil || !strings.Contains(err.Error(), "--backend netns") {
		t.Errorf("uml: %v; want a refusal naming --backend netns", err)
	}
	path, _, err = containerChoice(runner.ImpairUserspace, profiled, id)
	if userspaceAvailable() && (err != nil || path != runner.ImpairUserspace) {
		t.Errorf("--impair userspace with /dev/net/tun: %q %v", path, err)
	}
}

// Through the command line: --impair kernel on a host without netem stops
// before anything is built, with exit status 2 and the reason.
func TestRunContainerRefusesKernelWithoutNetem(t *testing.T) {
	requireRoot(t)
	if netem.CheckKernel(runner.NewRunID()) == nil {
		t.Skip("this host has sch_netem: --impair kernel is valid here")
	}
	_, p := loadExp(t, plainExp)
	var out, errb bytes.Buffer
	code := run([]string{"run", "--backend", "container", "--impair", "kernel", "--agent", os.Args[0], "--results", t.TempDir(), p}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--impair kernel:") || !strings.Contains(errb.String(), "lacks sch_netem") {
		t.Errorf("exit %d, stderr:\n%s", code, errb.String())
	}
	t.Logf("stderr: %s", errb.String())
}

// harness clean removes the containers, network and image a killed run
// left, and only that run's.
func TestCleanRemovesContainerLeftovers(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	if _, err := ctrbackend.Connect(ctx, nil); errors.Is(err, ctrbackend.ErrNoEngine) {
		t.Skipf("no Docker engine on this machine: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	ctrtest.Serialize(t)
	agent := filepath.Join(t.TempDir(), "agent")
	cmd := exec.Command("go", "build", "-o", agent, "tokenbed/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %s", out)
	}
	// A subnet of its own: the ctrbackend package's tests may run at the
	// same time on 10.77.
	runID := "tbc7a0c1"
	pfx := netip.MustParsePrefix("10.78.0.0/24")
	spec := backend.Spec{RunID: runID, Prefixes: []netip.Prefix{pfx},
		Replicas: [][]backend.Agent{{{Name: "A", Instance: "A", Addr: backend.AgentAddr(pfx, 0)}}}}
	be := ctrbackend.New(ctrbackend.Options{AgentBin: agent})
	if err := be.Setup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer be.Teardown(ctx)
	// The run is not registered (as after a killed harness): clean it.
	var out, errb bytes.Buffer
	if code := run([]string{"clean", "--run", runID}, &out, &errb); code != exitOK {
		t.Fatalf("harness clean: exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"removed container " + runID + ".net-A", "removed network " + runID + "-r0", "removed image tokenbed-agent:" + runID} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("harness clean output lacks %q:\n%s", w, out.String())
		}
	}
	prov, err := ctrbackend.Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	if left, err := ctrbackend.Leftovers(ctx, prov.Client(), runID); err != nil || len(left) > 0 {
		t.Errorf("after harness clean: %v %v", left, err)
	}
}

// containerChoice is the impairment path of a container run of e.
func containerChoice(want string, e *experiments.Experiment, runID string) (string, string, error) {
	return chooseImpairment(impairRequest{want: want, containers: true, need: needsImpairment(e),
		checkKernel: func() error { return netem.CheckKernel(runID) }})
}
