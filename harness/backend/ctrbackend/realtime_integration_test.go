package ctrbackend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tokenbed/harness/backend"
)

// An agent in a container that asks for real-time priority (agent
// --rt-priority, which harness run passes by default) gets it, as in the
// netns backend: every thread SCHED_FIFO at that priority, inside the
// run's own cgroup with its share of the real-time budget (without it
// the agents would be the only ones at normal priority and a pass's tail
// would move with the machine's load). The cgroup goes with the run.
func TestAgentRealTime(t *testing.T) {
	requireDocker(t)
	before := dockerState(t)
	ctx := context.Background()
	runID := "tbc7a00a"
	keyDir := credentials(t, "A", "B")
	logDir := t.TempDir()
	spec := testSpec(runID, 1, []string{"A", "B"}, keyDir, logDir)
	b := New(Options{AgentBin: agentBin})
	if err := b.Setup(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer b.Teardown(ctx)
	cfg := agentConfig(t, spec, keyDir, logDir, "A", true)
	errPath := filepath.Join(logDir, "A.stderr")
	ef, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Start(ctx, "A", backend.Cmd{Path: agentBin, Args: []string{"run", "--config", cfg, "--rt-priority", "5"}, Stderr: ef})
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := waitLog(filepath.Join(logDir, "A.jsonl"), `"kind":"agent_started"`, 1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if msg, _ := os.ReadFile(errPath); strings.Contains(string(msg), "not granted") {
		t.Errorf("the agent says: %s", msg)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var tid int
		fmt.Sscan(task.Name(), &tid)
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if attr.Policy != unix.SCHED_FIFO || attr.Priority != 5 {
			t.Errorf("thread %d: policy %d priority %d, want SCHED_FIFO (%d) at 5", tid, attr.Policy, attr.Priority, unix.SCHED_FIFO)
		}
	}
	// Where the kernel budgets real-time time per cgroup, the agent's
	// group is under the run's, with its share.
	if _, cpu, _ := cgroupMounts(); cpu != "" {
		if _, err := os.Stat(filepath.Join(cpu, "cpu.rt_runtime_us")); err == nil {
			cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid()))
			if err != nil {
				t.Fatal(err)
			}
			var path string
			for _, l := range strings.Split(string(cg), "\n") {
				if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ",cpu,") {
					path = f[2]
				}
			}
			if !strings.HasPrefix(path, "/"+cgroupName(runID)+"/") {
				t.Errorf("the agent's cpu cgroup is %q, want one under /%s", path, cgroupName(runID))
			}
			if n, err := readInt(filepath.Join(cpu, path, "cpu.rt_runtime_us")); err != nil || n == 0 || n != b.rt.share {
				t.Errorf("the agent's cgroup has %d µs of real-time runtime (%v), want the run's share, %d", n, err, b.rt.share)
			}
		}
	}
	if err := b.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if after := dockerState(t); after != before {
		t.Errorf("docker state changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
