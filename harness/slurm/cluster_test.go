package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"tokenbed/harness/slurmcluster"
	"tokenbed/internal/testenv"
)

// standIn is the harness the scheduling tests give the scripts: it
// records each call (what, which shard, on which host, after how many
// restarts) and does the work's observable part (a shard directory; a
// merge's list of the shard directories it found). The point of these
// tests is what Slurm does with the scripts: where the array's tasks
// run, that a killed node's shard is requeued, that a merge runs after a
// failed shard, and what status reads back. STATE/fail-NAME-K makes
// shard K of job NAME fail; STATE/hang-K makes shard K's first attempt
// hang.
const standIn = `#!/bin/sh
state=%s
host=$(hostname)
case "$1" in
run)
	shard=$5 dir=$7 k=${5%%/*}
	name=${SLURM_JOB_NAME%%-shards}
	echo "run $name $shard $host restart=${SLURM_RESTART_COUNT:-0}" >> $state/calls
	[ -e $state/fail-$name-$k ] && exit 1
	[ -e $state/hang-$k ] && [ "${SLURM_RESTART_COUNT:-0}" = 0 ] && exec sleep 3009
	mkdir -p "$dir/$name-shard$k" && echo $host > "$dir/$name-shard$k/host"
	;;
merge)
	shift 2
	found=""
	for d in "$@"; do [ -d "$d" ] && found="$found $(basename $d)"; done
	echo "merge ${SLURM_JOB_NAME%%-merge}$found" >> $state/calls
	;;
index)
	echo "index" >> $state/calls
	;;
esac
`

type rig struct {
	c     *slurmcluster.Cluster
	site  Site
	state string
	run   Commander
}

// newRig starts a cluster for one test. The cluster tests run side by
// side (t.Parallel): each starts its own cluster (its own run ID,
// namespaces, munged socket and directory) and spends most of its time
// waiting on Slurm's timers, not on the CPU.
// TestRealProcessRunShardedOverCluster stays serial: its passes are real
// time, and it runs its two shards one after the other for that reason.
func newRig(t *testing.T, ctx context.Context, o slurmcluster.Options) *rig {
	t.Helper()
	testenv.RequireSlurm(t, "runs job arrays on a Slurm cluster in network namespaces")
	c, err := slurmcluster.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	state := filepath.Join(c.Dir, "jobs", "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	h := filepath.Join(c.Dir, "jobs", "harness")
	if err := os.WriteFile(h, []byte(fmt.Sprintf(standIn, state)), 0o755); err != nil {
		t.Fatal(err)
	}
	return &rig{c: c, state: state, site: Site{Harness: h, Results: filepath.Join(c.Dir, "jobs", "results")},
		run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return c.Output(ctx, name, args...)
		}}
}

func (r *rig) calls(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(r.state, "calls"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// wait polls Status until the submission is no longer running.
func (r *rig) wait(t *testing.T, ctx context.Context, subs []Submitted) (string, []Task, []Task) {
	t.Helper()
	for {
		ts, err := Status(ctx, r.run, subs)
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		if v, bad := Verdict(ts); v != "running" {
			t.Logf("as Slurm reports it:\n%s", Table(ts))
			return v, ts, bad
		}
		if ctx.Err() != nil {
			info, _ := r.c.Output(context.Background(), "sinfo", "-N", "-o", "%N %T %E")
			log, _ := os.ReadFile(filepath.Join(r.c.Dir, "slurmctld.log"))
			t.Fatalf("still running when the test's time ran out:\n%s\nsinfo:\n%s\nslurmctld.log:\n%s", Table(ts), info, tail(string(log), 40))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// A campaign of two sharded jobs on two nodes: the good job's four
// shards run on both nodes; the other job's shard 2 fails for good, and
// its merge still runs (afterany), finding shard 1 only; the index job
// runs last, after both merges; status, from squeue and scontrol alone,
// says failed and names the failed task.
func TestCampaignOnCluster(t *testing.T) {
	t.Parallel() // its own cluster (see newRig)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := newRig(t, ctx, slurmcluster.Options{})
	os.WriteFile(filepath.Join(r.state, "fail-bad-2"), nil, 0o644)
	plan, err := CampaignPlan([]Job{
		{Name: "good", RunID: "tb000001", Experiment: "/e.yaml", Shards: 4, RunArgs: []string{"--backend", "sim"}},
		{Name: "bad", RunID: "tb000002", Experiment: "/e.yaml", Shards: 2},
	}, r.site)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := Submit(ctx, r.run, filepath.Join(r.site.Results, "slurm", "c1"), r.site, plan)
	if err != nil {
		t.Fatal(err)
	}
	v, ts, bad := r.wait(t, ctx, subs)
	if v != "failed" || len(bad) != 1 || bad[0].Name != "bad-shards" || !strings.HasSuffix(bad[0].JobID, "_1") || bad[0].State != "FAILED" {
		t.Errorf("verdict %s, not completed %+v; want failed, task _1 of bad-shards FAILED", v, bad)
	}
	if len(ts) != 4+2+3 {
		t.Errorf("%d jobs and tasks reported, want 9", len(ts))
	}
	calls := r.calls(t)
	t.Logf("calls:\n%s", strings.Join(calls, "\n"))
	hosts := map[string]bool{}
	var order []string
	for _, l := range calls {
		f := strings.Fields(l)
		switch f[0] {
		case "run":
			if f[1] == "good" {
				hosts[f[3]] = true
			}
		case "merge":
			order = append(order, f[0]+" "+f[1])
			want := map[string]string{"good": "good-shard1 good-shard2 good-shard3 good-shard4", "bad": "bad-shard1"}[f[1]]
			got := f[2:]
			sort.Strings(got)
			if strings.Join(got, " ") != want {
				t.Errorf("merge of %s found %v, want %s", f[1], got, want)
			}
		case "index":
			order = append(order, "index")
		}
	}
	if len(hosts) != 2 {
		t.Errorf("the good job's shards ran on %v, want both nodes", hosts)
	}
	if len(order) != 3 || order[2] != "index" {
		t.Errorf("merges and index ran as %v: want both merges, then index", order)
	}
}

// A node killed in the middle of a shard: slurmctld finds it DOWN, the
// requeueable task runs again on the other node, and the merge finds
// every shard.
func TestKilledNodeShardRequeued(t *testing.T) {
	t.Parallel() // its own cluster (see newRig)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	// slurmctld looks for unresponsive nodes in its periodic background
	// pass, so the node is found DOWN some 30 s after the kill whatever
	// SlurmdTimeout below 10 s; the requeued task then waits CredExpire.
	r := newRig(t, ctx, slurmcluster.Options{})
	os.WriteFile(filepath.Join(r.state, "hang-1"), nil, 0o644)
	plan, err := RunPlan(Job{Name: "smoke", RunID: "tb000003", Experiment: "/e.yaml", Shards: 2}, r.site)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := Submit(ctx, r.run, filepath.Join(r.site.Results, "slurm", "r1"), r.site, plan)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for victim == "" {
		ts, err := Status(ctx, r.run, subs[:1])
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			if strings.HasSuffix(x.JobID, "_0") && x.State == "RUNNING" && x.Node != "" {
				victim = x.Node
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("shard 1 never ran:\n%s", Table(ts))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The hanging shard has reached its sleep: the node dies mid-shard.
	for !strings.Contains(strings.Join(r.calls(t), "\n"), "run smoke 1/2") {
		time.Sleep(100 * time.Millisecond)
	}
	if err := r.c.KillNode(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed node %s running shard 1", victim)
	v, _, bad := r.wait(t, ctx, subs)
	if v != "completed" {
		t.Errorf("verdict %s (%+v), want completed after the requeue", v, bad)
	}
	calls := strings.Join(r.calls(t), "\n")
	t.Logf("calls:\n%s", calls)
	var rerun string
	for _, l := range r.calls(t) {
		if f := strings.Fields(l); f[0] == "run" && f[2] == "1/2" && f[4] != "restart=0" {
			rerun = f[3]
		}
	}
	if rerun == "" || rerun == victim {
		t.Errorf("shard 1 was not run again on another node than %s (rerun on %q)", victim, rerun)
	}
	if !strings.Contains(calls, "merge smoke smoke-shard1 smoke-shard2") && !strings.Contains(calls, "merge smoke smoke-shard2 smoke-shard1") {
		t.Errorf("the merge did not find both shards")
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
