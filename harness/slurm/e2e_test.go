package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"tokenbed/harness/slurmcluster"
	"tokenbed/internal/testenv"
)

// buildHarness builds the harness binary into dir: the nodes run it, as
// a cluster's nodes run the one on the shared filesystem.
func buildHarness(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "harness")
	cmd := exec.Command("go", "build", "-o", bin, "tokenbed/harness")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the harness: %v\n%s", err, out)
	}
	return bin
}

// e2e is a cluster, the harness built into its shared directory and the
// four-replica experiment of harness/shard's tests copied beside it.
type e2e struct {
	c            *slurmcluster.Cluster
	harness, exp string
}

func newE2E(t *testing.T, ctx context.Context) *e2e {
	t.Helper()
	testenv.RequireSlurm(t, "runs harness run --slurm on a Slurm cluster in network namespaces")
	c, err := slurmcluster.Start(ctx, slurmcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	jobs := filepath.Join(c.Dir, "jobs")
	b, err := os.ReadFile(filepath.Join("..", "shard", "testdata", "four-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exp := filepath.Join(jobs, "four-replicas.yaml")
	if err := os.WriteFile(exp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return &e2e{c: c, harness: buildHarness(t, jobs), exp: exp}
}

// submit runs harness run --slurm ARGS where the controller is
// reachable and returns the submission's directory.
func (x *e2e) submit(t *testing.T, ctx context.Context, results, runID string, args ...string) []Submitted {
	t.Helper()
	all := append([]string{"run", "--slurm", "--backend", "sim", "--results", results, "--run-id", runID}, args...)
	out, err := x.c.Output(ctx, x.harness, append(all, x.exp)...)
	if err != nil {
		t.Fatalf("harness %s: %v\n%s", strings.Join(all, " "), err, out)
	}
	t.Logf("harness run --slurm:\n%s", out)
	subs, err := ReadSubmission(filepath.Join(results, "slurm", runID))
	if err != nil {
		t.Fatal(err)
	}
	return subs
}

func (x *e2e) wait(t *testing.T, ctx context.Context, subs []Submitted) (string, []Task) {
	t.Helper()
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return x.c.Output(ctx, name, args...)
	}
	for {
		ts, err := Status(ctx, run, subs)
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		if v, bad := Verdict(ts); v != "running" || ctx.Err() != nil {
			t.Logf("as Slurm reports it:\n%s", Table(ts))
			return v, bad
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// wallClock masks what the wall clock stamps (as harness/shard's test
// does) and the host a run.json names: the whole run's is this machine,
// the merged run's the node that merged it.
var wallClock = regexp.MustCompile(`(?m)^\s*"(started|finished|wall_seconds|host)": .*$|replayed in \d+ s of wall time \(\d+ paper s per wall s\)`)

// A simulated run of four replicas, sharded in two over the cluster's two
// nodes and merged there, is the same run done whole on this machine:
// every file byte for byte but the wall clock's fields and the host.
func TestSimRunShardedOverClusterIsTheWholeRun(t *testing.T) {
	t.Parallel() // its own cluster (see newRig)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x := newE2E(t, ctx)
	const id = "tb5a00e1"
	results := filepath.Join(x.c.Dir, "jobs", "results")
	subs := x.submit(t, ctx, results, id, "--replicas", "4", "--shards", "2")
	if v, bad := x.wait(t, ctx, subs); v != "completed" {
		log, _ := os.ReadFile(filepath.Join(results, "slurm", "four-replicas-merge.out"))
		t.Fatalf("submission %s: %+v\nmerge log:\n%s", v, bad, log)
	}
	whole := t.TempDir()
	cmd := exec.CommandContext(ctx, x.harness, "run", "--backend", "sim", "--replicas", "4", "--run-id", id, "--results", whole, x.exp)
	// In the directory the shards run in (the results root, their
	// --chdir): run.json's revision comes from git at run time when the
	// binary has no VCS stamp (go test's GOFLAGS here has
	// -buildvcs=false), and the nodes run outside any checkout.
	cmd.Dir = results
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the whole run: %v\n%s", err, out)
	}
	wdir, mdir := filepath.Join(whole, id), filepath.Join(results, id)
	n := 0
	filepath.WalkDir(wdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(wdir, p)
		if rel == "progress.json" {
			return nil // a run's last progress line, stamped with the wall clock; a merge has none
		}
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(mdir, rel))
		if err != nil {
			t.Errorf("merged run: %v", err)
			return nil
		}
		if !bytes.Equal(wallClock.ReplaceAll(a, nil), wallClock.ReplaceAll(b, nil)) {
			t.Errorf("%s differs between the whole run and the run merged from the cluster:\n%s", rel, lineDiff(wallClock.ReplaceAll(a, nil), wallClock.ReplaceAll(b, nil)))
		}
		n++
		return nil
	})
	if n < 5 {
		t.Fatalf("compared %d files only", n)
	}
	t.Logf("%d files identical", n)
	hosts := map[string]bool{}
	for _, k := range []string{"1", "2"} {
		m, _ := filepath.Glob(filepath.Join(results, "shards", id, k, "*", "shard.json"))
		for _, f := range m {
			b, _ := os.ReadFile(f)
			if h := regexp.MustCompile(`"host": "([^"]*)"`).FindSubmatch(b); h != nil {
				hosts[string(h[1])] = true
			}
		}
	}
	if len(hosts) != 2 {
		t.Errorf("the shards ran on %v, want both nodes", hosts)
	}
}

// lineDiff is the lines of a and b that differ, by position, at most 10.
func lineDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	var out []string
	for i := 0; i < max(len(la), len(lb)) && len(out) < 20; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
	}
	return strings.Join(out, "\n")
}

// A shard that never completes (cancelled before it ran, as a shard
// Slurm gave up on would be): the merge still runs (afterany), names the
// missing shard in the merged run.json with its replicas, which are not
// judged; the submission's state, from squeue and scontrol, is failed.
func TestShardFailedForGoodIsNamedByTheMerge(t *testing.T) {
	t.Parallel() // its own cluster (see newRig)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x := newE2E(t, ctx)
	nodes := x.c.Nodes[0].Name + "," + x.c.Nodes[1].Name
	// Drained nodes hold the array back, so that task 1 is cancelled
	// before it starts, whatever the machine's load.
	if _, err := x.c.Output(ctx, "scontrol", "update", "nodename="+nodes, "state=drain", "reason=test"); err != nil {
		t.Fatal(err)
	}
	const id = "tb5a00e2"
	results := filepath.Join(x.c.Dir, "jobs", "results")
	subs := x.submit(t, ctx, results, id, "--replicas", "4", "--shards", "2")
	if _, err := x.c.Output(ctx, "scancel", subs[0].JobID+"_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.c.Output(ctx, "scontrol", "update", "nodename="+nodes, "state=resume"); err != nil {
		t.Fatal(err)
	}
	v, bad := x.wait(t, ctx, subs)
	// Slurm 22.05 forgets a pending array task once cancelled: squeue
	// and scontrol no longer report it, so status says UNKNOWN.
	// The merge ran (afterany) and failed: a shard is missing.
	if v != "failed" || len(bad) != 2 || bad[0].JobID != subs[0].JobID+"_1" || (bad[0].State != "CANCELLED" && bad[0].State != "UNKNOWN") ||
		bad[1].JobID != subs[1].JobID || bad[1].State != "FAILED" {
		t.Errorf("submission %s, not completed %+v; want failed, naming task _1 and the merge", v, bad)
	}
	b, err := os.ReadFile(filepath.Join(results, id, "run.json"))
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(results, "slurm", "four-replicas-merge.out"))
		t.Fatalf("no merged run: %v\nmerge log:\n%s", err, log)
	}
	var info struct {
		MissingShards   []string `json:"missing_shards"`
		MissingReplicas []int    `json:"missing_replicas"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if strings.Join(info.MissingShards, ",") != "2/2" || fmt.Sprint(info.MissingReplicas) != "[2 3]" {
		t.Errorf("merged run.json: missing shards %v, replicas %v; want 2/2 and [2 3]", info.MissingShards, info.MissingReplicas)
	}
	log, _ := os.ReadFile(filepath.Join(results, "slurm", "four-replicas-merge.out"))
	if !strings.Contains(string(log), "2/2") {
		t.Errorf("the merge's log does not name the missing shard:\n%s", log)
	}
	t.Logf("merge log:\n%s", tail(string(log), 15))
}

// harness campaign submit --slurm: each sharded run of the campaign file
// is an array and a merge, and the index job runs after the merges, building the
// results database; harness campaign status reads the jobs back. A
// per-seed job is an array of whole runs, one per seed. A job's
// overrides, and --set's after them, run on the cluster: the merged run
// records them and its campaign and job as campaign run would.
func TestCampaignSubmitOnCluster(t *testing.T) {
	t.Parallel() // its own cluster (see newRig)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	x := newE2E(t, ctx)
	file := filepath.Join(filepath.Dir(x.exp), "night.yaml")
	// A swarm is not one run: it goes as one task, campaign run --job.
	swarmExp, err := filepath.Abs(filepath.Join("..", "swarm", "testdata", "three-agents-swarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	night := fmt.Sprintf(`name: night-test
jobs:
  - {name: four, experiment: %s, backend: sim, replicas: 4}
  - {name: two, experiment: %s, backend: sim, replicas: 2, duration: 600s, overrides: {seed: 5}}
  - {name: seeds, experiment: %s, backend: sim, seeds: [1, 2]}
  - {name: swarm, experiment: %s, backend: sim, swarm: 2, duration: 60s}
`, x.exp, x.exp, x.exp, swarmExp)
	if err := os.WriteFile(file, []byte(night), 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(x.c.Dir, "jobs", "results")
	out, err := x.c.Output(ctx, x.harness, "campaign", "submit", "--slurm", "--results", results, "--shards", "2", "--id", "night1", "--set", "two:seed=6", file)
	if err != nil {
		t.Fatalf("campaign submit: %v\n%s", err, out)
	}
	t.Logf("harness campaign submit --slurm:\n%s", out)
	if strings.Contains(string(out), "stays on the submit host") {
		t.Errorf("a job stays on the submit host")
	}
	dir := filepath.Join(results, "slurm", "night1")
	subs, err := ReadSubmission(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 7 || subs[4].Kind != "array" || subs[4].Tasks != 2 || subs[5].Kind != "task" || subs[6].Kind != "index" ||
		len(subs[6].After) != 4 || subs[6].After[3] != subs[5].JobID {
		t.Fatalf("submitted %+v: want two arrays, two merges, the seeds' array, the swarm's task, an index after the last four", subs)
	}
	if v, bad := x.wait(t, ctx, subs); v != "completed" {
		t.Fatalf("campaign %s: %+v", v, bad)
	}
	merged, _ := filepath.Glob(filepath.Join(results, "tb*", "summary.json"))
	if len(merged) != 4 {
		t.Errorf("runs %v: want two merged, two seeds'", merged)
	}
	tagged, seeds := 0, ""
	for _, m := range merged {
		var info struct {
			Campaign, Job string
			Overrides     map[string]string
		}
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(m), "run.json"))
		if err := json.Unmarshal(b, &info); err != nil || info.Campaign != "night1" {
			t.Errorf("%s: campaign %q (%v)", m, info.Campaign, err)
		}
		if info.Job == "two" {
			tagged++
			if info.Overrides["seed"] != "6" {
				t.Errorf("job two's run.json overrides %v: want seed 6 (--set after the file's 5)", info.Overrides)
			}
		}
		if info.Job == "seeds" {
			seeds += info.Overrides["seed"]
		}
	}
	if seeds != "12" && seeds != "21" {
		t.Errorf("the seeds job's runs have seeds %q: want 1 and 2", seeds)
	}
	if tagged != 1 {
		t.Errorf("%d merged runs of job two: want one", tagged)
	}
	var swarm struct{ Status string }
	b, _ := os.ReadFile(filepath.Join(results, "campaigns", "night1", "jobs", "swarm.json"))
	if err := json.Unmarshal(b, &swarm); err != nil || swarm.Status != "passed" {
		log, _ := os.ReadFile(filepath.Join(results, "slurm", "swarm-task.out"))
		t.Errorf("the swarm task's record %q (%v): want passed\n%s", b, err, log)
	}
	if sw, _ := filepath.Glob(filepath.Join(results, "swarm-*", "run.json")); len(sw) != 1 {
		t.Errorf("swarm runs %v: want one", sw)
	}
	if _, err := os.Stat(filepath.Join(results, "results.db")); err != nil {
		log, _ := os.ReadFile(filepath.Join(results, "slurm", "index.out"))
		t.Errorf("the index job built no database: %v\n%s", err, log)
	}
	st, err := x.c.Output(ctx, x.harness, "campaign", "status", dir)
	if err != nil || !strings.Contains(string(st), "night1: completed") {
		t.Errorf("harness campaign status: %v\n%s", err, st)
	}
	t.Logf("harness campaign status:\n%s", st)
}

// Real processes: harness/shard's netns-two-replicas.yaml (endurance-smoke
// in two replicas of 4,000 paper seconds, without latency figures), run by
// harness run --slurm as two shards, one on each node, in network
// namespaces through the userspace engine, merged on the cluster: every
// judged check passes.
func TestRealProcessRunShardedOverCluster(t *testing.T) {
	testenv.RequireTUN(t, "the shards create network namespaces and TUN devices")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	x := newE2E(t, ctx)
	jobs := filepath.Dir(x.exp)
	agent := filepath.Join(jobs, "agent")
	build := exec.Command("go", "build", "-o", agent, "tokenbed/agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	// endurance-smoke in two replicas without its latency figures (the
	// file says why): the point here is the sharding over the cluster, and
	// make endurance-smoke compares latency with the paper on its own.
	b, err := os.ReadFile(filepath.Join("..", "shard", "testdata", "netns-two-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	x.exp = filepath.Join(jobs, "netns-two-replicas.yaml")
	if err := os.WriteFile(x.exp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const id = "tb5a00e3"
	results := filepath.Join(jobs, "results")
	all := []string{"run", "--slurm", "--backend", "netns", "--impair", "userspace", "--agent", agent, "--replicas", "2", "--shards", "2",
		"--results", results, "--run-id", id, x.exp}
	// The two nodes share this machine's two cores, so shards side by
	// side would delay each other's passes (a pass is real time) as two
	// machines would not: shard 1 runs on node 1, then shard 2 on node 2.
	n1, n2 := x.c.Nodes[0].Name, x.c.Nodes[1].Name
	scontrol := func(args ...string) {
		t.Helper()
		if _, err := x.c.Output(ctx, "scontrol", args...); err != nil {
			t.Fatal(err)
		}
	}
	scontrol("update", "nodename="+n2, "state=drain", "reason=serial")
	out, err := x.c.Output(ctx, x.harness, all...)
	if err != nil {
		t.Fatalf("harness %s: %v\n%s", strings.Join(all, " "), err, out)
	}
	subs, err := ReadSubmission(filepath.Join(results, "slurm", id))
	if err != nil {
		t.Fatal(err)
	}
	arr := subs[0].JobID
	scontrol("hold", arr+"_1")
	scontrol("update", "nodename="+n1, "state=drain", "reason=serial")
	scontrol("update", "nodename="+n2, "state=resume")
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return x.c.Output(ctx, name, args...)
	}
	for done := false; !done; {
		ts, err := Status(ctx, run, subs[:1])
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range ts {
			if task.JobID == arr+"_0" && task.State != "PENDING" && task.State != "RUNNING" {
				done = true
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	scontrol("release", arr+"_1")
	v, bad := x.wait(t, ctx, subs)
	log, _ := os.ReadFile(filepath.Join(results, "slurm", "netns-two-replicas-merge.out"))
	t.Logf("merge log:\n%s", tail(string(log), 12))
	if v != "completed" {
		for k := 0; k < 2; k++ {
			sl, _ := os.ReadFile(filepath.Join(results, "slurm", fmt.Sprintf("netns-two-replicas-shard-%d.out", k)))
			t.Logf("shard %d log:\n%s", k+1, tail(string(sl), 15))
		}
		t.Fatalf("submission %s: %+v", v, bad)
	}
	var sum struct {
		Requirements map[string]struct {
			Verdict string `json:"verdict"`
		} `json:"requirements"`
	}
	sb, err := os.ReadFile(filepath.Join(results, id, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sb, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Requirements) == 0 {
		t.Fatalf("summary.json has no requirements:\n%s", tail(string(sb), 20))
	}
	for name, r := range sum.Requirements {
		if name == "latency" && r.Verdict == "not judged" {
			continue // no latency figures in the experiment
		}
		if r.Verdict != "pass" {
			t.Errorf("%s: %s, want pass", name, r.Verdict)
		}
	}
}
