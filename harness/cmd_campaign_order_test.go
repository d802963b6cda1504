package main

import (
	"strings"
	"testing"
	"time"

	"tokenbed/experiments/campaign"
	"tokenbed/harness/slurm"
)

// Jobs go to Slurm longest task first: an array's task is its estimate
// over its shards (or runs), a one-task job its whole estimate; ties and
// jobs without an estimate keep the file's order.
func TestSubmitLongestTaskFirst(t *testing.T) {
	cases := []struct {
		job campaign.Job
		sj  slurm.Job
	}{
		{campaign.Job{Name: "replay", Estimate: 16 * time.Minute}, slurm.Job{Name: "replay", Shards: 2}},               // 8m a task
		{campaign.Job{Name: "none"}, slurm.Job{Name: "none", Shards: 1}},                                               // 0
		{campaign.Job{Name: "study", Estimate: 10 * time.Minute}, slurm.Job{Name: "study", Task: []string{"x"}}},       // 10m
		{campaign.Job{Name: "seeds", Estimate: 8 * time.Minute}, slurm.Job{Name: "seeds", Runs: make([]slurm.Run, 8)}}, // 1m
		{campaign.Job{Name: "swarm", Estimate: 1 * time.Minute}, slurm.Job{Name: "swarm", Task: []string{"x"}}},        // 1m
	}
	var jobs []slurm.Job
	var lengths []time.Duration
	for _, c := range cases {
		jobs = append(jobs, c.sj)
		lengths = append(lengths, taskLength(c.job, c.sj))
	}
	longestFirst(jobs, lengths)
	var got []string
	for _, j := range jobs {
		got = append(got, j.Name)
	}
	if s := strings.Join(got, " "); s != "study replay seeds swarm none" {
		t.Errorf("submission order %s, want study replay seeds swarm none", s)
	}
}
