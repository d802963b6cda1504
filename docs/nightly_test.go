package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnits checks the shipped nightly service and timer with
// `systemd-analyze verify`, the checkout path rewritten to this tree's
// (the units name /opt/tokenbed, where docs/nightly.md installs it), and
// that the check rejects a unit with a bad calendar, so that it can fail.
func TestSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("SKIP: no systemd-analyze on this machine: the nightly units are not verified")
	}
	tree, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(edit func(name, text string) string) (string, error) {
		dir := t.TempDir()
		var paths []string
		for _, name := range []string{"tokenbed-nightly.service", "tokenbed-nightly.timer"} {
			b, err := os.ReadFile(filepath.Join(root, "scripts/systemd", name))
			if err != nil {
				t.Fatal(err)
			}
			text := edit(name, strings.ReplaceAll(string(b), "/opt/tokenbed", tree))
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		out, err := exec.Command(sa, append([]string{"verify"}, paths...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(func(_, text string) string { return text }); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err := verify(func(name, text string) string {
		return strings.Replace(text, "OnCalendar=*-*-* 01:30:00", "OnCalendar=every night", 1)
	})
	if err == nil && !strings.Contains(out, "OnCalendar") {
		t.Fatalf("systemd-analyze verify accepted a timer with a bad calendar:\n%s", out)
	}
}
