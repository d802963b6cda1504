package main

import (
	"bytes"
	"strings"
	"testing"
)

// harness compare takes two results directories; an allowance must say
// what it is for; a directory that is not a run is an error, not a table.
func TestCompareUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"compare"}, exitUsage, "usage: harness compare"},
		{[]string{"compare", "a"}, exitUsage, "usage: harness compare"},
		{[]string{"compare", "--allowance", "2ms", "a", "b"}, exitUsage, "--allowance needs --allowance-why"},
		{[]string{"compare", t.TempDir(), t.TempDir()}, exitRunError, "run.json"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.msg)
		}
	}
}

// A simulated run compared with itself: every figure agrees, exit 0.
func TestCompareRunWithItself(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	if code := run([]string{"run", "--backend", "sim", "--results", dir, "--run-id", "tb5e0c01", "--no-analyze", "--duration", "300s",
		"../experiments/three-agents.yaml"}, &out, &errb); code != exitOK {
		t.Fatalf("harness run: exit %d: %s", code, errb.String())
	}
	out.Reset()
	run := dir + "/tb5e0c01"
	if code := runCompare(t, run, run, &out); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "All figures within tolerance.") || !strings.Contains(out.String(), "| acquisitions |") {
		t.Errorf("table:\n%s", out.String())
	}
}

func runCompare(t *testing.T, a, b string, out *bytes.Buffer) int {
	t.Helper()
	var errb bytes.Buffer
	code := run([]string{"compare", a, b}, out, &errb)
	if errb.Len() > 0 {
		t.Log(errb.String())
	}
	return code
}
