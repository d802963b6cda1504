package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/protocol"
	"tokenbed/harness/runner"
	"tokenbed/harness/shard"
	"tokenbed/harness/sim"
	"tokenbed/internal/cli"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

type runFlags struct {
	backend   string
	impair    string
	results   string
	runID     string
	agent     string
	duration  time.Duration
	noAnalyze bool
	cpu       int
	replicas  int
	timeScale float64
	rtPrio    int
	// cpuLatency is --cpu-latency as given; cpuBound the bound it names
	// (nil: off), set by check.
	cpuLatency string
	cpuBound   *time.Duration
	slurm      slurmFlags
	shard      string
	// shardInfo is --shard's, once the experiment is known (shardRun).
	shardInfo *results.ShardInfo
}

// hostOnlyFlags are the run flags that act on the host, not on the run:
// the harness inside User Mode Linux does not get them (umlArgs).
var hostOnlyFlags = map[string]bool{"cpu": true}

// runFlagSet is harness run's flags, into f: the command line's and the
// one the User Mode Linux path gives the harness in the guest (umlArgs).
func runFlagSet(f *runFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("harness run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.backend, "backend", "netns", backendUsage())
	fs.StringVar(&f.impair, "impair", runner.ImpairAuto, impairUsage())
	fs.StringVar(&f.results, "results", "results", "results root: the run writes RESULTS/RUNID/")
	fs.StringVar(&f.runID, "run-id", "", "run ID (default: generated, tb + 6 hex digits)")
	fs.StringVar(&f.agent, "agent", agentBinary(), "agent binary")
	fs.DurationVar(&f.duration, "duration", 0, "run length in paper time (default: the experiment's)")
	fs.BoolVar(&f.noAnalyze, "no-analyze", false, "do not analyze the results at the end")
	fs.IntVar(&f.replicas, "replicas", 0, "run this many replicas of the topology, each replaying its share of the paper timeline (default: the experiment's)")
	fs.Float64Var(&f.timeScale, "time-scale", 0, "application time scale (default: the experiment's); the distortion of compressed time is measured by comparing runs at several")
	fs.StringVar(&f.cpuLatency, "cpu-latency", "0s", "while the agents run, hold this PM QoS CPU wake-up latency bound (a duration; 0s: idle CPUs poll instead of halting, as cyclictest does, so a datagram does not wait for a halted virtual CPU to wake; off: leave the idle states alone)")
	fs.IntVar(&f.rtPrio, "rt-priority", 5, "run the agents SCHED_FIFO at this priority, below the userspace engine's relay (10), as dedicated hosts would run them (0: normal scheduling)")
	f.slurm.register(fs)
	fs.StringVar(&f.shard, "shard", "", "K/N: run only shard K of N (1-based) of the run's replicas, contiguous blocks; the run ID is then the run's, the shard's own derived from it (see harness merge)")
	fs.IntVar(&f.cpu, "cpu", -1, "with --impair uml: pin the instance to this host CPU (-1: the first free)")
	return fs
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	var f runFlags
	fs := runFlagSet(&f, stderr)
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "harness run: want one experiment file")
		return exitUsage
	}
	// Every flag is checked before anything is created: a run ID is part
	// of namespace and file names.
	if msg := f.check(); msg != "" {
		fmt.Fprintln(stderr, "harness run:", msg)
		return exitUsage
	}
	expPath := fs.Arg(0)
	e, err := experiments.Load(expPath)
	if err != nil {
		fmt.Fprintln(stderr, "harness run: experiment:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if _, err := protocol.Lookup(e.Protocol); err != nil {
		fmt.Fprintf(stderr, "harness run: experiment: %s: protocol: %v\n", expPath, err)
		return exitUsage
	}
	if f.backend == sim.Name {
		// Virtual time needs no compression and no replicas: the paper
		// timeline runs as one continuous replica at paper speed, unless
		// the flags ask for the real backends' shape (to compare).
		e.Replicas, e.TimeScale, e.NetworkTimeScale = 1, 1, 1
	}
	if f.replicas > 0 {
		e.Replicas = f.replicas
	}
	if f.timeScale > 0 {
		e.TimeScale = f.timeScale
	}
	if f.runID == "" {
		f.runID = runner.NewRunID()
	}
	if f.slurm.on {
		if f.shard != "" {
			fmt.Fprintln(stderr, "harness run: --slurm and --shard: the Slurm engine gives each shard its --shard")
			return exitUsage
		}
		return runSlurm(ctx, f, fs, e, expPath, stdout, stderr)
	}
	if f.shard != "" {
		if msg := f.shardRun(e); msg != "" {
			fmt.Fprintln(stderr, "harness run:", msg)
			return exitUsage
		}
	}
	if f.backend == sim.Name {
		return runSim(ctx, f, e, expPath, stdout, stderr, log)
	}
	if f.agent, err = filepath.Abs(f.agent); err == nil {
		_, err = os.Stat(f.agent)
	}
	if err != nil {
		fmt.Fprintf(stderr, "harness run: --agent: %v (build it with make build)\n", err)
		return exitUsage
	}
	// The ID is claimed before the first side effect (the netem
	// pre-flight's scratch namespace is named after it).
	claim, err := runner.ClaimID(f.runID, filepath.Join(f.results, f.runID))
	if err != nil {
		fmt.Fprintln(stderr, "harness run:", err)
		if errors.Is(err, runner.ErrRunIDTaken) {
			return exitUsage
		}
		return exitRunError
	}
	containers := f.backend == "container"
	var registryErr error
	impair, why, err := chooseImpairment(impairRequest{want: f.impair, containers: containers, need: needsImpairment(e),
		checkKernel: func() error {
			// The pre-flight's scratch namespace is the run's until it is gone.
			if registryErr = claim.AddNamespaces(netem.KernelCheckNS(f.runID)); registryErr != nil {
				return registryErr
			}
			return netem.CheckKernel(f.runID)
		}})
	if registryErr != nil {
		claim.Release()
		fmt.Fprintln(stderr, "harness run: run registry:", registryErr)
		return exitRunError
	}
	if err != nil {
		claim.Release()
		if containers {
			fmt.Fprintln(stderr, "harness run --backend container:", err)
		} else {
			fmt.Fprintln(stderr, "harness run:", err)
		}
		return exitUsage
	}
	log.Info("impairment path", "backend", f.backend, "path", impair, "why", why)
	if containers {
		return runContainer(ctx, f, e, claim, expPath, impair, why, stdout, stderr, log)
	}
	if impair == runner.ImpairUML {
		defer claim.Release()
		return runInUML(ctx, f, fs, expPath, stdout, stderr, log)
	}
	dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: expPath, ResultsRoot: f.results, RunID: f.runID, Shard: f.shardInfo, Claim: claim,
		Impair: impair, ImpairReason: why, AgentBin: f.agent, RTPriority: f.rtPrio, CPULatency: f.cpuBound, Duration: f.duration, Log: log, Progress: stderr, TTY: isTTY(stderr)})
	return finishRun(ctx, f, dir, err, stdout, stderr)
}

// runSim runs the experiment in the simulator: no agent binary, no
// impairment to choose (the links are the netem model), nothing created
// on the host but the results, so no run registry entry.
func runSim(ctx context.Context, f runFlags, e *experiments.Experiment, expPath string, stdout, stderr io.Writer, log *slog.Logger) int {
	be, err := backend.New(sim.Name, backend.Options{Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "harness run:", err)
		return exitUsage
	}
	dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: expPath, ResultsRoot: f.results, RunID: f.runID, Shard: f.shardInfo, Backend: be,
		Impair: runner.ImpairSim, ImpairReason: "simulated: each direction is the userspace engine's netem model, in virtual time",
		Duration: f.duration, Log: log, Progress: stderr, TTY: isTTY(stderr)})
	code := finishRun(ctx, f, dir, err, stdout, stderr)
	if code != exitOK && code != exitUsage {
		// The experiment (its seed) and these flags replay it byte for byte.
		fmt.Fprintf(stderr, "replay (seed %d): %s\n", e.Seed, replayCommand(f, expPath))
	}
	return code
}

// shardRun makes the run shard K of N of the run f.runID names (--shard):
// its replicas, its own run ID, its shard.json. It returns what is wrong,
// or "".
func (f *runFlags) shardRun(e *experiments.Experiment) string {
	s, err := results.ParseShard(f.shard)
	if err != nil {
		return "--shard " + err.Error()
	}
	info, err := shard.Plan(f.runID, s, e, f.backend, runner.GitRevision())
	if err != nil {
		return err.Error()
	}
	f.runID, f.shardInfo = info.RunID, info
	return ""
}

// replayCommand is the command that reruns a simulated run identically.
func replayCommand(f runFlags, expPath string) string {
	cmd := "harness run --backend " + sim.Name
	if f.duration > 0 {
		cmd += " --duration " + f.duration.String()
	}
	if f.replicas > 0 {
		cmd += fmt.Sprintf(" --replicas %d", f.replicas)
	}
	if f.timeScale > 0 {
		cmd += fmt.Sprintf(" --time-scale %g", f.timeScale)
	}
	if f.shardInfo != nil {
		cmd += fmt.Sprintf(" --run-id %s --shard %s", f.shardInfo.BaseRunID, f.shard)
	}
	return cmd + " " + expPath
}

// check validates the flags, before anything is created; it returns what
// is wrong, or "".
// parseCPULatency sets cpuBound from --cpu-latency, or says what is wrong.
func (f *runFlags) parseCPULatency() string {
	if f.cpuLatency == "off" {
		f.cpuBound = nil
		return ""
	}
	d, err := time.ParseDuration(f.cpuLatency)
	if err != nil || d < 0 || d > time.Hour {
		return fmt.Sprintf("--cpu-latency %q: want a duration from 0s to 1h, or off", f.cpuLatency)
	}
	f.cpuBound = &d
	return ""
}

func (f *runFlags) check() string {
	switch {
	case f.runID != "" && !backend.ValidRunID(f.runID):
		return fmt.Sprintf("--run-id %q: want tb and six hex digits (it names namespaces and files)", f.runID)
	case f.replicas < 0 || f.replicas > 64:
		return "--replicas must be in 1..64"
	case f.rtPrio < 0 || f.rtPrio > 99:
		return "--rt-priority must be in 0..99"
	case f.parseCPULatency() != "":
		return f.parseCPULatency()
	case f.timeScale < 0:
		return "--time-scale must be positive"
	case f.duration < 0:
		return "--duration must be positive"
	case backend.Check(f.backend) != nil:
		return "--backend " + backend.Check(f.backend).Error()
	case f.backend == sim.Name && f.impair != runner.ImpairAuto:
		return fmt.Sprintf("--impair %s: the simulator's links are the userspace engine's netem model; leave --impair out", f.impair)
	case checkImpair(f.impair) != "":
		return checkImpair(f.impair)
	case f.cpu < -1:
		return "--cpu must be a CPU number, or -1 for the first free"
	case f.results == "":
		return "--results must name a directory"
	}
	return ""
}

// backendUsage lists the registered backends for --backend's help.
func backendUsage() string {
	var b strings.Builder
	b.WriteString("how agents run:")
	for _, n := range backend.Names() {
		fmt.Fprintf(&b, " %s (%s);", n, backend.About(n))
	}
	return strings.TrimSuffix(b.String(), ";")
}

// finishRun reports how runner.Run ended and analyzes the results.
func finishRun(ctx context.Context, f runFlags, dir string, err error, stdout, stderr io.Writer) int {
	if dir != "" {
		fmt.Fprintf(stdout, "results: %s\n", dir)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "harness run: interrupted; partial results in", dir)
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "harness run:", err)
		if errors.Is(err, runner.ErrRunIDTaken) {
			return exitUsage
		}
		return exitRunError
	}
	if f.noAnalyze {
		return exitOK
	}
	return analyzeDir(dir, stdout, stderr)
}
