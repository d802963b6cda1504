package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/ctrbackend"
	"tokenbed/harness/runner"
	"tokenbed/netem"
)

// runContainer runs the experiment with every agent in a Docker container
// (harness/backend/ctrbackend): the same runner, schedule, capture and
// results as the netns backend.
func runContainer(ctx context.Context, f runFlags, e *experiments.Experiment, claim *runner.Claim, expPath, impair, why string, stdout, stderr io.Writer, log *slog.Logger) int {
	if need := needsImpairment(e); need != "" && (f.impair == runner.ImpairAuto || f.impair == runner.ImpairKernel) {
		if err := claim.AddNamespaces(netem.KernelCheckNS(f.runID)); err != nil {
			claim.Release()
			fmt.Fprintln(stderr, "harness run: run registry:", err)
			return exitRunError
		}
	}
	impair, why, err := containerImpairment(f.impair, impair, why, e, f.runID)
	if err != nil {
		claim.Release()
		fmt.Fprintln(stderr, "harness run --backend container:", err)
		return exitUsage
	}
	log.Info("container backend: impairment path", "path", impair, "why", why)
	be, err := backend.New(f.backend, backend.Options{AgentBin: f.agent, Log: log})
	if err != nil {
		claim.Release()
		fmt.Fprintln(stderr, "harness run:", err)
		return exitUsage
	}
	dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: expPath, ResultsRoot: f.results, RunID: f.runID, Claim: claim,
		Backend: be, Impair: impair, ImpairReason: why, AgentBin: f.agent, RTPriority: f.rtPrio, Duration: f.duration, Log: log, Progress: stderr, TTY: isTTY(stderr)})
	return finishRun(ctx, f, dir, err, stdout, stderr)
}

// needsImpairment names the first thing in e that needs an impairment
// engine (a direction's profile, or a schedule step that changes one or
// makes an outage or a partition), or "" when nothing does.
func needsImpairment(e *experiments.Experiment) string {
	for _, d := range e.Directions {
		if d.Text != "" {
			return fmt.Sprintf("direction %s has profile %q", d.Key(), d.Text)
		}
	}
	for _, s := range e.Schedule {
		if s.Action == experiments.ActProfile || s.Action == experiments.ActOutage || s.Action == experiments.ActPartition {
			return fmt.Sprintf("schedule step %d is a %s", s.Index, s.Action)
		}
	}
	return ""
}

// containerImpairment resolves the impairment path for the container
// backend. Containers share the host's kernel: kernel netem works where
// the host has sch_netem (a tree on each pod's host-side veth, see
// ctrbackend.IngressPort); where it lacks it, the userspace engine
// attaches a TUN relay inside each pod's namespace (the pod holder owns
// it for the whole run, so the engine survives agent crashes and
// restarts); User Mode Linux cannot host Docker. Nothing that needs
// impairment runs without it.
func containerImpairment(flag, resolved, why string, e *experiments.Experiment, runID string) (string, string, error) {
	need := needsImpairment(e)
	noKernel := func(cerr error) error {
		what := "the experiment has no profiles, so run it with --impair none"
		if need != "" {
			what = "the experiment needs impairment (" + need + ")"
		}
		return fmt.Errorf("the host kernel lacks sch_netem (%v), containers share the host's kernel, and the userspace engine cannot run here (no /dev/net/tun); %s, or use --backend netns --impair uml (User Mode Linux has netem)", cerr, what)
	}
	switch flag {
	case runner.ImpairAuto:
		if need == "" {
			return runner.ImpairNone, "the experiment has no profiles, outages or profile changes: nothing to impair", nil
		}
		cerr := netem.CheckKernel(runID)
		if cerr == nil {
			return runner.ImpairKernel, "the host kernel has sch_netem (containers share it)", nil
		}
		if !errors.Is(cerr, netem.ErrNoNetem) {
			return "", "", fmt.Errorf("netem pre-flight: %w", cerr)
		}
		if userspaceAvailable() {
			return runner.ImpairUserspace, "the host kernel lacks sch_netem (" + cerr.Error() + "); using the userspace engine inside each container's namespace", nil
		}
		return "", "", noKernel(cerr)
	case runner.ImpairKernel:
		if cerr := netem.CheckKernel(runID); cerr != nil {
			if errors.Is(cerr, netem.ErrNoNetem) {
				return "", "", fmt.Errorf("--impair kernel: %w", noKernel(cerr))
			}
			return "", "", fmt.Errorf("--impair kernel: netem pre-flight: %w", cerr)
		}
		return resolved, why, nil
	case runner.ImpairNone:
		if need != "" {
			return "", "", fmt.Errorf("--impair none, but %s: refusing to run without the impairment the experiment asks for", need)
		}
		return resolved, why, nil
	case runner.ImpairUML:
		return "", "", errors.New("--impair uml runs the whole experiment inside User Mode Linux, where no Docker engine runs: use --backend netns --impair uml")
	case runner.ImpairUserspace:
		if !userspaceAvailable() {
			return "", "", errors.New("--impair userspace: /dev/net/tun is not usable here (load the tun module), so the userspace engine cannot run")
		}
		return resolved, why, nil
	}
	return "", "", fmt.Errorf("--impair %q: want auto, kernel, userspace, uml or none", flag)
}

// cleanContainers removes the containers, networks and images that killed
// runs left (label tokenbed.run), skipping runs whose harness is alive.
// No Docker engine means nothing to clean.
func cleanContainers(runID string, live map[string]bool, stdout io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov, err := ctrbackend.Connect(ctx, nil)
	if errors.Is(err, ctrbackend.ErrNoEngine) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer prov.Close()
	removed, err := ctrbackend.Clean(ctx, prov.Client(), runID, live)
	for _, o := range removed {
		fmt.Fprintf(stdout, "removed %v\n", o)
	}
	return len(removed), err
}
