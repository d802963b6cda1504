// Package nsenter is the project's one way into a network namespace: it
// runs code inside namespaces and creates named ones, on locked OS threads.
//
// # Why threads
//
// A network namespace belongs to an OS thread (setns(2)), not to a
// goroutine or a process. A goroutine that switches its thread must keep
// it locked (runtime.LockOSThread) until it has switched back, or the
// scheduler would run other goroutines in the wrong namespace. Sockets and
// devices opened while in a namespace stay bound to it afterwards.
//
// # The failure rule
//
// A thread that cannot switch back to its original namespace runs nothing
// else, ever: it is never returned to the scheduler. Do and NewNamed run
// on a goroutine of their own and let it exit still locked, which makes
// the runtime terminate the thread (documented for LockOSThread); a
// Thread parks its thread for the life of the process instead, because
// children forked from it are bound to it (Pdeathsig fires when the
// forking thread exits). Either way the caller gets an error and its own
// goroutine never ran in the namespace. Switching back fails only when f
// changed the thread itself (dropped CAP_SYS_ADMIN, say); the rule keeps
// that from leaking into unrelated goroutines.
package nsenter

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
)

// errStuck is the failure rule's error.
func errStuck(err error) error {
	return fmt.Errorf("returning to the original namespace: %w (the thread is retired)", err)
}

// enter switches the locked calling thread into ns, runs f and switches
// back. stuck reports that the thread could not switch back: the caller
// must then never unlock it.
func enter(ns netns.NsHandle, f func() error) (stuck bool, err error) {
	orig, err := netns.Get()
	if err != nil {
		return false, fmt.Errorf("current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return false, err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		return true, errStuck(err)
	}
	return false, ferr
}

// onThread runs g on a fresh goroutine locked to its OS thread and waits
// for it. g reports stuck when the thread must not be reused: the
// goroutine then exits locked and the runtime terminates the thread.
func onThread(g func() (stuck bool, err error)) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		stuck, err := g()
		if !stuck {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// Do runs f on a locked OS thread switched into ns, then switches back.
// f runs on a goroutine of its own; Do waits for it.
//
// Equivalent to: `ip netns exec NAME ...` for the duration of f.
func Do(ns netns.NsHandle, f func() error) error {
	return onThread(func() (bool, error) { return enter(ns, f) })
}

// NewNamed creates /run/netns/NAME and refuses a name that exists (it is
// someone else's). netns.NewNamed moves the calling thread into the new
// namespace, so this runs on a locked thread of its own and moves back.
//
// Equivalent to: `ip netns add NAME`.
func NewNamed(name string) (netns.NsHandle, error) {
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		return netns.None(), fmt.Errorf("namespace %s already exists; not touching it", name)
	}
	ns := netns.None()
	err := onThread(func() (bool, error) {
		orig, err := netns.Get()
		if err != nil {
			return false, fmt.Errorf("current namespace: %w", err)
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			if err == nil {
				h.Close()
				netns.DeleteNamed(name)
			}
			return true, errStuck(serr)
		}
		if err != nil {
			return false, fmt.Errorf("create namespace %s: %w", name, err)
		}
		ns = h
		return false, nil
	})
	return ns, err
}

// Thread is one OS thread, locked for the life of the process, that runs
// functions in namespaces on request. It is for work whose effects are
// bound to the thread that did it: Linux sends a child's parent-death
// signal (Pdeathsig) when the thread that forked it exits, so a process
// forked in a namespace must be forked from a thread that outlives it.
// A socket or TUN device needs none: it stays bound to the namespace it
// was opened in, so Do serves the capture and the userspace engine.
//
// The zero value is ready to use. A thread that cannot switch back parks
// for good (it keeps its children alive and runs nothing else); the next
// call starts a new thread.
type Thread struct {
	mu   sync.Mutex
	reqs chan threadReq
}

type threadReq struct {
	ns   netns.NsHandle
	f    func() error
	done chan threadReply
}

type threadReply struct {
	err   error
	stuck bool
}

// Do runs f on t's thread switched into ns, then switches back.
func (t *Thread) Do(ns netns.NsHandle, f func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock() // one request at a time: the thread is serial anyway
	if t.reqs == nil {
		t.reqs = make(chan threadReq)
		go serve(t.reqs)
	}
	r := threadReq{ns: ns, f: f, done: make(chan threadReply, 1)}
	t.reqs <- r
	rep := <-r.done
	if rep.stuck {
		t.reqs = nil // that thread is parked: the next call starts another
	}
	return rep.err
}

// serve is a Thread's goroutine.
func serve(reqs chan threadReq) {
	runtime.LockOSThread() // never unlocked: see Thread
	for r := range reqs {
		stuck, err := enter(r.ns, r.f)
		r.done <- threadReply{err, stuck}
		if stuck {
			select {} // never returned to the scheduler, never exits
		}
	}
}
