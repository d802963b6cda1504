package main

import (
	"io"
	"testing"

	"tokenbed/harness/runner"
)

// The harness inside User Mode Linux gets harness run's own flags: every
// value given on the host reaches the guest (but --cpu, which pins the
// instance on the host), except those the guest must see otherwise.
func TestUMLArgsCarryTheRunFlags(t *testing.T) {
	var host runFlags
	fs := runFlagSet(&host, io.Discard)
	if err := fs.Parse([]string{"--impair", "uml", "--duration", "90s", "--replicas", "3", "--time-scale", "10",
		"--rt-priority", "0", "--cpu", "1", "--results", "res", "x.yaml"}); err != nil {
		t.Fatal(err)
	}
	set := guestFlags(host, "tb00000a", "/abs/res")
	args := umlArgs(fs, set, "/abs/x.yaml")
	if args[0] != "run" {
		t.Fatalf("args %q: want the run verb first", args)
	}
	var guest runFlags
	gfs := runFlagSet(&guest, io.Discard)
	if err := gfs.Parse(args[1:]); err != nil {
		t.Fatalf("the guest's harness cannot parse %q: %v", args, err)
	}
	want := host
	want.impair, want.runID, want.results, want.noAnalyze, want.cpu = runner.ImpairKernel, "tb00000a", "/abs/res", true, -1
	want.cpuLatency = "off" // the host holds the bound for the instance
	if guest != want {
		t.Errorf("guest flags %+v, want %+v (from %q)", guest, want, args)
	}
	if gfs.NArg() != 1 || gfs.Arg(0) != "/abs/x.yaml" {
		t.Errorf("guest arguments %q, want the experiment's absolute path", gfs.Args())
	}
}
