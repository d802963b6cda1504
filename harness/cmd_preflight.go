package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"tokenbed/harness/runner"
	"tokenbed/internal/cli"
	"tokenbed/netem"
)

func cmdPreflight(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet("harness preflight", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: harness preflight\n\n"+
			"Says which impairment path a run on this machine takes (host sch_netem, the\n"+
			"userspace engine, User Mode Linux), and why. Needs root: it tries sch_netem\n"+
			"in a namespace of its own.")
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	id := runner.NewRunID()
	claim, err := runner.ClaimID(id, "")
	if err == nil {
		err = claim.AddNamespaces(netem.KernelCheckNS(id))
		defer claim.Release()
	}
	if err != nil {
		fmt.Fprintln(stderr, "harness preflight: run registry:", err)
		return exitRunError
	}
	cerr := netem.CheckKernel(id)
	fmt.Fprintf(stdout, "host kernel sch_netem: %v\n", okOr(cerr))
	fmt.Fprintf(stdout, "userspace engine: %v\n", yesNo(userspaceAvailable()))
	fmt.Fprintf(stdout, "User Mode Linux: %v\n", okOr(umlAvailable()))
	// The path a netns run would take, from the check above.
	path, why, err := chooseImpairment(impairRequest{want: runner.ImpairAuto, checkKernel: func() error { return cerr }})
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
