// Package ctrtest holds what the tests of several packages that use the
// Docker engine share.
package ctrtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	once   sync.Once
	held   *os.File
	waited time.Duration
	err    error
)

// Serialize makes the calling test process the only one using Docker
// until it exits. go test runs packages in parallel processes, and the
// tests compare the engine's whole state (docker ps -a, network ls,
// images) before and after a run: another package's containers appearing
// meanwhile would read as a leak. The lock is an flock on a file in the
// temporary directory, taken once per process and released by the kernel
// when the process exits, however it exits.
func Serialize(t testing.TB) {
	t.Helper()
	once.Do(func() {
		var f *os.File
		f, err = os.OpenFile(filepath.Join(os.TempDir(), "tokenbed-docker-tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return
		}
		start := time.Now()
		if err = unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return
		}
		held, waited = f, time.Since(start)
	})
	if err != nil {
		t.Fatalf("ctrtest: lock for Docker tests: %v", err)
	}
	if waited > time.Second {
		t.Logf("ctrtest: waited %v for another test process using Docker", waited.Round(time.Millisecond))
	}
}
