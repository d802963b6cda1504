package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"tokenbed/experiments"
	"tokenbed/harness/runner"
	"tokenbed/netem"
)

// impairValues are --impair's values and what each names, in the order
// the help lists them: the flag's help, its check and chooseImpairment's
// errors read this list.
var impairValues = []struct{ name, about string }{
	{runner.ImpairAuto, ""},
	{runner.ImpairKernel, "host sch_netem"},
	{runner.ImpairUserspace, "netem/userspace engine"},
	{runner.ImpairUML, "whole run in User Mode Linux"},
	{runner.ImpairNone, ""},
}

// impairUsage is --impair's help: the values, each with what it names.
func impairUsage() string {
	var parts []string
	for _, v := range impairValues {
		if v.about != "" {
			parts = append(parts, v.name+" ("+v.about+")")
		} else {
			parts = append(parts, v.name)
		}
	}
	return strings.Join(parts, ", ")
}

// checkImpair says what is wrong with --impair want, or "".
func checkImpair(want string) string {
	var names []string
	for _, v := range impairValues {
		if v.name == want {
			return ""
		}
		names = append(names, v.name)
	}
	return fmt.Sprintf("--impair %q: want %s or %s", want, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// impairRequest is what the impairment path is chosen from.
type impairRequest struct {
	want string // --impair
	// containers is the container backend: its agents share the host's
	// kernel (kernel netem works where the host has sch_netem, a tree on
	// each pod's host-side veth, see ctrbackend.IngressPort; where it
	// lacks it, the userspace engine attaches a TUN relay inside each
	// pod's namespace, which the pod holder owns for the whole run, so
	// the engine survives agent crashes and restarts), and User Mode
	// Linux cannot host Docker.
	containers bool
	// need names the first thing in the experiment that needs an
	// impairment engine (needsImpairment), "" when nothing does.
	need string
	// checkKernel is the netem pre-flight (netem.CheckKernel), which
	// the caller has registered: it makes a scratch namespace.
	checkKernel func() error
}

// chooseImpairment resolves --impair. auto takes the host kernel's netem
// when it has it, then the userspace engine; otherwise a netns run goes
// whole into User Mode Linux, whose kernel has it. A profile is never
// silently left unapplied: nothing that needs impairment runs without it.
func chooseImpairment(q impairRequest) (path, why string, err error) {
	if msg := checkImpair(q.want); msg != "" {
		return "", "", errors.New(msg)
	}
	if q.want != runner.ImpairAuto {
		if q.containers {
			if err := q.containerForced(); err != nil {
				return "", "", err
			}
		}
		return q.want, "forced by --impair " + q.want, nil
	}
	if q.containers && q.need == "" {
		return runner.ImpairNone, "the experiment has no profiles, outages or profile changes: nothing to impair", nil
	}
	kernelWhy, userspaceWhere := "the host kernel has sch_netem", ""
	if q.containers {
		kernelWhy, userspaceWhere = kernelWhy+" (containers share it)", " inside each container's namespace"
	}
	cerr := q.checkKernel()
	if cerr == nil {
		return runner.ImpairKernel, kernelWhy, nil
	}
	if !errors.Is(cerr, netem.ErrNoNetem) {
		return "", "", fmt.Errorf("netem pre-flight: %w", cerr)
	}
	if userspaceAvailable() {
		return runner.ImpairUserspace, "the host kernel lacks sch_netem (" + cerr.Error() + "); using the userspace engine" + userspaceWhere, nil
	}
	if q.containers {
		return "", "", q.noKernel(cerr)
	}
	if err := umlAvailable(); err != nil {
		return "", "", fmt.Errorf("the host kernel lacks sch_netem (%v) and User Mode Linux is not usable (%v): install it with make deps, or run with --impair none on an experiment without profiles", cerr, err)
	}
	return runner.ImpairUML, "the host kernel lacks sch_netem (" + cerr.Error() + "); running the whole experiment inside User Mode Linux, whose kernel has it", nil
}

// containerForced checks a forced path for the container backend before
// anything is built: the images and containers take a while.
func (q impairRequest) containerForced() error {
	switch q.want {
	case runner.ImpairKernel:
		if cerr := q.checkKernel(); cerr != nil {
			if errors.Is(cerr, netem.ErrNoNetem) {
				return fmt.Errorf("--impair kernel: %w", q.noKernel(cerr))
			}
			return fmt.Errorf("--impair kernel: netem pre-flight: %w", cerr)
		}
	case runner.ImpairNone:
		if q.need != "" {
			return fmt.Errorf("--impair none, but %s: refusing to run without the impairment the experiment asks for", q.need)
		}
	case runner.ImpairUML:
		return errors.New("--impair uml runs the whole experiment inside User Mode Linux, where no Docker engine runs: use --backend netns --impair uml")
	case runner.ImpairUserspace:
		if !userspaceAvailable() {
			return errors.New("--impair userspace: /dev/net/tun is not usable here (load the tun module), so the userspace engine cannot run")
		}
	}
	return nil
}

// noKernel is why containers cannot be impaired here.
func (q impairRequest) noKernel(cerr error) error {
	what := "the experiment has no profiles, so run it with --impair none"
	if q.need != "" {
		what = "the experiment needs impairment (" + q.need + ")"
	}
	return fmt.Errorf("the host kernel lacks sch_netem (%v), containers share the host's kernel, and the userspace engine cannot run here (no /dev/net/tun); %s, or use --backend netns --impair uml (User Mode Linux has netem)", cerr, what)
}

// needsImpairment names the first thing in e that needs an impairment
// engine (a direction's profile, or a schedule step that changes one or
// makes an outage or a partition), or "" when nothing does.
func needsImpairment(e *experiments.Experiment) string {
	for _, d := range e.Directions {
		if d.Text != "" {
			return fmt.Sprintf("direction %s has profile %q", d.Key(), d.Text)
		}
	}
	for _, s := range e.Schedule {
		if s.Action == experiments.ActProfile || s.Action == experiments.ActOutage || s.Action == experiments.ActPartition {
			return fmt.Sprintf("schedule step %d is a %s", s.Index, s.Action)
		}
	}
	return ""
}

// userspaceAvailable reports whether the userspace engine can run here:
// it needs TUN devices.
func userspaceAvailable() bool {
	_, err := os.Stat("/dev/net/tun")
	return err == nil
}
