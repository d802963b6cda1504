package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/runner"
	"tokenbed/harness/swarm"
	"tokenbed/internal/cli"
	"tokenbed/internal/results"
)

// cmdSwarm is harness swarm: many seeds of one experiment in the
// simulator, each with faults drawn from the experiment's swarm section,
// each judged by the analysis's invariants; failing seeds are printed
// with the command that replays them, and the first is shrunk.
func cmdSwarm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness swarm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 100, "how many seeds to run")
	first := fs.Uint64("first", 1, "the first seed")
	workers := fs.Int("workers", runtime.NumCPU(), "simulations at once (each is single-threaded)")
	root := fs.String("results", "results", "results root: the swarm writes RESULTS/swarm-RUNID/")
	duration := fs.Duration("duration", 0, "run length in paper time (default: the experiment's)")
	shrink := fs.Int("shrink", 1, "shrink this many failing seeds (the first ones)")
	replay := fs.Uint64("replay", 0, "run only this seed, with its drawn faults, and keep its results")
	shardFlag := fs.String("shard", "", "K/N: run only shard K of N (1-based) of the seeds, a contiguous block; the swarm writes RESULTS/swarm-ID/ with a shard.json, ID derived from --run-id")
	runID := fs.String("run-id", "", "the swarm's run ID, which its shards share (default: generated, tb + 6 hex digits)")
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "harness swarm: want one experiment file")
		return exitUsage
	}
	if *seeds < 1 || *workers < 1 || *duration < 0 || *shrink < 0 {
		fmt.Fprintln(stderr, "harness swarm: --seeds and --workers must be positive, --duration and --shrink not negative")
		return exitUsage
	}
	expPath := fs.Arg(0)
	e, err := experiments.Load(expPath)
	if err != nil {
		fmt.Fprintln(stderr, "harness swarm: experiment:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if e.Swarm == nil {
		fmt.Fprintf(stderr, "harness swarm: %s has no swarm section: the fault mix to draw from (experiments/faultmix.go)\n", expPath)
		return exitUsage
	}
	if *runID == "" {
		*runID = runner.NewRunID()
	} else if !backend.ValidRunID(*runID) {
		fmt.Fprintf(stderr, "harness swarm: --run-id %q: want tb and six hex digits\n", *runID)
		return exitUsage
	}
	var shardInfo *results.ShardInfo
	if *shardFlag != "" {
		if shardInfo, err = seedShard(*shardFlag, *runID, *first, *seeds, e); err != nil {
			fmt.Fprintln(stderr, "harness swarm:", err)
			return exitUsage
		}
		*runID, *first, *seeds = shardInfo.RunID, shardInfo.Items[0], len(shardInfo.Items)
	}
	dir := filepath.Join(*root, "swarm-"+*runID)
	if shardInfo != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(stderr, "harness swarm:", err)
			return exitRunError
		}
		if err := results.WriteJSON(dir, results.ShardFile, shardInfo); err != nil {
			fmt.Fprintln(stderr, "harness swarm:", err)
			return exitRunError
		}
	}
	s, err := swarm.New(swarm.Options{Experiment: e, Root: dir, Workers: *workers, Duration: *duration, Keep: *replay > 0})
	if err != nil {
		fmt.Fprintln(stderr, "harness swarm:", err)
		return exitRunError
	}
	again := func(seed uint64) string {
		cmd := "harness swarm --replay " + fmt.Sprint(seed)
		if *duration > 0 {
			cmd += " --duration " + duration.String()
		}
		return cmd + " " + expPath
	}
	runCmd := func(path string) string {
		cmd := "harness run --backend sim"
		if *duration > 0 {
			cmd += " --duration " + duration.String()
		}
		return cmd + " " + path
	}
	if *replay > 0 {
		r := s.Run(ctx, *replay, swarm.Draw(e, *replay), "replay")
		fmt.Fprint(stdout, swarm.Schedule(r.Faults))
		if r.Dir != "" {
			fmt.Fprintf(stdout, "results: %s\n", r.Dir)
		}
		return verdict(r, stdout, stderr)
	}

	fmt.Fprintf(stdout, "swarm: %d seeds from %d of %s on %d workers; results in %s\n", *seeds, *first, expPath, *workers, dir)
	start := time.Now()
	var failing []swarm.Result
	errs := 0
	s.Seeds(ctx, *first, *seeds, func(r swarm.Result) {
		switch {
		case r.Err != nil:
			errs++
			fmt.Fprintf(stdout, "seed %d: ERROR %v\n", r.Seed, r.Err)
		case r.Fails():
			failing = append(failing, r)
			fmt.Fprintf(stdout, "seed %d: FAIL (%d faults) %s\n  replay: %s\n      or: %s\n", r.Seed, len(r.Faults), strings.Join(r.Failed, "; "), runCmd(r.Path), again(r.Seed))
		}
	})
	wall := time.Since(start)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "harness swarm: interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stdout, "swarm: %d seeds, %d failing, %d errors in %v: %.1f seeds/min\n", *seeds, len(failing), errs, wall.Round(time.Millisecond), float64(*seeds)/wall.Minutes())
	if err := recordSwarm(dir, e, *first, *seeds, len(failing), errs, start, wall); err != nil {
		fmt.Fprintln(stderr, "harness swarm: recording the swarm:", err)
	}
	for i, r := range failing {
		if i >= *shrink {
			break
		}
		m, runs := s.Shrink(ctx, r)
		fmt.Fprintf(stdout, "shrunk seed %d: %d of %d faults still fail (%d replays): %s\n  replay: %s\n", r.Seed, len(m.Faults), len(r.Faults), runs, strings.Join(m.Failed, "; "), runCmd(m.Path))
		if len(m.Faults) == 0 {
			fmt.Fprintf(stdout, "# no drawn fault is needed: seed %d fails on the experiment's own schedule (the whole file: %s)\n", r.Seed, m.Path)
			continue
		}
		fmt.Fprintf(stdout, "# the faults, after the experiment's own schedule (the whole file: %s)\n%s", m.Path, swarm.Schedule(m.Faults))
	}
	switch {
	case len(failing) > 0:
		return exitFailed
	case errs > 0:
		return exitRunError
	}
	return exitOK
}

// seedShard is shard text ("K/N") of the seeds first..first+n-1 of the
// swarm base: a contiguous block, as harness run --shard deals replicas.
func seedShard(text, base string, first uint64, n int, e *experiments.Experiment) (*results.ShardInfo, error) {
	sh, err := results.ParseShard(text)
	if err != nil {
		return nil, fmt.Errorf("--shard %w", err)
	}
	if sh.N > n {
		return nil, fmt.Errorf("--shard %s: %d shards of %d seeds: a shard would hold none", sh, sh.N, n)
	}
	host, _ := os.Hostname()
	info := &results.ShardInfo{BaseRunID: base, RunID: sh.RunID(base), Shard: sh.K, Of: sh.N, Assignment: results.AssignContiguous,
		Unit: results.UnitSeeds, Total: n, Experiment: e.Name, ExperimentHash: results.HashBytes(e.Raw), Seed: first,
		GitRevision: runner.GitRevision(), Backend: "sim", Host: host}
	for _, i := range sh.Part(n) {
		info.Items = append(info.Items, first+uint64(i))
	}
	return info, nil
}

func verdict(r swarm.Result, stdout, stderr io.Writer) int {
	switch {
	case r.Err != nil:
		fmt.Fprintln(stderr, "harness swarm:", r.Err)
		return exitRunError
	case r.Fails():
		fmt.Fprintf(stdout, "seed %d: FAIL %s\n", r.Seed, strings.Join(r.Failed, "; "))
		return exitFailed
	}
	fmt.Fprintf(stdout, "seed %d: invariants hold (%s)\n", r.Seed, strings.Join(swarm.Invariants, ", "))
	return exitOK
}
