// Command harness runs tokenbed experiments: real agent processes on an
// emulated network, with netem profiles, packet capture and a schedule of
// faults, and checks the results.
//
// Usage:
//
//	harness run [flags] EXPERIMENT.yaml   run an experiment (harness run -h)
//	harness analyze RESULTS_DIR           recompute checks and report from logs and capture
//	harness compare RUN_DIR_A RUN_DIR_B   compare two runs of one experiment (the simulator against real processes)
//	harness pcap FILE [filters]           decoded timeline of a capture (token passing per session, FTN)
//	harness preflight                     say which impairment path this machine takes, and why
//	harness clean [--run RUNID]           remove what killed runs left behind
//	harness swarm [flags] EXPERIMENT.yaml many simulated seeds with drawn faults (harness swarm -h)
//	harness campaign run [FILE]           run a campaign of jobs (default: the night)
//	harness index [--results DIR]         rebuild the results database
//	harness trend [--db FILE]             each figure of the latest night against the previous nights
//	harness serve [flags]                 the results browser: campaigns, runs, figures across nights (harness serve -h)
//	harness merge [-o DIR] SHARD_DIR...   one results directory from a run's shards (run --shard), analysed
//
// Logs go to standard error; reports and timelines to standard output.
//
// Exit status: 0 success (and, for run and analyze, every requirement
// passed); 1 a requirement failed (for trend: a figure regressed); 2
// usage or configuration error (the message names the field, or the file
// and line); 3 the run itself failed (setup, an agent, the kernel); 130
// interrupted.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/term"

	"tokenbed/analysis/pcaptimeline"
)

const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitRunError    = 3
	exitInterrupted = 130
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr, log)
	case "analyze":
		return cmdAnalyze(args[1:], stdout, stderr)
	case "compare":
		return cmdCompare(args[1:], stdout, stderr)
	case "pcap":
		return pcaptimeline.Main(args[1:], stdout, stderr)
	case "preflight":
		return cmdPreflight(args[1:], stdout, stderr, log)
	case "clean":
		return cmdClean(args[1:], stdout, stderr, log)
	case "swarm":
		return cmdSwarm(ctx, args[1:], stdout, stderr)
	case "index":
		return cmdIndex(args[1:], stdout, stderr)
	case "campaign":
		return cmdCampaign(ctx, args[1:], stdout, stderr)
	case "trend":
		return cmdTrend(args[1:], stdout, stderr)
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr, log)
	case "slurm":
		return cmdSlurm(ctx, args[1:], stdout, stderr)
	case "merge":
		return cmdMerge(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "harness: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  harness run [flags] EXPERIMENT.yaml   run an experiment (harness run -h for flags)
  harness analyze RESULTS_DIR           recompute checks and report from logs and capture
  harness compare RUN_DIR_A RUN_DIR_B   compare two runs of one experiment (sim vs real), exit 1 outside tolerance
  harness pcap FILE [filters]           decoded timeline of a capture: token passing per session, FTN (harness pcap -h)
  harness preflight                     which impairment path this machine takes, and why
  harness clean [--run RUNID]           remove leftovers of killed runs
  harness swarm [flags] EXPERIMENT.yaml many simulated seeds with drawn faults; shrinks failures (harness swarm -h)
  harness campaign run [FILE]           run a campaign of jobs (default: the night), indexed as they finish
  harness index [--results DIR]         rebuild the results database from the results directories
  harness trend [--db FILE] [--job J]   each figure of the latest night against the previous nights; exit 1 on a regression
  harness serve [flags]                 the results browser on loopback: campaigns, runs, figures across nights (harness serve -h)
  harness campaign submit --slurm FILE  submit a campaign's sharded runs to Slurm, and an index job after them
  harness slurm status DIR              jobs of a Slurm submission (run --slurm, campaign submit), from squeue/scontrol
  harness merge [-o DIR] SHARD_DIR...   one results directory from a run's shards (harness run --shard), analysed
`)
}

// agentBinary finds the agent next to the harness binary, as make build
// puts them.
func agentBinary() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin/agent"
	}
	return filepath.Join(filepath.Dir(exe), "agent")
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
