// Package umltest runs a Go test inside a User Mode Linux guest when it
// needs kernel features the host lacks (sch_netem on this project's build
// machine). At the top of such a test:
//
//	func TestNetemDelay(t *testing.T) {
//		if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem"}}) {
//			return // the test ran inside UML; its result is already reported
//		}
//		// The body: inside the guest, or on a host where RunOnHost holds.
//	}
//
// On the host, Reexec boots a guest that runs this same test binary,
// restricted to exactly this test, with the same working directory and
// environment plus the guest marker (uml.GuestEnv). Inside the guest Reexec
// sees the marker and returns false, so the body runs there. The guest's
// output streams into t.Log; a guest failure fails the test, a guest skip
// skips it.
//
// Inside the guest GOMAXPROCS is 1, every system call costs 15–60 µs and a
// fork/exec 10–13 ms: deadlines in guest tests must allow for that. Test
// binaries built with -race cannot run in a guest: ThreadSanitizer's shadow
// memory does not fit a UML process's address space.
package umltest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tokenbed/internal/testenv"
	"tokenbed/internal/uml"
)

// Options configure Reexec.
type Options struct {
	// Modules are kernel modules the guest loads before the test runs,
	// e.g. "sch_netem".
	Modules []string
	// MemMB is the guest's memory; 0 means uml's default (512).
	MemMB int
	// Timeout bounds the guest run, boot included. 0 means 5 minutes or
	// what remains of the test binary's -test.timeout, whichever is
	// shorter. The guest test gets its own -test.timeout a little shorter,
	// so a hung guest test prints its goroutines before the guest is
	// killed.
	Timeout time.Duration
	// Env is added to the environment the guest test inherits.
	Env []string
	// RunOnHost, if set and true, makes Reexec return false at once: the
	// test runs directly on the host, e.g. when the host kernel has the
	// module it needs (see HostHasModule).
	RunOnHost func() bool
}

// Reexec runs the calling test inside a UML guest and reports whether it
// did. It returns false inside the guest, and on the host when
// opt.RunOnHost holds; the caller then runs the test body. It returns true
// after the guest run, whose outcome is already the test's: the caller
// returns.
//
// Without a usable UML, Reexec fails the test when running as root (`make
// deps` installs UML, so its absence is a broken setup) and skips it with the
// reason otherwise.
func Reexec(t testing.TB, opt Options) bool {
	t.Helper()
	if uml.InGuest() {
		return false
	}
	if opt.RunOnHost != nil && opt.RunOnHost() {
		t.Logf("umltest: running %s on the host: RunOnHost holds", t.Name())
		return false
	}
	testenv.RequireUML(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("umltest: locating the test binary: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("umltest: working directory: %v", err)
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
		if d, ok := deadline(t); ok {
			// Leave the host time to report before its own deadline.
			timeout = min(timeout, time.Until(d)-5*time.Second)
		}
	}
	if timeout <= 0 {
		t.Fatalf("umltest: no time left before the test binary's deadline to boot UML")
	}
	args := []string{exe,
		"-test.run=" + RunPattern(t.Name()),
		"-test.v", "-test.count=1",
		"-test.timeout=" + guestTimeout(timeout).String(),
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	env := append(os.Environ(), opt.Env...)

	out := &lineLogger{t: t, prefix: "guest| "}
	cpu, release := takeCPU()
	defer release()
	res, err := uml.Run(context.Background(), uml.Job{
		Argv:    args,
		Env:     env,
		Dir:     wd,
		Modules: opt.Modules,
		MemMB:   opt.MemMB,
		CPU:     cpu,
		Timeout: timeout,
		Stdout:  out,
		Stderr:  out,
		Logger:  slog.New(slog.NewTextHandler(&lineLogger{t: t, prefix: "umltest: "}, &slog.HandlerOptions{ReplaceAttr: dropTime})),
	})
	out.flush()
	if err != nil {
		t.Fatalf("umltest: running %s inside UML: %v", t.Name(), err)
	}
	v := verdictOf(out.text(), t.Name())
	switch {
	case v.failed || !res.Success():
		hint := ""
		if strings.Contains(out.text(), "ThreadSanitizer failed to allocate") {
			// TSan maps its shadow memory at fixed high addresses, which
			// a UML guest process cannot have.
			hint = "; test binaries built with -race cannot run inside UML"
		}
		t.Fatalf("umltest: %s FAILED inside UML (%s)%s; the guest's output is above", t.Name(), res, hint)
	case v.passed:
		t.Logf("umltest: %s passed inside UML (kernel %s, boot %v, test %v)", t.Name(), res.KernelVersion, res.BootDuration.Round(time.Millisecond), res.Duration.Round(time.Millisecond))
	case v.skipped:
		t.Skipf("umltest: %s skipped inside UML: %s", t.Name(), v.skipReason)
	default:
		t.Fatalf("umltest: the guest ran no test named %s (-test.run=%s); its output is above", t.Name(), RunPattern(t.Name()))
	}
	return true
}

// dropTime leaves the time out of log lines: t.Log output is timed anyway.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// deadline is testing.T's Deadline for the TB kinds that have it.
func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// guestTimeout is the guest test's -test.timeout: shorter than the host's
// limit by the boot time and a margin, so the guest's own timeout panic
// (with its goroutine dump) comes first.
func guestTimeout(host time.Duration) time.Duration {
	if host > 20*time.Second {
		return host - 10*time.Second
	}
	return host * 3 / 4
}

// RunPattern is a -test.run pattern matching exactly the test or subtest
// with this full name ("TestX/sub/case"): the pattern is split at '/'
// and each level matched separately, so each level is anchored and quoted.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

type verdict struct {
	passed, failed, skipped bool
	skipReason              string
}

// verdictOf reads the -test.v output of the guest for the named test.
func verdictOf(out, name string) verdict {
	var v verdict
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "--- PASS: "+name+" ("):
			v.passed = true
		case strings.HasPrefix(l, "--- FAIL: "+name+" ("):
			v.failed = true
		case strings.HasPrefix(l, "--- SKIP: "+name+" ("):
			v.skipped = true
			// With -test.v the skip message is streamed before the
			// verdict line: the test's last log line.
			for j := i - 1; j >= 0; j-- {
				if p := strings.TrimSpace(lines[j]); p != "" {
					if !strings.HasPrefix(p, "=== ") {
						v.skipReason = p
					}
					break
				}
			}
		}
	}
	return v
}

// lineLogger writes each complete line to t.Log.
type lineLogger struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    []byte
	all    bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(l.prefix + string(l.buf))
		l.buf = nil
	}
}

func (l *lineLogger) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

var _ io.Writer = (*lineLogger)(nil)

// CPUs for guests of this test binary: one guest per CPU at a time. The
// order starts at a CPU chosen by the process ID, so that test binaries of
// different packages (which `go test ./...` runs at once) start on
// different CPUs.
var (
	cpusOnce sync.Once
	cpus     chan int
)

func takeCPU() (int, func()) {
	cpusOnce.Do(func() {
		var set unix.CPUSet
		var list []int
		if unix.SchedGetaffinity(0, &set) == nil {
			for c := 0; len(list) < set.Count(); c++ {
				if set.IsSet(c) {
					list = append(list, c)
				}
			}
		}
		if len(list) == 0 {
			list = []int{-1} // unpinned
		}
		cpus = make(chan int, len(list))
		off := os.Getpid() % len(list)
		for i := range list {
			cpus <- list[(off+i)%len(list)]
		}
	})
	c := <-cpus
	return c, func() { cpus <- c }
}

// HostHasModule returns a RunOnHost predicate: true when the host kernel
// has the module loaded, built in, or installed under
// /lib/modules/$(uname -r). Equivalent to: `modinfo NAME`.
func HostHasModule(name string) func() bool {
	return func() bool {
		name := strings.ReplaceAll(name, "-", "_")
		if _, err := os.Stat(filepath.Join("/sys/module", name)); err == nil {
			return true
		}
		var u unix.Utsname
		if unix.Uname(&u) != nil {
			return false
		}
		dir := filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
		for _, f := range []string{"modules.builtin", "modules.dep"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				p, _, _ := strings.Cut(sc.Text(), ":")
				b := filepath.Base(p)
				if i := strings.Index(b, ".ko"); i >= 0 {
					b = b[:i]
				}
				if strings.ReplaceAll(b, "-", "_") == name {
					return true
				}
			}
		}
		return false
	}
}

// InGuest reports whether this test process runs inside a UML guest started
// by Reexec (or any uml.Run).
func InGuest() bool { return uml.InGuest() }
