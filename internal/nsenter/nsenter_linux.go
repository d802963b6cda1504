// Package nsenter runs code inside network namespaces and creates named
// ones, on locked OS threads: a Go thread switched into a namespace must
// not run anything else, and one that cannot switch back must never be
// reused (it stays locked, so the runtime retires it with its goroutine).
package nsenter

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs f on a locked OS thread switched into ns, then switches back.
//
// Equivalent to: `ip netns exec NAME ...` for the duration of f.
func Do(ns netns.NsHandle, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		runtime.LockOSThread() // stuck in ns: never unlock it
		return fmt.Errorf("returning to the original namespace: %w", err)
	}
	return ferr
}

// NewNamed creates /run/netns/NAME and refuses a name that exists (it is
// someone else's). netns.NewNamed moves the calling thread into the new
// namespace, so this runs on a locked thread and moves back.
//
// Equivalent to: `ip netns add NAME`.
func NewNamed(name string) (netns.NsHandle, error) {
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
		runtime.LockOSThread() // stuck in the new namespace: never unlock it
		if err == nil {
			ns.Close()
			netns.DeleteNamed(name)
		}
		return netns.None(), fmt.Errorf("returning to the original namespace: %w", serr)
	}
	return ns, err
}
