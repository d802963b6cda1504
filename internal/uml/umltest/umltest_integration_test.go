package umltest_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"tokenbed/internal/testenv"
	"tokenbed/internal/uml"
	"tokenbed/internal/uml/umltest"
)

// helperEnv switches on the helper tests, which the outer tests run in a
// child test process: their failing or skipping is the behaviour under test,
// and must not make this suite red.
const helperEnv = "TOKENBED_UMLTEST_HELPER"

// The body runs inside the guest: the marker is set, the kernel is UML's,
// the guest has one CPU, and real netem delays loopback traffic.
func TestReexecRunsInsideGuest(t *testing.T) {
	if umltest.Reexec(t, umltest.Options{Modules: []string{"sch_netem"}}) {
		return
	}
	if !umltest.InGuest() {
		t.Fatalf("body runs outside the guest (%s unset)", uml.GuestEnv)
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^model name\s*: UML$`).Match(cpuinfo) {
		t.Fatalf("/proc/cpuinfo is not User Mode Linux's:\n%s", cpuinfo)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d inside the guest, want 1", n)
	}
	// 20 ms netem delay on lo: a UDP round trip crosses lo twice.
	if out, err := exec.Command("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "20ms").CombinedOutput(); err != nil {
		t.Fatalf("tc qdisc add dev lo root netem delay 20ms: %v: %s", err, out)
	}
	minRTT := udpMinRTT(t, 5)
	t.Logf("UDP round trip over lo with netem delay 20ms: min %v", minRTT)
	if minRTT < 40*time.Millisecond {
		t.Errorf("min round trip %v < 40ms: netem did not delay loopback traffic", minRTT)
	}
}

// udpMinRTT echoes n datagrams over 127.0.0.1 and returns the fastest
// round trip.
func udpMinRTT(t *testing.T, n int) time.Duration {
	t.Helper()
	srv, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			k, addr, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteTo(buf[:k], addr)
		}
	}()
	c, err := net.Dial("udp4", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	best := time.Duration(1<<63 - 1)
	buf := make([]byte, 64)
	for i := range n {
		// Generous: the guest is slow (15–60 µs per system call).
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// Subtest names with spaces and slashes select exactly one subtest in the
// guest: the sibling with a longer name must not run there.
func TestReexecSubtest(t *testing.T) {
	t.Run("with space/and slash", func(t *testing.T) {
		if umltest.Reexec(t, umltest.Options{}) {
			return
		}
		if !umltest.InGuest() {
			t.Fatal("subtest body runs outside the guest")
		}
	})
	t.Run("with space and more", func(t *testing.T) {
		if umltest.InGuest() {
			t.Fatal("a sibling subtest ran in the guest: -test.run was not anchored")
		}
	})
}

func TestReexecRunOnHost(t *testing.T) {
	ran := false
	if umltest.Reexec(t, umltest.Options{RunOnHost: func() bool { ran = true; return true }}) {
		t.Fatal("Reexec ran the test in UML although RunOnHost holds")
	}
	if !ran || umltest.InGuest() {
		t.Fatalf("RunOnHost consulted %v, in guest %v", ran, umltest.InGuest())
	}
}

// Helper tests, active only in the child process of the tests below.

func TestGuestHelperFails(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper of TestReexecReportsGuestFailureAndSkip; active only when it sets " + helperEnv)
	}
	if umltest.Reexec(t, umltest.Options{}) {
		return
	}
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	t.Errorf("deliberate failure inside the guest, kernel %s", strings.TrimSpace(string(release)))
}

func TestGuestHelperSkips(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper of TestReexecReportsGuestFailureAndSkip; active only when it sets " + helperEnv)
	}
	if umltest.Reexec(t, umltest.Options{}) {
		return
	}
	t.Skip("deliberate skip inside the guest")
}

// runHelpers runs the helper tests in a child test process on the host.
func runHelpers(t *testing.T, pattern string, env ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run="+pattern, "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(append(os.Environ(), helperEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the helper tests: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestReexecReportsGuestFailureAndSkip(t *testing.T) {
	if umltest.InGuest() {
		t.Skip("runs helper processes from the host")
	}
	testenv.RequireUML(t)
	out, code := runHelpers(t, "^TestGuestHelper(Fails|Skips)$")
	t.Logf("child test process (exit %d):\n%s", code, out)
	if code != 1 {
		t.Errorf("child test process exited %d, want 1 (a failed test)", code)
	}
	version := regexp.MustCompile(`kernel=(\S+)`).FindStringSubmatch(out)
	for _, want := range []string{
		"deliberate failure inside the guest, kernel ", // the guest test's own message
		"umltest: TestGuestHelperFails FAILED inside UML",
		"--- FAIL: TestGuestHelperFails",
		"deliberate skip inside the guest",
		"--- SKIP: TestGuestHelperSkips",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`umltest: TestGuestHelperSkips skipped inside UML: umltest_integration_test.go:\d+: deliberate skip inside the guest`).MatchString(out) {
		t.Errorf("the host's skip does not carry the guest's reason")
	}
	if version == nil || !strings.Contains(out, "deliberate failure inside the guest, kernel "+version[1]) {
		t.Errorf("the failure message does not come from the UML kernel that booted (booted: %v)", version)
	}
}

// Without UML, a test that needs it fails loudly as root (`make deps`
// installs UML) and skips with the reason otherwise.
func TestReexecWithoutUML(t *testing.T) {
	if umltest.InGuest() {
		t.Skip("runs helper processes from the host")
	}
	out, code := runHelpers(t, "^TestGuestHelperFails$", uml.KernelEnv+"=/nonexistent/linux.uml")
	t.Logf("child test process (exit %d):\n%s", code, out)
	if os.Geteuid() == 0 {
		if code != 1 || !strings.Contains(out, "--- FAIL: TestGuestHelperFails") || !strings.Contains(out, "make deps") {
			t.Errorf("as root, a missing UML must fail the test and say `make deps`")
		}
	} else if code != 0 || !strings.Contains(out, "--- SKIP: TestGuestHelperFails") || !strings.Contains(out, "not root") {
		t.Errorf("without root, a missing UML must skip the test with the reason")
	}
	if strings.Contains(out, "deliberate failure inside the guest") {
		t.Errorf("the test body ran although UML is missing")
	}
}

func TestRunPattern(t *testing.T) {
	for name, want := range map[string]string{
		"TestX":                      "^TestX$",
		"TestX/with_space/and_slash": "^TestX$/^with_space$/^and_slash$",
		"TestX/a.b(c)#01":            `^TestX$/^a\.b\(c\)#01$`,
		"TestX/[x]/y+z":              `^TestX$/^\[x\]$/^y\+z$`,
	} {
		if got := umltest.RunPattern(name); got != want {
			t.Errorf("RunPattern(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestHostHasModule(t *testing.T) {
	if umltest.HostHasModule("no_such_module_tokenbed")() {
		t.Error("HostHasModule reports a module that does not exist")
	}
	ents, err := os.ReadDir("/sys/module")
	if err != nil || len(ents) == 0 {
		t.Skipf("SKIP: no /sys/module to pick a present module from: %v", err)
	}
	if name := ents[0].Name(); !umltest.HostHasModule(name)() {
		t.Errorf("HostHasModule(%q) is false although /sys/module/%s exists", name, name)
	}
}

// Without root, a missing UML skips the test with the reason: the helper
// runs as nobody.
func TestReexecWithoutUMLNotRoot(t *testing.T) {
	if umltest.InGuest() {
		t.Skip("runs helper processes from the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: TestReexecWithoutUML covers this path")
	}
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
	defer os.RemoveAll(dir)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "umltest.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestGuestHelperFails$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), helperEnv+"=1", uml.KernelEnv+"=/nonexistent/linux.uml", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("child test process as nobody (%v):\n%s", err, out)
	if err != nil || !strings.Contains(string(out), "--- SKIP: TestGuestHelperFails") || !strings.Contains(string(out), "not root") {
		t.Errorf("without root, a missing UML must skip the test with the reason")
	}
}
