package uml_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tokenbed/internal/testenv"
	"tokenbed/internal/uml"
)

// These tests boot real User Mode Linux guests (about 0.5 s each when the
// host is idle). They need no root, only UML; as root, UML must be there,
// since `make deps` installs it.
func requireUML(t testing.TB) { testenv.RequireUML(t) }

// logRecorder is a slog.Handler that keeps records and also shows them in
// the test log.
type logRecorder struct {
	t  testing.TB
	mu sync.Mutex
	rs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.rs = append(h.rs, r.Clone())
	h.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.t.Log(b.String())
	return nil
}

// booted returns the attributes of the "uml instance booted" records.
func (h *logRecorder) booted() []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.rs {
		if r.Message != "uml instance booted" {
			continue
		}
		m := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
		out = append(out, m)
	}
	return out
}

func newLogger(t testing.TB) (*slog.Logger, *logRecorder) {
	h := &logRecorder{t: t}
	return slog.New(h), h
}

// instanceProcs lists the host processes still running for a run: every
// process of an instance has the private directory on its command line.
func instanceProcs(t testing.TB, dir string) string {
	t.Helper()
	out, err := exec.Command("pgrep", "-a", "-f", regexpQuote(dir)).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return "" // none
	}
	if err != nil {
		t.Fatalf("pgrep: %v: %s", err, out)
	}
	return string(out)
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// assertGone checks that no process of the instance survived Run.
func assertGone(t testing.TB, res *uml.Result) {
	t.Helper()
	if res == nil || res.PID == 0 {
		t.Fatalf("no Result/PID to check")
	}
	if procs := instanceProcs(t, res.Dir); procs != "" {
		t.Errorf("processes of the instance survived Run:\n%s", procs)
	}
	if alive := groupMembers(t, res.PID); len(alive) > 0 {
		t.Errorf("processes of group %d still run after Run: %v", res.PID, alive)
	}
}

// groupMembers lists the processes of a process group that are not dead.
// Without a PID namespace, helpers of a linux.uml that died (a guest
// panic) are reparented to the host's init and stay zombies until it
// reaps them; they no longer run, so they do not count.
func groupMembers(t testing.TB, pgid int) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var alive []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 3 && f[2] == fmt.Sprint(pgid) && f[0] != "Z" && f[0] != "X" {
			alive = append(alive, strings.TrimSpace(s[:strings.LastIndexByte(s, ')')+1])+" state "+f[0])
		}
	}
	return alive
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestRunExitStatus(t *testing.T) {
	requireUML(t)
	cases := []struct {
		name   string
		script string
		code   int
		sig    syscall.Signal
		str    string
	}{
		{"exit 0", "exit 0", 0, 0, "exit status 0"},
		{"exit 3", "exit 3", 3, 0, "exit status 3"},
		{"killed by SIGKILL", "kill -KILL $$", -1, syscall.SIGKILL, "signal: killed"},
		{"killed by SIGTERM", "kill -TERM $$", -1, syscall.SIGTERM, "signal: terminated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg, _ := newLogger(t)
			res, err := uml.Run(context.Background(), uml.Job{Argv: sh(c.script), CPU: 0, Timeout: 60 * time.Second, Logger: lg})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			t.Logf("boot %v, job %v, total %v", res.BootDuration, res.Duration, res.Total)
			if res.Total > 10*time.Second {
				t.Logf("slow run; console:\n%s", res.Console)
			}
			if res.ExitCode != c.code || res.Signal != c.sig || res.String() != c.str {
				t.Errorf("got ExitCode %d Signal %v (%q), want %d %v (%q)", res.ExitCode, res.Signal, res.String(), c.code, c.sig, c.str)
			}
			if res.Success() != (c.code == 0) || res.Exited() != (c.sig == 0) {
				t.Errorf("Success %v Exited %v for %s", res.Success(), res.Exited(), res)
			}
			if res.BootDuration <= 0 || res.Duration <= 0 || res.Total < res.BootDuration+res.Duration {
				t.Errorf("durations: boot %v job %v total %v", res.BootDuration, res.Duration, res.Total)
			}
			if !strings.Contains(res.Console, "Run "+filepath.Join(res.Dir, "init")+" as init process") {
				t.Errorf("console does not show the init starting:\n%s", res.Console)
			}
			if _, err := os.Stat(res.Dir); !os.IsNotExist(err) {
				t.Errorf("private directory %s not removed: %v", res.Dir, err)
			}
			assertGone(t, res)
		})
	}
}

// lineWaiter is a writer that reports when a line with a given text has
// arrived.
type lineWaiter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newLineWaiter(want string) *lineWaiter {
	return &lineWaiter{want: want, seen: make(chan struct{})}
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The guest blocks until the host has seen its first line, so the test can
// only pass if output streams while the job runs. Afterwards the host reads
// a file the guest wrote.
func TestRunStreamsOutputAndSharesFiles(t *testing.T) {
	requireUML(t)
	shared := t.TempDir()
	goFile := filepath.Join(shared, "go")
	outFile := filepath.Join(shared, "written-in-guest")
	stdout := newLineWaiter("ready\n")
	var stderr bytes.Buffer
	script := fmt.Sprintf(`echo ready
while [ ! -e %[1]s ]; do sleep 0.05; done
echo "after go" >&2
pwd
echo "$TOKENBED_UML_GUEST $MYVAR" > %[2]s
`, goFile, outFile)
	go func() {
		select {
		case <-stdout.seen:
			if err := os.WriteFile(goFile, nil, 0o644); err != nil {
				t.Errorf("creating %s: %v", goFile, err)
			}
		case <-time.After(60 * time.Second):
		}
	}()
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh(script), Env: []string{"PATH=/usr/bin:/bin", "MYVAR=hello world"}, Dir: shared,
		Stdout: stdout, Stderr: &stderr, Timeout: 60 * time.Second, Logger: lg,
	})
	if err != nil {
		t.Fatalf("Run: %v (stdout %q)", err, stdout.String())
	}
	if !res.Success() {
		t.Fatalf("job: %s\nstdout %q\nstderr %q", res, stdout.String(), stderr.String())
	}
	if want := "ready\n" + shared + "\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "after go\n" {
		t.Errorf("stderr %q, want %q", stderr.String(), "after go\n")
	}
	got, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatalf("file written in the guest: %v", err)
	}
	if string(got) != "1 hello world\n" {
		t.Errorf("file written in the guest holds %q, want %q", got, "1 hello world\n")
	}
	assertGone(t, res)
}

// Same writer for stdout and stderr: one file in the guest, order kept.
func TestRunMergedOutputKeepsOrder(t *testing.T) {
	requireUML(t)
	var out bytes.Buffer
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh("echo 1; echo 2 >&2; echo 3; echo 4 >&2"), Stdout: &out, Stderr: &out, Timeout: 60 * time.Second, Logger: lg,
	})
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %v", res, err)
	}
	if out.String() != "1\n2\n3\n4\n" {
		t.Errorf("merged output %q, want %q", out.String(), "1\n2\n3\n4\n")
	}
}

func TestRunLoadsNetemAndTun(t *testing.T) {
	requireUML(t)
	var out bytes.Buffer
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh(`set -e
tc qdisc add dev lo root netem delay 1ms
tc qdisc show dev lo
test -c /dev/net/tun
ip tuntap add dev tbtun0 mode tun
ip -o link show dev tbtun0
grep -E '^(sch_netem|tun) ' /proc/modules | cut -d' ' -f1 | sort
`),
		Modules: []string{"sch_netem", "tun"},
		Stdout:  &out, Stderr: &out, Timeout: 60 * time.Second, Logger: lg,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Success() {
		t.Fatalf("job: %s\n%s", res, out.String())
	}
	for _, want := range []string{"qdisc netem", "delay 1ms", "tbtun0:", "sch_netem\ntun\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("guest output lacks %q:\n%s", want, out.String())
		}
	}
}

// Without Modules, /dev/net/tun does not exist in the guest although the
// host has it: /dev is the guest's own devtmpfs, not the host's /dev seen
// through hostfs. And the guest kernel autoloads sch_netem by itself through
// the init's modprobe helper.
func TestRunGuestHasOwnDevAndAutoloadsModules(t *testing.T) {
	requireUML(t)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("SKIP: the host has no /dev/net/tun to compare with: %v", err)
	}
	var out bytes.Buffer
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh(`if [ -e /dev/net/tun ]; then echo "tun present"; else echo "tun absent"; fi
grep ' /dev ' /proc/mounts
tc qdisc add dev lo root netem delay 1ms && tc qdisc show dev lo
`),
		Stdout: &out, Stderr: &out, Timeout: 60 * time.Second, Logger: lg,
	})
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %v\n%s", res, err, out.String())
	}
	for _, want := range []string{"tun absent\n", "devtmpfs /dev devtmpfs", "qdisc netem"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("guest output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunTimeoutKillsInstance(t *testing.T) {
	requireUML(t)
	stdout := newLineWaiter("sleeping\n")
	lg, _ := newLogger(t)
	start := time.Now()
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh("echo sleeping; exec sleep 600"), Stdout: stdout, Timeout: 8 * time.Second, Logger: lg,
	})
	if !errors.Is(err, uml.ErrTimeout) {
		t.Fatalf("Run returned %v, want ErrTimeout", err)
	}
	if !strings.Contains(stdout.String(), "sleeping") {
		t.Errorf("the job never started (stdout %q); the timeout did not hit a running job", stdout.String())
	}
	if res == nil {
		t.Fatal("no Result with the timeout error")
	}
	if res.Exited() || res.Signal != 0 {
		t.Errorf("a killed job reports %s", res)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("Run took %v to give up after an 8 s timeout", time.Since(start))
	}
	assertGone(t, res)
}

func TestRunCancelKillsProcessGroup(t *testing.T) {
	requireUML(t)
	stdout := newLineWaiter("ready\n")
	lg, rec := newLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	groupSize := make(chan int, 1)
	go func() {
		select {
		case <-stdout.seen:
		case <-time.After(60 * time.Second):
			cancel()
			return
		}
		// The instance is a group of host processes: main, helpers, stubs.
		n := 0
		if b := rec.booted(); len(b) == 1 {
			pid := b[0]["pid"].Int64()
			out, _ := exec.Command("pgrep", "-g", fmt.Sprint(pid)).Output()
			n = len(strings.Fields(string(out)))
		}
		groupSize <- n
		cancel()
	}()
	res, err := uml.Run(ctx, uml.Job{Argv: sh("echo ready; exec sleep 600"), Stdout: stdout, Timeout: 90 * time.Second, Logger: lg})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if n := <-groupSize; n < 3 {
		t.Errorf("the running instance had %d processes in its group; expected main, helpers and stubs", n)
	}
	assertGone(t, res)
}

func TestPoolRunsPinnedInstancesInParallel(t *testing.T) {
	requireUML(t)
	pool, err := uml.NewPool(0)
	if err != nil {
		t.Fatal(err)
	}
	cpus := pool.CPUs()
	if len(cpus) < 2 {
		t.Skipf("SKIP: this process may run on %d CPU(s) %v; two pinned instances need two", len(cpus), cpus)
	}
	shared := t.TempDir()
	lg, rec := newLogger(t)
	type out struct {
		res *uml.Result
		err error
	}
	outs := make(chan out, 2)
	for i := range 2 {
		// Each guest says it is up, then waits for the host's go-ahead:
		// both must be running at once for either to finish.
		script := fmt.Sprintf("touch %s/ready-%d; while [ ! -e %s/go ]; do sleep 0.05; done", shared, i, shared)
		go func() {
			res, err := pool.Run(context.Background(), uml.Job{Argv: sh(script), Timeout: 60 * time.Second, Logger: lg})
			outs <- out{res, err}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, e0 := os.Stat(filepath.Join(shared, "ready-0"))
		_, e1 := os.Stat(filepath.Join(shared, "ready-1"))
		if e0 == nil && e1 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two guests were never up at the same time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Both booted: check where the host pinned them.
	pinned := map[string]bool{}
	for _, b := range rec.booted() {
		pid := b["pid"].Int64()
		allowed := cpusAllowed(t, int(pid))
		if want := fmt.Sprint(b["cpu"].Any()); allowed != want {
			t.Errorf("instance %d: Cpus_allowed_list %q, logged cpu %s", pid, allowed, want)
		}
		pinned[allowed] = true
	}
	if len(pinned) != 2 {
		t.Errorf("two instances are pinned to CPUs %v, want two distinct CPUs", pinned)
	}
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 2 {
		o := <-outs
		if o.err != nil || !o.res.Success() {
			t.Fatalf("pool run: %v %v", o.res, o.err)
		}
		seen[o.res.CPU] = true
		assertGone(t, o.res)
	}
	if len(seen) != 2 {
		t.Errorf("results report CPUs %v, want two distinct", seen)
	}
}

func cpusAllowed(t testing.TB, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("instance %d: %v", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("instance %d: no Cpus_allowed_list", pid)
	return ""
}

func TestRunExecError(t *testing.T) {
	requireUML(t)
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{Argv: []string{"/nonexistent/tokenbed-prog"}, Timeout: 60 * time.Second, Logger: lg})
	if !errors.Is(err, uml.ErrExec) || !strings.Contains(err.Error(), "No such file or directory") {
		t.Fatalf("Run returned %v, want ErrExec naming the missing file", err)
	}
	assertGone(t, res)
}

func TestRunGuestPanic(t *testing.T) {
	requireUML(t)
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{Argv: sh("echo c > /proc/sysrq-trigger; sleep 600"), Timeout: 60 * time.Second, Logger: lg})
	if !errors.Is(err, uml.ErrGuestPanic) {
		t.Fatalf("Run returned %v, want ErrGuestPanic", err)
	}
	if !strings.Contains(err.Error(), "sysrq triggered crash") {
		t.Errorf("the error does not quote the panic reason: %v", err)
	}
	if !strings.Contains(res.Console, "Kernel panic") {
		t.Errorf("Result.Console lacks the panic")
	}
	assertGone(t, res)
}

// A module that modprobe fails to load in the guest is named in the error:
// a module tree whose "bogus" module is not an ELF file.
func TestRunModuleLoadFailure(t *testing.T) {
	requireUML(t)
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"modules.dep":     "kernel/bogus.ko:\n",
		"modules.builtin": "",
		"kernel/bogus.ko": "this is not an ELF object\n",
	} {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{Argv: []string{"true"}, Modules: []string{"bogus"}, ModulesDir: tree, Timeout: 60 * time.Second, Logger: lg})
	var me *uml.ModuleError
	if !errors.As(err, &me) || me.Module != "bogus" {
		t.Fatalf("Run returned %v, want a ModuleError for bogus", err)
	}
	if !strings.Contains(me.Detail, "failed to load in the guest") || !strings.Contains(me.Detail, "bogus") {
		t.Errorf("ModuleError detail lacks modprobe's message: %q", me.Detail)
	}
	assertGone(t, res)
}

// Errors found before booting name the field or the missing piece.
func TestRunRejectsBadJobs(t *testing.T) {
	requireUML(t)
	cases := []struct {
		name string
		job  uml.Job
		want string
		is   error
	}{
		{"no argv", uml.Job{}, "Job.Argv", nil},
		{"NUL in argv", uml.Job{Argv: []string{"a\x00b"}}, "Job.Argv[0]", nil},
		{"env without =", uml.Job{Argv: []string{"true"}, Env: []string{"PATH=/bin", "oops"}}, "Job.Env[1]", nil},
		{"relative dir", uml.Job{Argv: []string{"true"}, Dir: "rel"}, "Job.Dir", nil},
		{"missing dir", uml.Job{Argv: []string{"true"}, Dir: "/nonexistent/dir"}, "Job.Dir", nil},
		{"bad module name", uml.Job{Argv: []string{"true"}, Modules: []string{"sch netem"}}, "Job.Modules[0]", nil},
		{"unknown module", uml.Job{Argv: []string{"true"}, Modules: []string{"sch_netem", "no_such_module"}}, `"no_such_module": not in the UML module tree`, nil},
		{"tiny memory", uml.Job{Argv: []string{"true"}, MemMB: 8}, "Job.MemMB", nil},
		{"CPU outside the set", uml.Job{Argv: []string{"true"}, CPU: runtime.NumCPU() + 63}, "Job.CPU", nil},
		{"CPU below -1", uml.Job{Argv: []string{"true"}, CPU: -2}, "Job.CPU", nil},
		{"negative timeout", uml.Job{Argv: []string{"true"}, Timeout: -time.Second}, "Job.Timeout", nil},
		{"kernel missing", uml.Job{Argv: []string{"true"}, Kernel: "/nonexistent/linux.uml"}, "make deps", uml.ErrNotInstalled},
		{"module tree missing", uml.Job{Argv: []string{"true"}, ModulesDir: "/nonexistent/modules"}, "modules.dep", uml.ErrNoModules},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := uml.Run(context.Background(), c.job)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("errors.Is(%v, %v) is false", err, c.is)
			}
			if res != nil {
				t.Errorf("a job rejected before booting returned a Result: %+v", res)
			}
		})
	}
}

func TestPoolRejectsMoreInstancesThanCPUs(t *testing.T) {
	if _, err := uml.NewPool(runtime.NumCPU() + 1); err == nil || !strings.Contains(err.Error(), "CPUs") {
		t.Fatalf("NewPool(NumCPU+1): %v, want an error about CPUs", err)
	}
	p, err := uml.NewPool(1)
	if err != nil || len(p.CPUs()) != 1 {
		t.Fatalf("NewPool(1): %v %v", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Run(ctx, uml.Job{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Pool.Run with a canceled context: %v", err)
	}
}

// RemoveStale removes what a crashed caller left, and nothing a live
// instance, a KeepDir run or a starting run uses.
func TestRemoveStale(t *testing.T) {
	requireUML(t)
	tmp := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(name string, keep bool) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if keep {
			if err := os.WriteFile(filepath.Join(d, "keep"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	stale := mk("tokenbed-uml-stale", false)
	kept := mk("tokenbed-uml-kept", true)
	other := mk("unrelated", false)

	// A live instance whose private directory is in tmp, too.
	goFile := filepath.Join(tmp, "go")
	stdout := newLineWaiter("up\n")
	lg, _ := newLogger(t)
	done := make(chan *uml.Result, 1)
	go func() {
		res, err := uml.Run(context.Background(), uml.Job{
			Argv:    sh("echo up; while [ ! -e " + goFile + " ]; do sleep 0.05; done"),
			TempDir: tmp, Stdout: stdout, Timeout: 60 * time.Second, Logger: lg,
		})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	select {
	case <-stdout.seen:
	case <-time.After(60 * time.Second):
		t.Fatal("the live instance never came up")
	}
	live, _ := filepath.Glob(filepath.Join(tmp, "tokenbed-uml-[0-9]*"))
	if len(live) != 1 {
		t.Fatalf("live private directories %v, want one", live)
	}
	// minAge 0: only the process scan protects the live directory.
	removed, err := uml.RemoveStale(tmp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Errorf("removed %v, want only %s", removed, stale)
	}
	for _, d := range []string{kept, other, live[0]} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || !res.Success() {
		t.Fatalf("live instance: %v", res)
	}
}

// asNobody copies this test binary where user nobody can run it and returns
// a command running it as nobody, or skips.
func asNobody(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("SKIP: setpriv (util-linux) is needed to run as nobody: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tokenbed-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(exe))
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	return cmd
}

// As a user other than root there is no PID namespace: Run kills the
// instance's process group instead, and a panicking guest dies of SIGABRT.
// The tests of those paths run again as nobody.
func TestRunWithoutRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: the other tests already run this path")
	}
	requireUML(t)
	tests := []string{"TestRunExitStatus", "TestRunCancelKillsProcessGroup", "TestRunGuestPanic", "TestRunStreamsOutputAndSharesFiles"}
	cmd := asNobody(t, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests failed as nobody: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" (") {
			t.Errorf("%s did not pass as nobody:\n%s", name, out)
		}
	}
}

// An instance that does not power off after the job ended is killed, and
// the job's recorded status still comes back. The job makes the guest's
// poweroff hang by bind-mounting a sleeping script over it (a guest mount:
// the host's poweroff is untouched).
func TestRunKillsStalledShutdown(t *testing.T) {
	requireUML(t)
	poweroff, err := exec.LookPath("poweroff")
	if err != nil {
		t.Skipf("SKIP: no poweroff on the host to shadow: %v", err)
	}
	hang := filepath.Join(t.TempDir(), "hang")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lg, _ := newLogger(t)
	res, err := uml.Run(context.Background(), uml.Job{
		Argv: sh(fmt.Sprintf("mount --bind %s %s && exit 4", hang, poweroff)), Timeout: 60 * time.Second, Logger: lg,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 4 {
		t.Errorf("job status %s, want exit status 4", res)
	}
	if res.Total-res.BootDuration-res.Duration < 5*time.Second {
		t.Errorf("the instance ended %v after the job although its poweroff hung: was the guest's poweroff really shadowed?", res.Total-res.BootDuration-res.Duration)
	}
	assertGone(t, res)
}
