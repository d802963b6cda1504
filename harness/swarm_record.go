package main

import (
	"fmt"
	"path/filepath"
	"time"

	"tokenbed/analysis"
	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/internal/results"
)

// swarmFigures are a swarm's figures in its summary.json.
type swarmFigures struct {
	Seeds          int     `json:"seeds"`
	Failing        int     `json:"failing"`
	Errors         int     `json:"errors"`
	SeedsPerMinute float64 `json:"seeds_per_minute"`
}

// recordSwarm writes the swarm's run.json and summary.json into its
// directory, so that a swarm is indexed as one run of its experiment
// (harness index, a campaign's job): its verdict (no seed failed) and its
// speed, the figure a night's trend follows.
func recordSwarm(dir string, e *experiments.Experiment, first uint64, seeds, failing, errs int, start time.Time, wall time.Duration) error {
	id := filepath.Base(dir)
	info := results.RunInfo{RunID: id, Experiment: e.Name, Protocol: e.Protocol, Seed: first, Backend: "sim",
		Impairment: "sim", ImpairWhy: "swarm: each seed simulated", TimeScale: 1, NetScale: 1, Replicas: 1,
		Started: start.UTC(), Finished: start.Add(wall).UTC(), Status: "ok"}
	if err := runner.Provenance(&info); err != nil {
		return err
	}
	if err := results.WriteJSON(dir, results.RunFile, info); err != nil {
		return err
	}
	req := analysis.VerdictOf(failing == 0 && errs == 0)
	req.Value = fmt.Sprintf("%d of %d failing, %d errors", failing, seeds, errs)
	req.Detail = fmt.Sprintf("seeds %d to %d, each with faults drawn from the experiment's swarm section, judged by the analysis's invariants", first, first+uint64(seeds)-1)
	s := &analysis.Summary{SchemaVersion: analysis.SchemaVersion, RunID: id, Experiment: e.Name, Seed: first,
		GitRevision: info.GitRevision, Kernel: info.Kernel, Backend: "sim", Impairment: "sim", TimeScale: 1,
		NetworkTimeScale: 1, Replicas: 1, Status: "ok", WallSeconds: wall.Seconds(),
		Requirements: map[string]analysis.Requirement{"seeds": req}, CheckNames: []string{"seeds"},
		Figures: swarmFigures{Seeds: seeds, Failing: failing, Errors: errs, SeedsPerMinute: float64(seeds) / wall.Minutes()}}
	return results.WriteJSON(dir, results.SummaryFile, s)
}
