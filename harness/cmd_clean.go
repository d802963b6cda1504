package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner"
	"tokenbed/internal/cli"
)

// cmdClean removes what killed runs left: for each run the registry
// holds whose harness is gone, the namespaces its entry lists (and the
// processes in them), its key directory, its containers; it records the
// run as killed in its run.json. A name that merely looks like a run's is
// never enough: only what a run registered is removed.
func cmdClean(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("harness clean", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runID := fs.String("run", "", "clean only this run ID (default: every run whose harness is gone)")
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
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
