package nsenter_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
)

// scratch creates a named namespace for one test and removes it after.
func scratch(t *testing.T) netns.NsHandle {
	t.Helper()
	name := fmt.Sprintf("tbnsenter-%d-%s", os.Getpid(), t.Name())
	ns, err := nsenter.NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close(); netns.DeleteNamed(name) })
	return ns
}

// here is the calling thread's namespace, as its inode.
func here(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// dropSysAdmin removes CAP_SYS_ADMIN from the calling thread (capabilities
// are per thread), so its setns back to the original namespace fails: the
// one case the failure rule is for.
func dropSysAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
	return unix.Capset(&hdr, &data[0])
}

// crippledThreads counts, over many goroutines locked at once (so on as
// many distinct threads), those whose thread lacks CAP_SYS_ADMIN.
func crippledThreads(t *testing.T) int {
	t.Helper()
	const n = 64
	res := make(chan bool, n)
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b, _ := os.ReadFile("/proc/thread-self/status")
			crippled := false
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
					var caps uint64
					fmt.Sscanf(strings.TrimSpace(v), "%x", &caps)
					crippled = caps&(1<<unix.CAP_SYS_ADMIN) == 0
				}
			}
			res <- crippled
			<-release
		}()
	}
	bad := 0
	for i := 0; i < n; i++ {
		if <-res {
			bad++
		}
	}
	close(release)
	return bad
}

func TestDoEntersAndReturns(t *testing.T) {
	testenv.RequireRoot(t, "creates a network namespace")
	ns := scratch(t)
	before := here(t)
	var inside string
	if err := nsenter.Do(ns, func() error { inside = here(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside == before {
		t.Errorf("f ran in the caller's namespace %s", inside)
	}
	if after := here(t); after != before {
		t.Errorf("caller's namespace %s after Do, want %s", after, before)
	}
}

// The failure rule: a thread that cannot switch back is retired, and the
// caller neither runs on it nor stays in the namespace.
func TestDoRetiresStuckThread(t *testing.T) {
	testenv.RequireRoot(t, "creates a network namespace and drops a capability")
	ns := scratch(t)
	before := here(t)
	err := nsenter.Do(ns, dropSysAdmin)
	if after := here(t); after != before {
		t.Errorf("caller left in namespace %s, want %s", after, before)
	}
	if n := crippledThreads(t); n != 0 {
		t.Errorf("%d threads without CAP_SYS_ADMIN went back to the scheduler", n)
	}
	if err == nil || !strings.Contains(err.Error(), "retired") {
		t.Errorf("Do on a thread that cannot switch back: %v, want the failure rule's error", err)
	}
}

func TestThreadKeepsOneThreadAndReplacesStuckOne(t *testing.T) {
	testenv.RequireRoot(t, "creates a network namespace and drops a capability")
	ns := scratch(t)
	var th nsenter.Thread
	tid := func() (id int) {
		if err := th.Do(ns, func() error { id = unix.Gettid(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := tid()
	if again := tid(); again != first {
		t.Errorf("second call on thread %d, want the same thread %d", again, first)
	}
	if err := th.Do(ns, dropSysAdmin); err == nil || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("Thread.Do that cannot switch back: %v, want the failure rule's error", err)
	}
	if next := tid(); next == first {
		t.Errorf("after the stuck call, the stuck thread %d ran again", next)
	}
	if n := crippledThreads(t); n != 0 {
		t.Errorf("%d threads without CAP_SYS_ADMIN went back to the scheduler", n)
	}
}
