package campaign

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"tokenbed/harness/runner"
)

// The studies a campaign can run. Each is the commands its make target
// runs, so that a night's study is the same as the one the docs give.
func init() {
	RegisterStudy("wandering", goStudy{pkg: "./studies/wandering", out: "wandering",
		about: "the Wandering Token tables and figures of seeds 003 and 004 (make wandering; args are its flags)"})
	RegisterStudy("ftn-etcd", goStudy{pkg: "./studies/etcdbench/cmd/etcdbench", sub: "compare", agent: true,
		about: "FTN beside a 3-member etcd cluster, same workloads (make ftn-etcd; needs root and etcd-server)"})
	RegisterStudy("sim-vs-real", simVsReal{})
}

// goStudy runs a study's Go command from the source tree (go run), as its
// make target does: a campaign runs where the tree is.
type goStudy struct {
	pkg, sub, out, about string
	agent                bool // pass --agent
}

func (g goStudy) About() string { return g.about }

func (g goStudy) Steps(e Env, args []string) ([]Step, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if goBin, err = exec.LookPath("/usr/local/go/bin/go"); err != nil {
			return nil, fmt.Errorf("study %s runs from the source tree with go run: no go on PATH", g.pkg)
		}
	}
	argv := []string{goBin, "run", "-trimpath", "-buildvcs=auto", g.pkg}
	if g.sub != "" {
		argv = append(argv, g.sub)
	}
	if g.agent {
		argv = append(argv, "--agent", e.Agent)
	}
	if g.out != "" {
		argv = append(argv, "-out", filepath.Join(e.Root, g.out+"-"+e.Campaign))
	}
	return []Step{{Argv: append(argv, args...), Judged: true}}, nil
}

// simVsReal is make validate-sim: an experiment on network namespaces,
// the same in the simulator in the same shape, and harness compare of the
// two, whose exit status is the verdict. Args: [EXPERIMENT [SHAPE
// FLAGS...]], default experiments/validate-sim.yaml --replicas 4
// --time-scale 1000 (the file's shape, as the Makefile's
// VALIDATE_SIM_SHAPE).
type simVsReal struct{}

func (simVsReal) About() string {
	return "the simulator against real processes (make validate-sim; needs root): args EXPERIMENT and the simulator's shape flags"
}

// allowance is the host's cost per pass that the simulator leaves out
// (docs/simulator.md, the Makefile's VALIDATE_SIM_ALLOWANCE).
const allowance = "2ms"

func (simVsReal) Steps(e Env, args []string) ([]Step, error) {
	exp, shape := "experiments/validate-sim.yaml", []string{"--replicas", "4", "--time-scale", "1000"}
	if len(args) > 0 {
		exp = args[0]
	}
	if len(args) > 1 {
		shape = args[1:]
	}
	real, sim := runner.NewRunID(), runner.NewRunID()
	run := func(backend, id string, extra ...string) []string {
		a := []string{e.Harness, "run", "--backend", backend, "--run-id", id, "--results", e.Root}
		if backend != "sim" && e.Agent != "" {
			a = append(a, "--agent", e.Agent)
		}
		return append(append(a, extra...), exp)
	}
	return []Step{
		{Argv: run("netns", real)},
		{Argv: run("sim", sim, shape...)},
		{Argv: []string{e.Harness, "compare", "--allowance", allowance,
			"--allowance-why", "the host's cost per pass (kernel, TUN relay, wake-ups), which the simulator leaves out",
			filepath.Join(e.Root, real), filepath.Join(e.Root, sim)}, Judged: true},
	}, nil
}
