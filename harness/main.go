// Command harness runs tokenbed experiments: real agent processes on an
// emulated network, with netem profiles, packet capture and a schedule of
// faults, and checks the results.
//
// Usage:
//
//	harness run [flags] EXPERIMENT.yaml   run an experiment (harness run -h)
//	harness analyze RESULTS_DIR           recompute checks and report from logs and capture
//	harness pcap FILE [filters]           decoded per-session timeline of a capture
//	harness preflight                     say which impairment path this machine takes, and why
//	harness clean [--run RUNID]           remove what killed runs left behind
//
// Logs go to standard error; reports and timelines to standard output.
//
// Exit status: 0 success (and, for run and analyze, every requirement
// passed); 1 a requirement failed; 2 usage or configuration error (the
// message names the field, or the file and line); 3 the run itself failed
// (setup, an agent, the kernel); 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/term"

	"tokenbed/analysis/pcaptimeline"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner"
	_ "tokenbed/protocol/tokenpassing" // the protocol plug-ins this build runs
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
	case "pcap":
		return pcaptimeline.Main(args[1:], stdout, stderr)
	case "preflight":
		return cmdPreflight(args[1:], stdout, stderr, log)
	case "clean":
		return cmdClean(args[1:], stdout, stderr, log)
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
  harness pcap FILE [filters]           decoded per-session timeline of a capture (harness pcap -h)
  harness preflight                     which impairment path this machine takes, and why
  harness clean [--run RUNID]           remove leftovers of killed runs
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

// cmdClean removes what killed runs left: for each run the registry
// holds whose harness is gone, the namespaces its entry lists (and the
// processes in them), its key directory, its containers; it records the
// run as killed in its run.json. A name that merely looks like a run's is
// never enough: only what a run registered is removed.
func cmdClean(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("harness clean", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runID := fs.String("run", "", "clean only this run ID (default: every run whose harness is gone)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "harness clean: unexpected argument %q (to clean one run: harness clean --run RUNID)\n", fs.Arg(0))
		return exitUsage
	}
	if *runID != "" && !backend.ValidRunID(*runID) {
		fmt.Fprintf(stderr, "harness clean: --run %q: want a run ID, tb and six hex digits\n", *runID)
		return exitUsage
	}
	var runs []runner.Entry
	if *runID != "" {
		e, ok := runner.Lookup(*runID)
		if ok && e.Alive() {
			fmt.Fprintf(stderr, "harness clean: run %s is still running (harness pid %d); stop it first\n", *runID, e.PID)
			return exitUsage
		}
		if ok {
			runs = append(runs, e)
		} else {
			fmt.Fprintf(stdout, "run %s: not in the run registry (finished cleanly, already cleaned, or never run here)\n", *runID)
		}
	} else {
		for _, e := range runner.Registered() {
			if !e.Alive() {
				runs = append(runs, e)
			}
		}
	}
	var errs []error
	removed := 0
	say := func(s string) {
		fmt.Fprintln(stdout, s)
		removed++
	}
	for _, e := range runs {
		if err := runner.CleanDead(e, say); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", e.RunID, err))
		}
	}
	live := runner.LiveRuns()
	if *runID == "" {
		n, err := cleanUMLDirs(stdout)
		removed += n
		errs = append(errs, err)
	}
	n, err := cleanContainers(*runID, live, stdout)
	removed += n
	errs = append(errs, err)
	reportUnregistered(*runID, stdout)
	if removed == 0 {
		fmt.Fprintln(stdout, "nothing to clean")
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "harness clean:", err)
		return exitRunError
	}
	return exitOK
}

// reportUnregistered names the namespaces that look like a run's but that
// no registry entry lists: clean leaves them, and says so.
func reportUnregistered(runID string, stdout io.Writer) {
	names, _ := nsbackend.Leftovers(runID)
	listed := map[string]bool{}
	for _, e := range runner.Registered() {
		for _, n := range e.Namespaces {
			listed[n] = true
		}
	}
	for _, n := range names {
		if !listed[n] {
			fmt.Fprintf(stdout, "left namespace %s: no run registry entry lists it, so no tokenbed run is known to have made it\n", n)
		}
	}
}
