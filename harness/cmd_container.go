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
)

// runContainer runs the experiment with every agent in a Docker container
// (harness/backend/ctrbackend): the same runner, schedule, capture and
// results as the netns backend, on the impairment path chooseImpairment
// chose for containers.
func runContainer(ctx context.Context, f runFlags, e *experiments.Experiment, claim *runner.Claim, expPath, impair, why string, stdout, stderr io.Writer, log *slog.Logger) int {
	be, err := backend.New(f.backend, backend.Options{AgentBin: f.agent, Log: log})
	if err != nil {
		claim.Release()
		fmt.Fprintln(stderr, "harness run:", err)
		return exitUsage
	}
	dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: expPath, ResultsRoot: f.results, RunID: f.runID, Shard: f.shardInfo, Claim: claim,
		Backend: be, Impair: impair, ImpairReason: why, AgentBin: f.agent, RTPriority: f.rtPrio, CPULatency: f.cpuBound, Duration: f.duration, Log: log, Progress: stderr, TTY: isTTY(stderr)})
	return finishRun(ctx, f, dir, err, stdout, stderr)
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
