package slurmcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tokenbed/harness/runner"
	"tokenbed/internal/testenv"
)

// A 4-task job array runs on both nodes (each task prints the hostname
// its node's UTS namespace gives it and the CPUs it may run on), each
// node's tasks on that node's own CPU when the cluster is pinned, and
// Close leaves no namespace, process, directory or registry entry of the
// cluster.
func TestJobArrayRunsOnEveryNode(t *testing.T) {
	testenv.RequireSlurm(t, "starts munged, slurmctld and slurmd in network namespaces")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	pin := set.Count() >= 2
	if !pin {
		t.Logf("NOT CHECKED: pinning (Options.Pin): this process may use %d CPU, two nodes need two", set.Count())
	}
	c, err := Start(ctx, Options{Pin: pin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Output(ctx, "sbatch", "--parsable", "--array=0-3", "--output="+filepath.Join(c.Dir, "jobs", "task-%a.out"),
		"--wrap", "hostname; sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status; sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(string(out))
	var hosts []string
	want := map[string]string{}
	for _, n := range c.Nodes {
		want[n.Name] = n.CPUList
	}
	seen := map[string]bool{}
	for _, o := range waitArray(ctx, t, c, job, 4) {
		h, cpus, _ := strings.Cut(o, "\n")
		hosts = append(hosts, h)
		list, ok := want[h]
		if !ok {
			t.Errorf("a task ran on %q, not a node of the cluster %v", h, c.Nodes)
		}
		if pin && cpus != list {
			t.Errorf("a task on %s may run on CPUs %q; the node is pinned to %q", h, cpus, list)
		}
		seen[h] = true
	}
	if len(seen) != len(c.Nodes) {
		t.Errorf("tasks ran on %v; want every node of %v", hosts, c.Nodes)
	}
	t.Logf("job %s: tasks 0-3 ran on %v", job, hosts)
	dir, id := c.Dir, c.RunID
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, id, dir)
}

// waitArray waits until tasks 0..n-1 of job have ended and returns what
// each printed.
func waitArray(ctx context.Context, t *testing.T, c *Cluster, job string, n int) []string {
	t.Helper()
	for {
		left, err := c.Output(ctx, "squeue", "-h", "-j", job, "-o", "%i %T %N")
		if err == nil && strings.TrimSpace(string(left)) == "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %s not done: squeue says %q (%v)", job, left, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var outs []string
	for i := 0; i < n; i++ {
		b, err := os.ReadFile(filepath.Join(c.Dir, "jobs", fmt.Sprintf("task-%d.out", i)))
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		outs = append(outs, strings.TrimSpace(string(b)))
	}
	return outs
}

// assertGone checks that nothing of cluster id is left: namespaces,
// processes (every daemon's command line names the run's directory),
// the directory, the registry entry.
func assertGone(t *testing.T, id, dir string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), id) {
		t.Errorf("namespaces of %s left:\n%s", id, out)
	}
	if p, _ := exec.Command("pgrep", "-a", "-f", dir).Output(); len(p) > 0 {
		t.Errorf("processes of %s left:\n%s", id, p)
	}
	if p, _ := exec.Command("pgrep", "-a", "-f", "sleep 3007").Output(); len(p) > 0 {
		t.Errorf("a job step of %s left:\n%s", id, p)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left (%v)", dir, err)
	}
	if _, ok := runner.Lookup(id); ok {
		t.Errorf("registry entry of %s left", id)
	}
}

const childEnv = "TOKENBED_SLURMCLUSTER_CHILD"

// A test killed with SIGKILL leaves a running cluster and a running job;
// the registry lists all of it, and what harness clean does for a dead
// run (runner.CleanDead) removes every namespace, process and directory.
func TestKilledClusterIsCleaned(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		runChild(t)
		return
	}
	testenv.RequireSlurm(t, "starts munged, slurmctld and slurmd in network namespaces")
	child := exec.Command(os.Args[0], "-test.run=^TestKilledClusterIsCleaned$", "-test.timeout=5m")
	child.Env = append(os.Environ(), childEnv+"=1")
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var id, dir string
	timeout := time.After(2 * time.Minute)
	for id == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child ended before its cluster ran a job")
			}
			if f := strings.Fields(l); len(f) == 3 && f[0] == "cluster" {
				id, dir = f[1], f[2]
			}
		case <-timeout:
			t.Fatal("the child's cluster did not start a job in 2 min")
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	e, ok := runner.Lookup(id)
	if !ok {
		t.Fatalf("run %s: no registry entry after the kill", id)
	}
	if e.Alive() {
		t.Fatalf("run %s: entry still alive after SIGKILL", id)
	}
	sort.Strings(e.Namespaces)
	if len(e.Namespaces) != 4 || len(e.Dirs) != 1 || e.Dirs[0] != dir {
		t.Errorf("registry entry lists %v and %v; want the cluster's 4 namespaces and %s", e.Namespaces, e.Dirs, dir)
	}
	if p, _ := exec.Command("pgrep", "-f", "sleep 3007").Output(); len(p) == 0 {
		t.Error("the child's job step is not running: the cleaning below would prove nothing about job steps")
	}
	var said []string
	if err := runner.CleanDead(e, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("clean: %s", strings.Join(said, "; "))
	assertGone(t, id, dir)
}

// runChild starts a cluster, starts a job that outlives the daemons'
// parent-death signal (its step is slurmstepd's, in a node namespace),
// says so, and waits to be killed.
func runChild(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "exec sleep 3007")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(string(out))
	for {
		st, _ := c.Output(ctx, "squeue", "-h", "-j", job, "-o", "%T")
		if strings.TrimSpace(string(st)) == "RUNNING" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		if p, _ := exec.Command("pgrep", "-f", "sleep 3007").Output(); len(p) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("cluster %s %s\n", c.RunID, c.Dir)
	select {}
}
