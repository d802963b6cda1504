package uml

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	defaultMemMB = 512
	// pollInterval is how often the job's output files are copied out.
	pollInterval = 100 * time.Millisecond
	// killGrace is how long a SIGTERMed instance may take to shut down
	// before its process group gets SIGKILL. UML exits within
	// milliseconds of SIGTERM; the grace covers a stuck host.
	killGrace = 2 * time.Second
	// panicGrace lets a panicked guest finish printing its stack trace
	// before it is killed. UML aborts on a panic, but abort() cannot kill
	// the init of a PID namespace (it signals itself, and a namespace's
	// init ignores such signals), so there the guest spins instead.
	panicGrace = 500 * time.Millisecond
	// shutdownGrace is how long an instance may take to power off after
	// the job's status is recorded (sync, poweroff -f: normally 0.1 s).
	// Rarely, on a loaded host, linux.uml has been seen to stall for
	// 20–60 s after "reboot: System halted".
	shutdownGrace = 5 * time.Second
	// maxConsole bounds Result.Console; the end of the log is kept.
	maxConsole = 1 << 20
	// maxCmdline: longer kernel command lines are truncated by the guest.
	maxCmdline = 4096
)

// Job is a command to run inside a UML guest. The guest's root is the host's
// root (hostfs), so host paths are valid in Argv, Dir and Env.
type Job struct {
	// Argv is the program and its arguments; Argv[0] is looked up in the
	// job's PATH inside the guest.
	Argv []string
	// Env is the job's environment, "KEY=value" entries. Nil means
	// PATH (the usual sbin and bin directories) and HOME=/root. GuestEnv=1
	// is always added.
	Env []string
	// Dir is the job's working directory inside the guest; "" means the
	// caller's working directory (the same path is valid in the guest).
	Dir string
	// Modules are kernel modules to load, with their dependencies, before
	// the job starts, e.g. "sch_netem", "sch_htb", "cls_u32", "veth",
	// "bridge", "tun", "ifb". Modules the guest kernel requests on its own
	// are autoloaded too, but naming them here makes failures clear.
	Modules []string
	// MemMB is the guest's memory in MiB; 0 means 512. The host memory it
	// uses is allocated as the guest touches it.
	MemMB int
	// CPU is the host CPU the instance is pinned to; -1 leaves it unpinned.
	// The zero value pins to CPU 0. Pinned instances run about 4x faster
	// than unpinned ones. Pool assigns CPUs itself.
	CPU int
	// Timeout bounds the whole run, boot included; 0 means none.
	Timeout time.Duration
	// Stdout and Stderr receive the job's output while it runs (copied
	// every 100 ms). Nil discards it. When both are the same writer the
	// guest writes both streams to one file, keeping their order, and
	// Write is never called concurrently.
	Stdout, Stderr io.Writer
	// Console, if set, receives the guest kernel console (boot messages,
	// init messages, panics) while the guest runs. Result.Console has it
	// in any case.
	Console io.Writer
	// Logger receives a line when the instance boots (pid, CPU, private
	// directory) and when it ends. Nil means slog.Default().
	Logger *slog.Logger
	// Kernel is the linux.uml binary; "" means $TOKENBED_UML_KERNEL, else
	// linux.uml from PATH, else DefaultKernel.
	Kernel string
	// ModulesDir is the kernel's module tree; "" means
	// DefaultModulesRoot/<the kernel's version>.
	ModulesDir string
	// TempDir is where the private directory is created; "" means
	// os.TempDir(). The guest sees it through hostfs.
	TempDir string
	// KeepDir keeps the private directory (init script, console log,
	// job output) for inspection instead of removing it.
	KeepDir bool
}

// Result describes a finished run. Run returns a Result whenever it
// started linux.uml, also with an error, so Console can be inspected.
type Result struct {
	// ExitCode is the job's exit status, or -1 if it was killed by a
	// signal or did not finish (as os.ProcessState.ExitCode).
	ExitCode int
	// Signal is the signal that killed the job, or 0.
	Signal syscall.Signal
	// CoreDumped reports that the job dumped core when killed.
	CoreDumped bool
	// BootDuration is the time from starting linux.uml to the job's start
	// (kernel boot, init, module loading, the runner's start), host clock.
	BootDuration time.Duration
	// Duration is the time from the job's start to its exit, host clock.
	Duration time.Duration
	// Total is the time from starting linux.uml to its exit.
	Total time.Duration
	// Console is the guest kernel console: kernel messages and what the
	// init printed (at most the last 1 MiB).
	Console string
	// PID is the host process ID linux.uml had.
	PID int
	// CPU is the host CPU the instance was pinned to, or -1.
	CPU int
	// Dir is the private directory (removed unless Job.KeepDir).
	Dir string
	// KernelVersion is the UML kernel's release.
	KernelVersion string
}

// Exited reports whether the job ran to its exit (with any status).
func (r *Result) Exited() bool { return r.ExitCode >= 0 }

// Success reports whether the job exited with status 0.
func (r *Result) Success() bool { return r.ExitCode == 0 }

// String describes how the job ended, like os.ProcessState.String.
func (r *Result) String() string {
	switch {
	case r.Signal != 0 && r.CoreDumped:
		return fmt.Sprintf("signal: %v (core dumped)", r.Signal)
	case r.Signal != 0:
		return fmt.Sprintf("signal: %v", r.Signal)
	case r.ExitCode >= 0:
		return fmt.Sprintf("exit status %d", r.ExitCode)
	}
	return "did not finish"
}

var (
	moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// lpjRE finds the delay-loop calibration in the console:
	// "Calibrating delay loop... 3756.03 BogoMIPS (lpj=18780160)".
	lpjRE = regexp.MustCompile(`Calibrating delay loop\.\.\. .*\(lpj=([0-9]+)\)`)
)

// prepare checks the job and fills in its defaults. Errors name the field.
func (j *Job) prepare() error {
	if len(j.Argv) == 0 || j.Argv[0] == "" {
		return errors.New("uml: Job.Argv: no program given")
	}
	for i, a := range j.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("uml: Job.Argv[%d]: contains a NUL byte", i)
		}
	}
	if j.Env == nil {
		j.Env = []string{"PATH=" + guestPath, "HOME=/root"}
	}
	env := make([]string, 0, len(j.Env)+1)
	for i, e := range j.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return fmt.Errorf("uml: Job.Env[%d]: %q is not KEY=value", i, e)
		}
		if k != GuestEnv {
			env = append(env, e)
		}
	}
	j.Env = append(env, GuestEnv+"=1")
	if j.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("uml: Job.Dir: empty and the working directory is unknown: %w", err)
		}
		j.Dir = wd
	}
	if !filepath.IsAbs(j.Dir) {
		return fmt.Errorf("uml: Job.Dir: %q is not an absolute path", j.Dir)
	}
	if st, err := os.Stat(j.Dir); err != nil || !st.IsDir() {
		return fmt.Errorf("uml: Job.Dir: %q is not a directory on the shared root", j.Dir)
	}
	for i, m := range j.Modules {
		if !moduleNameRE.MatchString(m) {
			return fmt.Errorf("uml: Job.Modules[%d]: %q is not a module name", i, m)
		}
	}
	if j.MemMB == 0 {
		j.MemMB = defaultMemMB
	}
	if j.MemMB < 32 {
		return fmt.Errorf("uml: Job.MemMB: %d MiB is too small for the guest (at least 32)", j.MemMB)
	}
	if j.CPU < -1 {
		return fmt.Errorf("uml: Job.CPU: %d (want a host CPU number, or -1 for unpinned)", j.CPU)
	}
	if j.CPU >= 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return fmt.Errorf("uml: Job.CPU: reading this process's CPU set: %w", err)
		}
		if !set.IsSet(j.CPU) {
			return fmt.Errorf("uml: Job.CPU: CPU %d is not in this process's CPU set %v", j.CPU, cpuList(&set))
		}
	}
	if j.Timeout < 0 {
		return fmt.Errorf("uml: Job.Timeout: %v is negative", j.Timeout)
	}
	if j.Logger == nil {
		j.Logger = slog.Default()
	}
	return nil
}

// Run boots a UML guest, runs the job in it and returns how the job ended.
// A job that exits with a non-zero status or dies of a signal is not an
// error: see Result.ExitCode and Result.Signal. Errors are the guest's or
// the host's: ErrNotInstalled, ErrNoModules, *ModuleError, ErrSetup,
// ErrExec, ErrTimeout, ErrGuestPanic, ErrNoStatus, or the context's error
// when ctx ends first. On cancellation or timeout the instance gets SIGTERM
// and, after a short grace, its whole process group SIGKILL; Run returns
// only after every process of the instance is gone.
//
// Equivalent to:
//
//	setsid unshare --pid --fork taskset -c CPU env -i HOME=DIR TMPDIR=/dev/shm \
//	    linux.uml mem=512M rootfstype=hostfs rootflags=/ rw uml_dir=DIR \
//	    initcall_blacklist=raid6_select_algo,calibrate_xor_blocks printk.time=1 \
//	    init=DIR/init con=null con0=fd:0,fd:1 </dev/null >DIR/console.log 2>&1
func Run(ctx context.Context, j Job) (*Result, error) {
	if err := j.prepare(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("uml: job canceled before booting: %w", err)
	}
	k, err := locateKernel(j.Kernel, j.ModulesDir)
	if err != nil {
		return nil, err
	}
	for _, m := range j.Modules {
		if !k.modules[normModule(m)] {
			return nil, &ModuleError{Module: m, Detail: fmt.Sprintf("not in the UML module tree %s (modules.dep, modules.builtin, modules.alias)", k.modulesDir)}
		}
	}
	if strings.ContainsAny(k.modulesDir, " \t\n\\") {
		return nil, fmt.Errorf("uml: module tree path %q contains white space or a backslash (it goes into the guest's fstab)", k.modulesDir)
	}
	memDir, err := memoryDir(j.MemMB)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(j.TempDir, dirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("uml: creating the private directory: %w", err)
	}
	if j.KeepDir {
		// RemoveStale leaves directories with this marker alone.
		if err := os.WriteFile(filepath.Join(dir, fileKeep), nil, 0o644); err != nil {
			return nil, fmt.Errorf("uml: marking the private directory to keep: %w", err)
		}
	} else {
		defer os.RemoveAll(dir)
	}
	// The kernel splits its command line on white space and hands it to
	// init; keep the only path on it plain.
	if strings.ContainsAny(dir, " \t\n\"'\\") {
		return nil, fmt.Errorf("uml: private directory %q contains white space or quotes; set Job.TempDir (or TMPDIR) to a plain path", dir)
	}
	g := &guestFiles{dir: dir, jobDir: j.Dir, modules: j.Modules, modulesDir: k.modulesDir, version: k.version, merged: sameWriter(j.Stdout, j.Stderr)}
	if err := g.write(j.Argv, j.Env); err != nil {
		return nil, err
	}
	r := &instance{job: &j, k: k, dir: dir, memDir: memDir}
	return r.run(ctx)
}

// instance is one running linux.uml.
type instance struct {
	job    *Job
	k      *kernel
	dir    string
	memDir string
	cmd    *exec.Cmd

	mu     sync.Mutex
	reaped bool // linux.uml has been reaped: its PID (the PGID) may be reused
}

type exitInfo struct {
	state *os.ProcessState
	err   error
	at    time.Time
}

// cmdline is the guest kernel's command line. Words the kernel does not
// know become init's arguments or environment, with surprises (plain words
// containing a dot are dropped), so everything the guest needs comes
// through files in the private directory instead.
func (r *instance) cmdline() []string {
	args := []string{
		fmt.Sprintf("mem=%dM", r.job.MemMB),
		"rootfstype=hostfs", "rootflags=/", "rw",
		// UML keeps its pid file and management socket in uml_dir/<umid>;
		// by default under ~/.uml, where a killed instance leaves it.
		"uml_dir=" + r.dir,
		// Two boot-time benchmarks take 1 s of a 1.4 s boot: five 16-jiffy
		// loops choosing a RAID-6 algorithm and one choosing an XOR
		// routine. Only md RAID and btrfs use them; a guest on hostfs has
		// neither.
		"initcall_blacklist=raid6_select_algo,calibrate_xor_blocks",
		// Timestamps on console messages, to see where a slow boot went.
		"printk.time=1",
	}
	// The delay-loop calibration (0.1 s) measures the host CPU; reuse what
	// an earlier boot of this kernel measured.
	if lpj := r.k.lpj.Load(); lpj > 0 {
		args = append(args, fmt.Sprintf("lpj=%d", lpj))
	}
	return append(args,
		"init="+filepath.Join(r.dir, fileInit),
		"con=null", "con0=fd:0,fd:1",
	)
}

func (r *instance) run(ctx context.Context) (*Result, error) {
	j := r.job
	res := &Result{ExitCode: -1, CPU: j.CPU, Dir: r.dir, KernelVersion: r.k.version}
	args := r.cmdline()
	if n := len(strings.Join(args, " ")); n >= maxCmdline {
		return nil, fmt.Errorf("uml: kernel command line is %d bytes, the guest keeps fewer than %d", n, maxCmdline)
	}
	console, err := os.OpenFile(filepath.Join(r.dir, fileConsole), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("uml: creating the console log: %w", err)
	}
	defer console.Close()
	sv := &supervision{r: r, res: res}
	outs, err := r.followOutputs(&sv.panics)
	if err != nil {
		return nil, err
	}
	watch, werr := watchDir(r.dir)
	var events <-chan dirEvent
	if werr == nil {
		defer watch.close()
		events = watch.events
	} else {
		j.Logger.Warn("uml: no inotify, job start and end are timed by polling", "err", werr)
	}

	exited := make(chan exitInfo, 1)
	if err := r.launch(args, console, &sv.launched, exited); err != nil {
		return nil, err
	}
	res.PID = r.cmd.Process.Pid
	j.Logger.Debug("uml instance started", "pid", res.PID, "cpu", cpuAttr(j.CPU), "dir", r.dir, "cmdline", strings.Join(args, " "))

	ex := sv.watch(ctx, events, exited, outs)
	res.Total = ex.at.Sub(sv.launched)
	var outErr error
	for _, fl := range outs {
		if err := fl.close(); err != nil && outErr == nil {
			outErr = err
		}
	}
	res.Console = readConsole(filepath.Join(r.dir, fileConsole))
	if m := lpjRE.FindStringSubmatch(res.Console); m != nil && r.k.lpj.Load() == 0 {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil && n > 0 {
			r.k.lpj.Store(n)
		}
	}
	if !sv.panicked {
		// A panic message written just before linux.uml died.
		sv.panicked = sv.panics.found
	}
	err = r.verdict(res, ex, sv.stopErr, sv.panicked, sv.startedAt, sv.statusAt)
	if err == nil {
		err = outErr
	}
	j.Logger.Debug("uml instance ended", "pid", res.PID, "job", res.String(), "boot", res.BootDuration, "duration", res.Duration, "total", res.Total, "err", err)
	return res, err
}

// followOutputs follows the job's stdout, stderr and console files into
// its writers. The console is always followed: a guest that panics
// inside a PID namespace does not die (see panicGrace), so the host
// watches for the panic message (panics).
func (r *instance) followOutputs(panics *panicScanner) ([]*follower, error) {
	j := r.job
	var outs []*follower
	for _, f := range []struct {
		name, file string
		w          io.Writer
		onData     func([]byte)
	}{
		{"stdout", fileStdout, j.Stdout, nil},
		{"stderr", fileStderr, j.Stderr, nil},
		{"console", fileConsole, j.Console, panics.scan},
	} {
		if f.name == "stderr" && sameWriter(j.Stdout, j.Stderr) {
			continue
		}
		fl, err := newFollower(f.name, filepath.Join(r.dir, f.file), f.w, f.onData)
		if err != nil {
			return nil, fmt.Errorf("uml: following the job's %s: %w", f.name, err)
		}
		if fl != nil {
			outs = append(outs, fl)
		}
	}
	return outs, nil
}

// launch starts linux.uml (r.cmd) in a PID namespace when it can, and
// without one when it cannot (root without CAP_SYS_ADMIN, in a container
// say: the process group is killed instead). launched is set to the
// moment it started; its exit is sent on exited.
func (r *instance) launch(args []string, console *os.File, launched *time.Time, exited chan exitInfo) error {
	startErr := make(chan error, 1)
	pidns := os.Geteuid() == 0
	r.cmd = r.command(args, console, pidns)
	go r.startAndWait(launched, startErr, exited)
	err := <-startErr
	if err != nil && pidns && errors.Is(err, syscall.EPERM) {
		r.job.Logger.Warn("uml: cannot create a PID namespace, running without one", "err", err)
		r.cmd = r.command(args, console, false)
		go r.startAndWait(launched, startErr, exited)
		err = <-startErr
	}
	if err != nil {
		return fmt.Errorf("uml: starting %s: %w", r.k.path, err)
	}
	return nil
}

// command is the linux.uml command, before it is started.
func (r *instance) command(args []string, console *os.File, pidns bool) *exec.Cmd {
	cmd := exec.Command(r.k.path, args...)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = console, console
	cmd.Dir = "/"
	// linux.uml creates its memory file (unlinked at once) in TMPDIR.
	// Without uml_dir= it would keep its umid directory under $HOME/.uml,
	// and with neither it panics while booting (make_umid); uml_dir= is
	// given, HOME is set anyway.
	cmd.Env = []string{"PATH=" + guestPath, "TMPDIR=" + r.memDir, "HOME=" + r.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own session, as UML would make itself, so signals to the
		// caller's process group do not reach it and it can be killed as
		// a group.
		Setsid: true,
		// Dies with the thread that starts it: a crashed caller leaves
		// no guest behind.
		Pdeathsig: syscall.SIGKILL,
	}
	if pidns {
		// linux.uml is the init of a new PID namespace: when it dies, the
		// host kernel kills and reaps every helper and stub it made.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	return cmd
}

// startAndWait starts linux.uml pinned to its CPU and waits for it. It runs
// on a locked OS thread that is never unlocked: the thread's CPU affinity
// passes to the child, and the thread must outlive the child because
// Pdeathsig fires when the thread that started it exits.
func (r *instance) startAndWait(launched *time.Time, startErr chan<- error, exited chan<- exitInfo) {
	runtime.LockOSThread()
	if cpu := r.job.CPU; cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			startErr <- fmt.Errorf("pinning to CPU %d: %w", cpu, err)
			return
		}
	}
	*launched = time.Now()
	if err := r.cmd.Start(); err != nil {
		startErr <- err
		return
	}
	startErr <- nil
	pid := r.cmd.Process.Pid
	// Wait for the exit without reaping: while linux.uml is a zombie its
	// PID, which is also its process group ID, cannot be reused, so the
	// group can be swept safely of helpers that outlived it.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	at := time.Now()
	r.mu.Lock()
	_ = unix.Kill(-pid, unix.SIGKILL)
	r.reaped = true
	r.mu.Unlock()
	// A helper that was running when SIGKILL came takes a moment to die
	// (under load, tens of milliseconds): Run returns only once the group
	// is gone, so the caller finds the host as it was.
	for deadline := time.Now().Add(5 * time.Second); groupRunning(pid) && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
	err := r.cmd.Wait()
	exited <- exitInfo{state: r.cmd.ProcessState, err: err, at: at}
}

// groupRunning reports whether a process of group pgid is not yet dead
// (zombies do not count: they no longer run).
func groupRunning(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	want := strconv.Itoa(pgid)
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// killGroup sends SIGKILL to every process of the instance.
func (r *instance) killGroup() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reaped {
		_ = unix.Kill(-r.cmd.Process.Pid, unix.SIGKILL)
	}
}

// verdict fills in the job's status from the status file and decides the
// error.
func (r *instance) verdict(res *Result, ex exitInfo, stopErr error, panicked bool, startedAt, statusAt time.Time) error {
	data, rerr := os.ReadFile(filepath.Join(r.dir, fileStatus))
	if rerr == nil && len(data) > 0 {
		st, err := parseStatus(string(data))
		if err != nil {
			return err
		}
		if !startedAt.IsZero() && !statusAt.IsZero() {
			res.Duration = statusAt.Sub(startedAt)
		}
		if ws, ok := ex.state.Sys().(syscall.WaitStatus); ok && (!ws.Exited() || ws.ExitStatus() != 0) {
			r.job.Logger.Warn("uml instance ended abnormally after the job's status was recorded", "pid", res.PID, "state", ex.state.String())
		}
		switch st.kind {
		case "exit":
			res.ExitCode = st.code
			return nil
		case "signal":
			res.Signal, res.CoreDumped = st.signal, st.core
			return nil
		case "exec-error":
			return fmt.Errorf("%w: %q: %s", ErrExec, r.job.Argv[0], st.detail)
		case "module-error":
			msg, _ := os.ReadFile(filepath.Join(r.dir, fileModErr))
			detail := strings.TrimSpace(string(msg))
			if detail == "" {
				detail = "modprobe failed in the guest"
			}
			return &ModuleError{Module: st.detail, Detail: "failed to load in the guest: " + detail}
		default: // setup-error
			return fmt.Errorf("%w: %s%s", ErrSetup, st.detail, consoleTail(res.Console, 15))
		}
	}
	ws, _ := ex.state.Sys().(syscall.WaitStatus)
	switch {
	case panicked:
		return panicError("the guest's PID 1 exited, or the kernel crashed", res.Console)
	case stopErr != nil:
		return stopErr
	case ws.Signaled() && ws.Signal() == syscall.SIGABRT:
		return panicError("linux.uml died of SIGABRT; PID 1 exited or the kernel panicked", res.Console)
	case ws.Signaled():
		return fmt.Errorf("%w: linux.uml was killed by %v before the job finished%s", ErrNoStatus, ws.Signal(), consoleTail(res.Console, 15))
	}
	return fmt.Errorf("%w: linux.uml exited (%v) without %s%s", ErrNoStatus, ex.state, filepath.Join(r.dir, fileStatus), consoleTail(res.Console, 15))
}

func readConsole(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxConsole {
		_, _ = f.Seek(st.Size()-maxConsole, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxConsole))
	return string(b)
}

func cpuAttr(cpu int) any {
	if cpu < 0 {
		return "unpinned"
	}
	return cpu
}
