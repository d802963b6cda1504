package main

import (
	"errors"
	"fmt"
	"os"

	"tokenbed/harness/runner"
	"tokenbed/netem"
)

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

// userspaceAvailable reports whether the userspace engine can run here:
// it needs TUN devices.
func userspaceAvailable() bool {
	_, err := os.Stat("/dev/net/tun")
	return err == nil
}
