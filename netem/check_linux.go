package netem

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netns"

	"tokenbed/internal/nsenter"
)

// CheckKernel tries a netem qdisc in a scratch network namespace named
// RUNID-netemcheck (created, then removed in every case) and reports
// whether this kernel can run netem. On a kernel without sch_netem the
// error satisfies errors.Is(err, ErrNoNetem) and names
// CONFIG_NET_SCH_NETEM. It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
//
// Equivalent to: `ip netns add RUNID-netemcheck && ip netns exec
// RUNID-netemcheck tc qdisc add dev lo root netem delay 1ms; ip netns del
// RUNID-netemcheck`.
func CheckKernel(runID string) error {
	if runID == "" {
		return errors.New("netem: CheckKernel needs a run ID to name its scratch namespace")
	}
	return inScratchNS(KernelCheckNS(runID), "kernel check", func(ns netns.NsHandle) error {
		q, err := Add(Target{NS: ns, Link: "lo"}, Profile{Delay: 1e6})
		if err != nil {
			return err
		}
		return q.Delete()
	})
}

// KernelCheckNS and OwnCheckNS name the scratch namespaces of CheckKernel
// and CheckOwnDevice, so that a caller keeping a registry of what it
// creates (the harness, for harness clean after a kill -9) can list them
// first.
func KernelCheckNS(runID string) string { return runID + "-netemcheck" }

// OwnCheckNS: see KernelCheckNS.
func OwnCheckNS(runID string) string { return runID + "-owncheck" }

// inScratchNS runs f in a new network namespace called name, removed in
// every case; errors say which check (what) failed.
func inScratchNS(name, what string, f func(netns.NsHandle) error) (err error) {
	ns, err := nsenter.NewNamed(name)
	if err != nil {
		return fmt.Errorf("netem: %s: %w", what, err)
	}
	defer func() {
		ns.Close()
		if derr := netns.DeleteNamed(name); derr != nil && err == nil {
			err = fmt.Errorf("netem: %s: removing namespace %s: %w", what, name, derr)
		}
	}()
	if err := f(ns); err != nil {
		return fmt.Errorf("netem: %s: %w", what, err)
	}
	return nil
}
