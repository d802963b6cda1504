package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"tokenbed/analysis"
	"tokenbed/harness/runner"
	"tokenbed/internal/cli"
	"tokenbed/internal/results"
)

func cmdAnalyze(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness analyze", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: harness analyze RESULTS_DIR\n\n"+
			"Recomputes every check from the run's logs and capture, writes its report.md,\n"+
			"prints the verdicts, and exits 1 if a requirement failed.")
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "harness analyze: want one results directory")
		return exitUsage
	}
	dir := fs.Arg(0)
	// run.json still saying running, and no live harness for it: the
	// harness was killed (SIGKILL leaves it no chance to say so).
	if runner.MarkKilledIfDead(dir, "the harness died before finishing the run; found by harness analyze") {
		fmt.Fprintf(stderr, "harness analyze: %s was still marked running but its harness is gone: recorded as killed\n", dir)
	}
	return analyzeDir(dir, stdout, stderr)
}

// analyzeDir recomputes every check from the logs and the capture, writes
// the report, prints the verdicts, and returns 1 if a requirement failed.
func analyzeDir(dir string, stdout, stderr io.Writer) int {
	s, err := analysis.Analyze(dir)
	if err != nil {
		fmt.Fprintln(stderr, "harness analyze:", err)
		return exitRunError
	}
	for _, k := range s.Order() {
		r := s.Requirements[k]
		v := strings.ToUpper(string(r.Verdict))
		fmt.Fprintf(stdout, "%-12s %s  %s\n", k, v, r.Detail)
		if r.Bundle != "" {
			fmt.Fprintf(stdout, "%-12s      failure bundle: %s (harness pcap %s)\n", "", filepath.Join(dir, r.Bundle), filepath.Join(dir, r.Bundle, "slice.pcapng"))
		}
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, results.ReportFile))
	if f := s.Failed(); len(f) > 0 {
		fmt.Fprintf(stderr, "harness: requirements failed: %s\n", strings.Join(f, ", "))
		return exitFailed
	}
	return exitOK
}
