package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"tokenbed/analysis"
	"tokenbed/analysis/crossval"
	"tokenbed/internal/cli"
)

// cmdCompare compares two runs of one experiment (the simulator against
// real processes, analysis/crossval): a markdown table of pass latency per
// direction, return times, failures by cause and acquisitions, each with
// its tolerance; exit 1 if a figure is outside it.
func cmdCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o crossval.Options
	var allowance time.Duration
	fs.Float64Var(&o.Alpha, "alpha", 0.01, "level of the KS and binomial tests")
	fs.Float64Var(&o.Z, "z", 2.576, "normal quantile of the latency quantiles' intervals and the acquisitions' bound")
	fs.DurationVar(&allowance, "allowance", 0, "added to every latency quantile's tolerance: a budget for what the model leaves out (say what with --allowance-why)")
	fs.StringVar(&o.AllowanceWhy, "allowance-why", "", "what --allowance budgets for (printed with the table)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: harness compare [flags] RUN_DIR_A RUN_DIR_B")
		fs.PrintDefaults()
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	if allowance > 0 && strings.TrimSpace(o.AllowanceWhy) == "" {
		fmt.Fprintln(stderr, "harness compare: --allowance needs --allowance-why: a tolerance says what it is for")
		return exitUsage
	}
	o.Allowance = allowance.Seconds()
	var ss [2]*analysis.Samples
	for i, dir := range fs.Args() {
		s, err := analysis.ReadSamples(dir)
		if err != nil {
			fmt.Fprintf(stderr, "harness compare: %s: %v\n", dir, err)
			return exitRunError
		}
		ss[i] = s
	}
	t := crossval.Compare(ss[0], ss[1], o)
	fmt.Fprint(stdout, t.Markdown())
	if !t.Pass() {
		return exitFailed
	}
	return exitOK
}
