package netem

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
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
	ns, err := newNamedNS(name)
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

// newNamedNS creates /run/netns/NAME. netns.NewNamed moves the calling
// thread into the new namespace, so this runs on a locked thread and moves
// back before unlocking.
func newNamedNS(name string) (netns.NsHandle, error) {
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		return netns.None(), fmt.Errorf("namespace %s already exists; not touching it", name)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return netns.None(), err
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		// The thread is stuck in the wrong namespace: never unlock it, so
		// the runtime retires it instead of reusing it.
		runtime.LockOSThread()
		if err == nil {
			ns.Close()
			netns.DeleteNamed(name)
		}
		return netns.None(), fmt.Errorf("returning to the original namespace: %w", serr)
	}
	return ns, err
}
