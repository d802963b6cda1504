package ctrbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/harness/backend/ctrbackend/ctrtest"
	"tokenbed/harness/runner"
	"tokenbed/internal/testenv"
	"tokenbed/netem"
)

// agentBin is the static agent, built once for the package's tests.
var agentBin string

// noEngineChild marks the child process of TestNoEngine, which needs no
// agent.
const noEngineChild = "CTRBACKEND_NO_ENGINE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(noEngineChild) == "1" {
		os.Exit(m.Run())
	}
	testenv.MainWithAgent(m, &agentBin)
}

func requireRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "the tests open containers' network namespaces")
}

// requireDocker skips only when no Docker engine answers at all; any other
// failure to connect fails the test.
func requireDocker(t testing.TB) {
	t.Helper()
	requireRoot(t)
	ctrtest.Serialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prov, err := Connect(ctx, nil)
	if errors.Is(err, ErrNoEngine) {
		t.Skipf("no Docker engine on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	prov.Close()
}

// dockerState is what `docker ps -a`, `docker network ls` and `docker
// images -a` print (IDs and names), and the runs' parent cgroups (`ls -d
// /sys/fs/cgroup/*/tokenbed-*`, see realtime.go), to compare before and
// after a test.
func dockerState(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}} {{.Status}}"},
		{"network", "ls", "--no-trunc", "--format", "{{.ID}} {{.Name}}"},
		{"images", "-a", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"},
	} {
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for i, l := range lines {
			// A container's status ("Up 3 minutes") changes by itself.
			if f := strings.Fields(l); args[0] == "ps" && len(f) > 2 {
				lines[i] = f[0] + " " + f[1]
			}
		}
		slices.Sort(lines)
		fmt.Fprintf(&b, "docker %s:\n%s\n", strings.Join(args[:2], " "), strings.Join(lines, "\n"))
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/tokenbed-*") // cgroup v2
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/tokenbed-*")
	cgs = append(cgs, v1...)
	fmt.Fprintf(&b, "cgroups:\n%s\n", strings.Join(cgs, "\n"))
	return b.String()
}

// credentials makes a CA and members' keys in a fresh directory.
func credentials(t testing.TB, names ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctrbackend-keys-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := ca.Init(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := ca.Issue(dir, n); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitLog waits until the log file contains s at least n times.
func waitLog(path, s string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), s) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not %d× %q within %v; it holds:\n%s", path, n, s, timeout, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hostImpairment is kernel netem where this kernel has sch_netem, and the
// userspace engine otherwise.
func hostImpairment() string {
	if netem.CheckKernel(runner.NewRunID()) == nil {
		return runner.ImpairKernel
	}
	return runner.ImpairUserspace
}
