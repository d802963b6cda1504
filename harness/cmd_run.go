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
	"time"

	"tokenbed/experiments"
	"tokenbed/harness/runner"
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
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("harness run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	fs.StringVar(&f.backend, "backend", "netns", "netns (network namespaces) or container (Docker)")
	fs.StringVar(&f.impair, "impair", runner.ImpairAuto, "auto, kernel (host sch_netem), userspace (netem/userspace engine), uml (whole run in User Mode Linux), none")
	fs.StringVar(&f.results, "results", "results", "results root: the run writes RESULTS/RUNID/")
	fs.StringVar(&f.runID, "run-id", "", "run ID (default: generated, tb + 6 hex digits)")
	fs.StringVar(&f.agent, "agent", agentBinary(), "agent binary")
	fs.DurationVar(&f.duration, "duration", 0, "run length in paper time (default: the experiment's)")
	fs.BoolVar(&f.noAnalyze, "no-analyze", false, "do not analyze the results at the end")
	fs.IntVar(&f.replicas, "replicas", 0, "run this many replicas of the topology, each replaying its share of the paper timeline (default: the experiment's)")
	fs.Float64Var(&f.timeScale, "time-scale", 0, "application time scale (default: the experiment's); the distortion of compressed time is measured by comparing runs at several")
	fs.IntVar(&f.rtPrio, "rt-priority", 5, "run the agents SCHED_FIFO at this priority, below the userspace engine's relay (10), as dedicated hosts would run them (0: normal scheduling)")
	fs.IntVar(&f.cpu, "cpu", -1, "with --impair uml: pin the instance to this host CPU (-1: the first free)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "harness run: want one experiment file")
		return exitUsage
	}
	expPath := fs.Arg(0)
	e, err := experiments.Load(expPath)
	if err != nil {
		fmt.Fprintln(stderr, "harness run: experiment:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if f.replicas < 0 || f.replicas > 64 {
		fmt.Fprintln(stderr, "harness run: --replicas must be in 1..64")
		return exitUsage
	}
	if f.replicas > 0 {
		e.Replicas = f.replicas
	}
	if f.rtPrio < 0 || f.rtPrio > 99 {
		fmt.Fprintln(stderr, "harness run: --rt-priority must be in 0..99")
		return exitUsage
	}
	if f.timeScale < 0 {
		fmt.Fprintln(stderr, "harness run: --time-scale must be positive")
		return exitUsage
	}
	if f.timeScale > 0 {
		e.TimeScale = f.timeScale
	}
	if f.duration < 0 {
		fmt.Fprintln(stderr, "harness run: --duration must be positive")
		return exitUsage
	}
	if f.backend != "netns" && f.backend != "container" {
		fmt.Fprintf(stderr, "harness run: --backend %q: want netns or container\n", f.backend)
		return exitUsage
	}
	if f.runID == "" {
		f.runID = runner.NewRunID()
	}
	if f.agent, err = filepath.Abs(f.agent); err != nil {
		fmt.Fprintln(stderr, "harness run:", err)
		return exitUsage
	}
	if f.backend == "container" {
		// The container backend chooses its own path: containers share
		// the host's kernel, and UML cannot run Docker.
		return runContainer(ctx, f, e, expPath, f.impair, "forced by --impair "+f.impair, stdout, stderr, log)
	}
	impair, why, err := chooseImpairment(f.impair, f.runID)
	if err != nil {
		fmt.Fprintln(stderr, "harness run:", err)
		return exitUsage
	}
	log.Info("impairment path", "path", impair, "why", why)
	if impair == runner.ImpairUML {
		return runInUML(ctx, f, expPath, stdout, stderr, log)
	}
	dir, err := runner.Run(ctx, runner.Options{Experiment: e, ExperimentFile: expPath, ResultsRoot: f.results, RunID: f.runID,
		Impair: impair, ImpairReason: why, AgentBin: f.agent, RTPriority: f.rtPrio, Duration: f.duration, Log: log, Progress: stderr, TTY: isTTY(stderr)})
	fmt.Fprintf(stdout, "results: %s\n", dir)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "harness run: interrupted; partial results in", dir)
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "harness run:", err)
		return exitRunError
	}
	if f.noAnalyze {
		return exitOK
	}
	return analyzeDir(dir, stdout, stderr)
}

// chooseImpairment resolves --impair. auto takes the host kernel's netem
// when it has it; otherwise the whole run goes into User Mode Linux, whose
// kernel has it. A profile is never silently left unapplied.
func chooseImpairment(want, runID string) (path, why string, err error) {
	switch want {
	case runner.ImpairKernel, runner.ImpairUserspace, runner.ImpairUML, runner.ImpairNone:
		return want, "forced by --impair " + want, nil
	case runner.ImpairAuto:
	default:
		return "", "", fmt.Errorf("--impair %q: want auto, kernel, userspace, uml or none", want)
	}
	cerr := netem.CheckKernel(runID)
	if cerr == nil {
		return runner.ImpairKernel, "the host kernel has sch_netem", nil
	}
	if !errors.Is(cerr, netem.ErrNoNetem) {
		return "", "", fmt.Errorf("netem pre-flight: %w", cerr)
	}
	if userspaceAvailable() {
		return runner.ImpairUserspace, "the host kernel lacks sch_netem (" + cerr.Error() + "); using the userspace engine", nil
	}
	if err := umlAvailable(); err != nil {
		return "", "", fmt.Errorf("the host kernel lacks sch_netem (%v) and User Mode Linux is not usable (%v): install it with make deps, or run with --impair none on an experiment without profiles", cerr, err)
	}
	return runner.ImpairUML, "the host kernel lacks sch_netem (" + cerr.Error() + "); running the whole experiment inside User Mode Linux, whose kernel has it", nil
}

func cmdPreflight(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	id := runner.NewRunID()
	cerr := netem.CheckKernel(id)
	fmt.Fprintf(stdout, "host kernel sch_netem: %v\n", okOr(cerr))
	fmt.Fprintf(stdout, "userspace engine: %v\n", yesNo(userspaceAvailable()))
	fmt.Fprintf(stdout, "User Mode Linux: %v\n", okOr(umlAvailable()))
	path, why, err := chooseImpairment(runner.ImpairAuto, id)
	if err != nil {
		fmt.Fprintln(stdout, "impairment: none possible:", err)
		return exitRunError
	}
	fmt.Fprintf(stdout, "impairment path: %s (%s)\n", path, why)
	return exitOK
}

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func yesNo(b bool) string {
	if b {
		return "available"
	}
	return "not available in this build"
}

func writeFileIfAbsent(path string, b []byte) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		os.WriteFile(path, b, 0o644)
	}
}

// userspaceAvailable reports whether the userspace engine can run here:
// it needs TUN devices.
func userspaceAvailable() bool {
	_, err := os.Stat("/dev/net/tun")
	return err == nil
}
