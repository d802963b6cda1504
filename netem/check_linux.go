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
func CheckKernel(runID string) (err error) {
	if runID == "" {
		return errors.New("netem: CheckKernel needs a run ID to name its scratch namespace")
	}
	name := runID + "-netemcheck"
	ns, err := nsenter.NewNamed(name)
	if err != nil {
		return fmt.Errorf("netem: kernel check: %w", err)
	}
	defer func() {
		ns.Close()
		if derr := netns.DeleteNamed(name); derr != nil && err == nil {
			err = fmt.Errorf("netem: kernel check: removing namespace %s: %w", name, derr)
		}
	}()
	q, err := Add(Target{NS: ns, Link: "lo"}, Profile{Delay: 1e6})
	if err != nil {
		return fmt.Errorf("netem: kernel check: %w", err)
	}
	return q.Delete()
}
