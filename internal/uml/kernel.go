package uml

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// DefaultKernel is where Debian's user-mode-linux package installs the
	// UML kernel.
	DefaultKernel = "/usr/bin/linux.uml"
	// KernelEnv, when set, names the UML kernel binary to use when
	// Job.Kernel is empty (a custom build, or a test of the not-installed
	// path).
	KernelEnv = "TOKENBED_UML_KERNEL"
	// DefaultModulesRoot holds one module tree per UML kernel version
	// (Debian's user-mode-linux package).
	DefaultModulesRoot = "/usr/lib/uml/modules"
	// installHint says how to get UML on this project's machines.
	installHint = "install Debian's user-mode-linux package: `make deps`, or `apt-get install user-mode-linux`"
)

// guestTools are host programs the guest runs from the shared root: the
// init's shell, mount, ip and modprobe, and the job runner's perl.
var guestTools = []struct{ name, pkg string }{
	{"sh", "dash"},
	{"perl", "perl-base"},
	{"mount", "mount"},
	{"ip", "iproute2"},
	{"modprobe", "kmod"},
	{"poweroff", "systemd-sysv or sysvinit-core"},
	{"sync", "coreutils"},
}

// lookGuestPath finds a program the way the guest init will: in guestPath.
func lookGuestPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(guestPath) {
		p := filepath.Join(dir, name)
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, guestPath)
}

// kernel is a located UML kernel and its module tree.
type kernel struct {
	path       string // the linux.uml binary
	version    string // its release, from `linux.uml --version`
	modulesDir string // DefaultModulesRoot/version, or the caller's choice
	modules    map[string]bool
	lpj        atomic.Int64 // loops per jiffy a boot measured, or 0
}

var kernels sync.Map // "path\x00modulesDir" -> *kernel

// locateKernel finds the kernel binary and its module tree and indexes the
// module names. Results are cached per (binary, modulesDir); failures are
// not.
func locateKernel(path, modulesDir string) (*kernel, error) {
	bin, err := kernelPath(path)
	if err != nil {
		return nil, err
	}
	key := bin + "\x00" + modulesDir
	if k, ok := kernels.Load(key); ok {
		return k.(*kernel), nil
	}
	version, err := kernelVersion(bin)
	if err != nil {
		return nil, err
	}
	dir := modulesDir
	if dir == "" {
		dir = filepath.Join(DefaultModulesRoot, version)
	}
	mods, err := indexModules(dir)
	if err != nil {
		return nil, err
	}
	k := &kernel{path: bin, version: version, modulesDir: dir, modules: mods}
	kernels.Store(key, k)
	return k, nil
}

func kernelPath(path string) (string, error) {
	if path == "" {
		path = os.Getenv(KernelEnv)
	}
	if path == "" {
		if p, err := exec.LookPath("linux.uml"); err == nil {
			path = p
		} else {
			path = DefaultKernel
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v; %s", ErrNotInstalled, path, err, installHint)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file; %s", ErrNotInstalled, path, installHint)
	}
	return filepath.Abs(path)
}

// kernelVersion asks the binary for its release ("6.1.176"); the module
// tree is named after it, so nothing here hard-codes a version.
func kernelVersion(bin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%w: `%s --version` failed: %v; %s", ErrNotInstalled, bin, err, installHint)
	}
	v := strings.TrimSpace(string(out))
	if v == "" || strings.ContainsAny(v, " /\n") {
		return "", fmt.Errorf("%w: `%s --version` printed %q, not a kernel release", ErrNotInstalled, bin, v)
	}
	return v, nil
}

// indexModules reads modules.dep, modules.builtin and modules.alias of a
// module tree: the names modprobe accepts. Names are normalised as the kernel
// does ('-' and '_' are the same).
func indexModules(dir string) (map[string]bool, error) {
	dep := filepath.Join(dir, "modules.dep")
	if _, err := os.Stat(dep); err != nil {
		return nil, fmt.Errorf("%w: %v (the UML kernel's modules are missing or do not match its version; reinstall user-mode-linux: `apt-get install --reinstall user-mode-linux`)", ErrNoModules, err)
	}
	mods := map[string]bool{}
	for _, f := range []string{"modules.dep", "modules.builtin"} {
		if err := eachLine(filepath.Join(dir, f), func(line string) {
			p, _, _ := strings.Cut(line, ":")
			if p = strings.TrimSpace(p); p != "" {
				mods[moduleName(p)] = true
			}
		}); err != nil && f == "modules.dep" {
			return nil, fmt.Errorf("%w: %v", ErrNoModules, err)
		}
	}
	_ = eachLine(filepath.Join(dir, "modules.alias"), func(line string) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "alias" && !strings.ContainsAny(f[1], "*?[") {
			mods[normModule(f[1])] = true
		}
	})
	return mods, nil
}

func eachLine(path string, fn func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// moduleName turns "kernel/net/sched/sch_netem.ko.xz" into "sch_netem".
func moduleName(p string) string {
	b := filepath.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return normModule(b)
}

func normModule(s string) string { return strings.ReplaceAll(s, "-", "_") }

// memoryDir chooses where linux.uml creates its memory file (unlinked at
// once, sparse: host memory is used as the guest touches it): /dev/shm when
// it is a writable tmpfs with room for the guest, as UML itself prefers,
// else the temporary directory. Run passes the choice as TMPDIR.
func memoryDir(memMB int) (string, error) {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC && checkMemoryDir("/dev/shm", memMB) == nil {
		return "/dev/shm", nil
	}
	tmp := os.TempDir()
	if err := checkMemoryDir(tmp, memMB); err != nil {
		return "", fmt.Errorf("%w (and /dev/shm is not a writable tmpfs with room either)", err)
	}
	return tmp, nil
}

// checkMemoryDir reports whether dir can hold a guest of memMB megabytes.
func checkMemoryDir(dir string, memMB int) error {
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("uml: %s (for the guest's memory file) is not writable: %v; mount a tmpfs on /dev/shm or set TMPDIR", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("uml: statfs %s: %v", dir, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if need := uint64(memMB) << 20; free < need {
		return fmt.Errorf("uml: %s has %d MiB free, a guest with mem=%dM may need %d MiB for its memory file; free space there, lower Job.MemMB, or enlarge /dev/shm (`mount -o remount,size=2G /dev/shm`)", dir, free>>20, memMB, memMB)
	}
	return nil
}

// Available reports whether Run can work on this host with the default
// kernel: linux.uml, its module tree, the host programs the guest init runs,
// and room for a default-sized guest's memory file. The error lists every
// problem found and how to fix it; errors.Is works with ErrNotInstalled and
// ErrNoModules.
func Available() error {
	var errs []error
	if _, err := locateKernel("", ""); err != nil {
		errs = append(errs, err)
	}
	for _, t := range guestTools {
		if _, err := lookGuestPath(t.name); err != nil {
			errs = append(errs, fmt.Errorf("uml: the guest init needs %s (Debian package %s): %v", t.name, t.pkg, err))
		}
	}
	if _, err := memoryDir(defaultMemMB); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
