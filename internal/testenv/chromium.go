package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireChromium returns the path of Debian's Chromium (the results
// browser's tests drive it headless), or skips t: under -short (it
// starts a browser), and loudly when it is not installed (`make deps`
// installs it: scripts/install-deps.sh).
func RequireChromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short (make test-unit): starts a headless Chromium; make test runs it")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	fmt.Fprintf(os.Stderr, "testenv: SKIPPING %s: no chromium on PATH, so the results browser is not tested in a browser (make deps installs it)\n", t.Name())
	t.Skip("SKIP: no chromium on PATH (make deps installs Debian's chromium)")
	return ""
}
