package slurm

import (
	"strings"
	"testing"
)

// A job the engine does not shard (a study, a swarm) is one task, not an
// array, requeued on a node's loss, run from the submitter's directory;
// the index job runs after it as after a merge.
func TestOneTaskJob(t *testing.T) {
	task := Job{Name: "wandering", Dir: "/shared/tokenbed",
		Task: []string{"campaign", "run", "--job", "wandering", "--id", "c1", "--results", "/r", "--set", "wandering:x=a b", "/shared/tokenbed/night.yaml"}}
	plan, err := CampaignPlan([]Job{task, {Name: "smoke", RunID: "tb000002", Experiment: "/e.yaml", Shards: 2}}, site)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 4 || plan[0].Kind != "task" || plan[0].Tasks != 0 || plan[3].Kind != "index" ||
		len(plan[3].After) != 2 || plan[3].After[0] != 0 || plan[3].After[1] != 2 {
		t.Fatalf("plan: %+v", plan)
	}
	golden(t, "one-task.sbatch", plan[0].Text)
	task.Dir = "tokenbed"
	if _, err := CampaignPlan([]Job{task}, site); err == nil || !strings.Contains(err.Error(), `job wandering: directory "tokenbed"`) {
		t.Errorf("a relative directory: %v", err)
	}
}
