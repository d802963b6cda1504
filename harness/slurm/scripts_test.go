package slurm

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden scripts in testdata")

var site = Site{Harness: "/opt/tokenbed/bin/harness", Results: "/shared/tokenbed/results", Partition: "batch", Account: "netlab"}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the script generated:\n%s", path, got)
	}
}

// A sharded run is an array (requeueable, shard K = task K-1) and a merge
// after it, afterany; the site's partition and account, quoted paths.
func TestRunPlanScripts(t *testing.T) {
	plan, err := RunPlan(Job{Name: "endurance-smoke", RunID: "tb00c0de", Experiment: "/shared/exp/endurance-smoke.yaml", Shards: 4,
		RunArgs: []string{"--backend", "sim", "--duration", "2h"}}, site)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Kind != "array" || plan[1].Kind != "merge" || len(plan[1].After) != 1 || plan[1].After[0] != 0 {
		t.Fatalf("plan: %+v", plan)
	}
	golden(t, "run-array.sbatch", plan[0].Text)
	golden(t, "run-merge.sbatch", plan[1].Text)
	// Without partition and account, no line names them.
	bare, err := RunPlan(Job{Name: "x", RunID: "tb00c0de", Experiment: "/e.yaml", Shards: 1}, Site{Harness: "/h", Results: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	if s := bare[0].Text; strings.Contains(s, "--partition") || strings.Contains(s, "--account") || !strings.Contains(s, "--array=0-0\n") {
		t.Errorf("a bare site's array script:\n%s", s)
	}
}

// A campaign: an array and a merge per job, then one index job after
// every merge.
func TestCampaignPlanScripts(t *testing.T) {
	plan, err := CampaignPlan([]Job{
		{Name: "sim-replay", RunID: "tb000001", Experiment: "/shared/exp/endurance.yaml", Shards: 8, RunArgs: []string{"--backend", "sim"}},
		{Name: "smoke", RunID: "tb000002", Experiment: "/shared/exp/endurance-smoke.yaml", Shards: 2},
	}, site)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range plan {
		kinds = append(kinds, s.Kind)
	}
	if got := strings.Join(kinds, " "); got != "array merge array merge index" {
		t.Fatalf("kinds %s", got)
	}
	if a := plan[4].After; len(a) != 2 || a[0] != 1 || a[1] != 3 {
		t.Errorf("index runs after %v, want the merges [1 3]", a)
	}
	golden(t, "campaign-index.sbatch", plan[4].Text)
}

// Bad input is refused with the field named, before any script exists.
func TestPlanRefusesBadInput(t *testing.T) {
	good := Job{Name: "x", RunID: "tb00c0de", Experiment: "/e.yaml", Shards: 2}
	for _, c := range []struct {
		job  Job
		site Site
		want string
	}{
		{good, Site{Harness: "bin/harness", Results: "/r"}, "harness binary"},
		{good, Site{Harness: "/h", Results: "results"}, "results directory"},
		{good, Site{Harness: "/h", Results: "/r", Partition: "a b"}, "partition"},
		{good, Site{Harness: "/h", Results: "/my results"}, "results directory"},
		{good, Site{Harness: "/h", Results: "/r", Account: "x;rm"}, "account"},
		{Job{Name: "x y", RunID: "tb00c0de", Experiment: "/e.yaml", Shards: 2}, site, "job name"},
		{Job{Name: "x", RunID: "tb00c0de", Experiment: "/e.yaml", Shards: 0}, site, "0 shards"},
		{Job{Name: "x", RunID: "tb00c0de", Experiment: "e.yaml", Shards: 2}, site, "experiment"},
	} {
		if _, err := RunPlan(c.job, c.site); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %+v: error %v, want one naming %q", c.job, c.site, err, c.want)
		}
	}
	if _, err := CampaignPlan([]Job{good, good}, site); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a campaign naming a job twice: %v", err)
	}
}

// Submit passes each script's dependencies as the job IDs sbatch gave
// the scripts it runs after, and records them.
func TestSubmitChainsDependencies(t *testing.T) {
	dir := t.TempDir()
	s := Site{Harness: "/h", Results: filepath.Join(dir, "results")}
	plan, err := CampaignPlan([]Job{{Name: "a", RunID: "tb000001", Experiment: "/e.yaml", Shards: 2}, {Name: "b", RunID: "tb000002", Experiment: "/e.yaml", Shards: 3}}, s)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	next := 100
	fake := func(_ context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args[:len(args)-1], " "))
		next++
		return []byte(strconv.Itoa(next) + ";cluster\n"), nil
	}
	subs, err := Submit(context.Background(), fake, filepath.Join(dir, "sub"), s, plan)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sbatch --parsable",
		"sbatch --parsable --dependency=afterany:101",
		"sbatch --parsable",
		"sbatch --parsable --dependency=afterany:103",
		"sbatch --parsable --dependency=afterany:102:104",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("sbatch calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	back, err := ReadSubmission(filepath.Join(dir, "sub"))
	if err != nil || len(back) != 5 || back[4].JobID != "105" || back[4].After[1] != "104" || subs[0].JobID != "101" {
		t.Errorf("submission.json: %+v %v", back, err)
	}
	if _, err := os.Stat(filepath.Join(s.Results, "slurm")); err != nil {
		t.Errorf("the jobs' log directory was not made: %v", err)
	}
	// sbatch's refusal stops the submission, named.
	refuse := func(context.Context, string, ...string) ([]byte, error) {
		return nil, errors.New("sbatch: error: invalid partition specified: nope")
	}
	if _, err := Submit(context.Background(), refuse, filepath.Join(dir, "sub2"), s, plan); err == nil || !strings.Contains(err.Error(), "a-shards.sbatch") {
		t.Errorf("a refused submission: %v", err)
	}
}

// A job of several whole runs (a campaign job's seeds) is one array, task
// T run T with its own run ID, experiment and tags, and no merge: the
// index job runs after the array itself.
func TestSeedRunsArray(t *testing.T) {
	runs := []Run{{RunID: "tb000011", Experiment: "/r/slurm/c1/ftn-seeds-seed1.yaml", Env: []string{"TOKENBED_JOB=ftn-seeds", `TOKENBED_OVERRIDES={"seed":"1"}`}},
		{RunID: "tb000012", Experiment: "/r/slurm/c1/ftn-seeds-seed2.yaml", Env: []string{"TOKENBED_JOB=ftn-seeds"}}}
	plan, err := CampaignPlan([]Job{{Name: "ftn-seeds", Runs: runs, RunArgs: []string{"--backend", "sim"}}}, site)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Kind != "array" || plan[0].Tasks != 2 || plan[1].Kind != "index" || len(plan[1].After) != 1 || plan[1].After[0] != 0 {
		t.Fatalf("plan: %+v", plan)
	}
	golden(t, "seed-runs.sbatch", plan[0].Text)
	runs[1].Env = []string{"NOT A NAME=1"}
	if _, err := CampaignPlan([]Job{{Name: "ftn-seeds", Runs: runs}}, site); err == nil || !strings.Contains(err.Error(), `run 1: job ftn-seeds: environment "NOT A NAME=1": want NAME=VALUE`) {
		t.Errorf("a bad environment: %v", err)
	}
}
