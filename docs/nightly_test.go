package docs

import (
	"fmt"
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

// TestNightlyScript runs scripts/nightly.sh in a scratch tree whose
// Makefile builds nothing and whose bin/harness records its verb and
// exits as told: the trend runs after a failed campaign, and the night's
// status is the campaign's when it failed, else the trend's.
func TestNightlyScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, "scripts/nightly.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		campaign, trend, want int
	}{{0, 0, 0}, {1, 0, 1}, {0, 1, 1}, {3, 1, 3}} {
		tree := t.TempDir()
		for name, text := range map[string]string{
			"scripts/nightly.sh": string(script),
			"Makefile":           "build:\n\t@true\n",
			"bin/harness": "#!/bin/sh\necho \"$@\" >>\"$(dirname \"$0\")/calls\"\n" +
				"case $1 in campaign) exit $CAMPAIGN_EXIT;; trend) exit $TREND_EXIT;; esac\nexit 2\n",
		} {
			p := filepath.Join(tree, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(tree, "scripts/nightly.sh"))
		cmd.Env = append(os.Environ(), "CAMPAIGN_EXIT="+fmt.Sprint(c.campaign), "TREND_EXIT="+fmt.Sprint(c.trend), "TOKENBED_CAMPAIGN=x.yaml")
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		calls, _ := os.ReadFile(filepath.Join(tree, "bin/calls"))
		if code != c.want || string(calls) != "campaign run x.yaml\ntrend\n" {
			t.Errorf("campaign %d, trend %d: exit %d, calls %q; want %d after campaign run x.yaml and trend\n%s",
				c.campaign, c.trend, code, calls, c.want, out)
		}
	}
}
