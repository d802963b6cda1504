package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner"
	"tokenbed/internal/results"
)

// buildBinaries builds harness and agent side by side, as make build
// does (the harness finds the agent next to itself).
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, pkg := range []string{"harness", "agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "tokenbed/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(dir, "harness")
}

func harnessCmd(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

func nsExists(name string) bool {
	_, err := os.Stat(filepath.Join(nsbackend.NetnsDir, name))
	return err == nil
}

// registered reports whether the run registry has an entry for id.
func registered(id string) bool {
	_, err := os.Stat(filepath.Join("/run/tokenbed", id))
	return err == nil
}

func runStatus(t *testing.T, dir string) string {
	t.Helper()
	var info results.RunInfo
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		t.Fatal(err)
	}
	return info.Status
}

const longExp = `
name: long
seed: 3
duration: 6000s
time_scale: 10
defaults:
  agent:
    randomwalk: {hold: 1s}
agents:
  - {name: A, generate: true}
  - {name: B}
`

// startRun starts a harness run in the background and waits until both
// agents have started.
func startRun(t *testing.T, bin, root, exp, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "run", "--impair", "none", "--no-analyze", "--run-id", id, "--results", root, exp)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		started := 0
		for _, a := range []string{"A", "B"} {
			b, _ := os.ReadFile(filepath.Join(root, id, "logs", a+".jsonl"))
			if bytes.Contains(b, []byte(`"agent_started"`)) {
				started++
			}
		}
		if started == 2 {
			return cmd
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("run %s: agents did not start", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With real processes: a run ID in use or with
// results is refused before anything is written; after kill -9, analyze
// and clean record the run as killed; clean --run X removes X's leftovers
// and nothing else (not another dead run's, not a namespace that only
// looks like a run's), and a stray argument or a bad ID is a usage error.
func TestKilledRunsCleanedInScope(t *testing.T) {
	requireRoot(t)
	bin := buildBinaries(t)
	root := t.TempDir()
	exp := filepath.Join(t.TempDir(), "long.yaml")
	os.WriteFile(exp, []byte(longExp), 0o644)
	id1, id2 := runner.NewRunID(), runner.NewRunID()
	for _, ns := range []string{"tbdec0de-decoy", id1 + "-decoy"} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
	}
	run1 := startRun(t, bin, root, exp, id1)
	defer run1.Process.Kill()
	run2 := startRun(t, bin, root, exp, id2)
	defer run2.Process.Kill()
	dir1, dir2 := filepath.Join(root, id1), filepath.Join(root, id2)

	// Item 5: the live run's ID is refused, and nothing of it is touched.
	crt := filepath.Join(dir1, "ca", "ca.crt")
	crtBefore, _ := os.ReadFile(crt)
	code, out := harnessCmd(t, bin, "run", "--impair", "none", "--run-id", id1, "--results", root, exp)
	if code != exitUsage || !strings.Contains(out, "is running") {
		t.Errorf("run with a live run's ID: exit %d, want %d:\n%s", code, exitUsage, out)
	}
	if crtAfter, _ := os.ReadFile(crt); !bytes.Equal(crtBefore, crtAfter) {
		t.Error("a refused run rewrote the live run's ca.crt")
	}
	if !registered(id1) {
		t.Error("a refused run removed the live run's registry entry")
	}
	if code, out := harnessCmd(t, bin, "clean", "--run", id1); code != exitUsage {
		t.Errorf("clean of a live run: exit %d, want %d:\n%s", code, exitUsage, out)
	}

	// kill -9 both harnesses; their agents die with them.
	for _, c := range []*exec.Cmd{run1, run2} {
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
	}
	if s := runStatus(t, dir2); s != "running" {
		t.Fatalf("run.json of a killed run says %q before anyone looked", s)
	}
	// Item 8: analyze finds run 2 dead and records it.
	harnessCmd(t, bin, "analyze", dir2)
	if s := runStatus(t, dir2); s != "killed" {
		t.Errorf("after analyze, run.json of killed run 2 says %q, want killed", s)
	}

	// Item 7: usage errors.
	if code, out := harnessCmd(t, bin, "clean", id1); code != exitUsage {
		t.Errorf("clean with a stray argument: exit %d, want %d:\n%s", code, exitUsage, out)
	}
	if code, out := harnessCmd(t, bin, "clean", "--run", "bad"); code != exitUsage || !strings.Contains(out, `"bad"`) {
		t.Errorf("clean --run bad: exit %d, want %d with the value named:\n%s", code, exitUsage, out)
	}
	keys2, _ := filepath.Glob(filepath.Join(os.TempDir(), "tokenbed-"+id2+"-keys-*"))
	if len(keys2) == 0 || !nsExists(id2+"-A") {
		t.Fatalf("run 2 left no key directory or namespace to test with: %v", keys2)
	}
	// clean --run id1: only run 1.
	code, out = harnessCmd(t, bin, "clean", "--run", id1)
	if code != 0 {
		t.Fatalf("clean --run %s: exit %d:\n%s", id1, code, out)
	}
	for _, ns := range []string{id1 + "-A", id1 + "-B", id1 + "-hub0"} {
		if nsExists(ns) {
			t.Errorf("clean --run %s left %s", id1, ns)
		}
	}
	if keys, _ := filepath.Glob(filepath.Join(os.TempDir(), "tokenbed-"+id1+"-keys-*")); len(keys) > 0 {
		t.Errorf("clean --run %s left key directories %v", id1, keys)
	}
	if s := runStatus(t, dir1); s != "killed" {
		t.Errorf("after clean, run.json of killed run 1 says %q, want killed", s)
	}
	if registered(id1) {
		t.Error("clean left run 1's registry entry")
	}
	if !nsExists(id2+"-A") || !nsExists(id2+"-hub0") {
		t.Errorf("clean --run %s removed run %s's namespaces", id1, id2)
	}
	for _, k := range keys2 {
		if _, err := os.Stat(k); err != nil {
			t.Errorf("clean --run %s removed run %s's key directory", id1, id2)
		}
	}
	if !registered(id2) {
		t.Errorf("clean --run %s removed run %s's registry entry", id1, id2)
	}
	// Namespaces that only look like a run's survive, and clean says why.
	if !nsExists(id1+"-decoy") || !strings.Contains(out, "left namespace "+id1+"-decoy") {
		t.Errorf("decoy %s-decoy removed or not reported:\n%s", id1, out)
	}
	harnessCmd(t, bin, "clean", "--run", "tbdec0de")
	if !nsExists("tbdec0de-decoy") {
		t.Error("clean --run tbdec0de removed the decoy namespace tbdec0de-decoy, which no run registered")
	}
	if code, out := harnessCmd(t, bin, "clean", "--run", id2); code != 0 || nsExists(id2+"-A") {
		t.Errorf("clean --run %s: exit %d, namespace left %v:\n%s", id2, code, nsExists(id2+"-A"), out)
	}

	// Item 5: an ID with results is refused; the old results stay as
	// they were.
	hlog := filepath.Join(dir1, "logs", "harness.jsonl")
	before, _ := os.ReadFile(hlog)
	code, out = harnessCmd(t, bin, "run", "--impair", "none", "--run-id", id1, "--results", root, exp)
	if code != exitUsage || !strings.Contains(out, "exists") {
		t.Errorf("run with an ID that has results: exit %d, want %d:\n%s", code, exitUsage, out)
	}
	if after, _ := os.ReadFile(hlog); !bytes.Equal(before, after) {
		t.Error("a refused run appended to the old run's harness.jsonl")
	}
	if s := runStatus(t, dir1); s != "killed" {
		t.Errorf("a refused run rewrote run.json: status %q", s)
	}
	if registered(id1) {
		t.Error("a refused run left a registry entry")
	}
}

// A bad flag is exit 2 before any side effect: a mistyped command leaves
// nothing to clean.
func TestBadRunIDIsUsageErrorWithoutSideEffects(t *testing.T) {
	root := t.TempDir()
	exp := filepath.Join(t.TempDir(), "e.yaml")
	os.WriteFile(exp, []byte(longExp), 0o644)
	escape := filepath.Join(t.TempDir(), "x")
	rel, _ := filepath.Rel(nsbackend.NetnsDir, escape)
	for _, id := range []string{"bad", rel} {
		var out, errb bytes.Buffer
		code := run([]string{"run", "--run-id", id, "--results", root, exp}, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "--run-id") {
			t.Errorf("--run-id %q: exit %d, want %d naming the flag:\n%s", id, code, exitUsage, errb.String())
		}
		if ents, _ := os.ReadDir(root); len(ents) > 0 {
			t.Errorf("--run-id %q created %v in the results root", id, ents[0].Name())
		}
		if m, _ := filepath.Glob(escape + "*"); len(m) > 0 {
			t.Errorf("--run-id %q created %v", id, m)
		}
	}
}
