package slurm

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Task is the state of one job, or of one task of a job array, as Slurm
// reports it.
type Task struct {
	Name   string // the script's name
	JobID  string // "12" or, for an array task, "12_3"
	State  string // Slurm's: PENDING, RUNNING, COMPLETED, FAILED, NODE_FAIL, ...
	Reason string // why pending, or "None"
	Node   string
}

// Status reads the state of every job of a submission from Slurm: squeue
// (every state, array tasks one a line) while slurmctld remembers the
// job, scontrol show job as a second source. Neither needs accounting
// (sacct needs slurmdbd, which Debian's Slurm here does not run). A job
// both have forgotten (older than MinJobAge) is reported with state
// UNKNOWN, not guessed.
func Status(ctx context.Context, run Commander, subs []Submitted) ([]Task, error) {
	var out []Task
	for _, s := range subs {
		ts, err := squeue(ctx, run, s)
		if err != nil {
			return out, err
		}
		if len(ts) == 0 {
			ts = scontrol(ctx, run, s)
		}
		out = append(out, ts...)
	}
	return out, nil
}

func squeue(ctx context.Context, run Commander, s Submitted) ([]Task, error) {
	b, err := run(ctx, "squeue", "-h", "-r", "-t", "all", "-j", s.JobID, "-o", "%i|%T|%r|%N")
	if err != nil {
		// squeue fails on a job ID slurmctld no longer knows.
		if strings.Contains(err.Error(), "Invalid job id") {
			return nil, nil
		}
		return nil, err
	}
	var ts []Task
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 {
			continue
		}
		ts = append(ts, Task{Name: s.Name, JobID: f[0], State: f[1], Reason: f[2], Node: f[3]})
	}
	sort.SliceStable(ts, func(i, j int) bool { return taskLess(ts[i].JobID, ts[j].JobID) })
	return ts, nil
}

// taskLess orders "12_2" before "12_10".
func taskLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func scontrol(ctx context.Context, run Commander, s Submitted) []Task {
	b, err := run(ctx, "scontrol", "-o", "show", "job", s.JobID)
	if err != nil {
		return []Task{{Name: s.Name, JobID: s.JobID, State: "UNKNOWN", Reason: "neither squeue nor scontrol knows it (ended more than MinJobAge ago; no accounting here)"}}
	}
	var ts []Task
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		kv := map[string]string{}
		for _, w := range strings.Fields(line) {
			if k, v, ok := strings.Cut(w, "="); ok {
				kv[k] = v
			}
		}
		id := kv["JobId"]
		if t := kv["ArrayTaskId"]; t != "" && kv["ArrayJobId"] != "" {
			id = kv["ArrayJobId"] + "_" + t
		}
		ts = append(ts, Task{Name: s.Name, JobID: id, State: kv["JobState"], Reason: kv["Reason"], Node: kv["NodeList"]})
	}
	return ts
}

// Verdict sums a submission's tasks up: "running" while any is pending
// or running, then "completed" if every one completed, else "failed",
// with the tasks that did not complete.
func Verdict(ts []Task) (string, []Task) {
	var bad []Task
	live := false
	for _, t := range ts {
		switch t.State {
		case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED":
			live = true
		case "COMPLETED":
		default:
			bad = append(bad, t)
		}
	}
	switch {
	case live:
		return "running", bad
	case len(bad) > 0:
		return "failed", bad
	}
	return "completed", nil
}

// Table is the tasks as aligned text, one a line.
func Table(ts []Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %-10s %-12s %-24s %s\n", "JOB", "ID", "STATE", "NODE", "REASON")
	for _, t := range ts {
		fmt.Fprintf(&b, "%-28s %-10s %-12s %-24s %s\n", t.Name, t.JobID, t.State, t.Node, t.Reason)
	}
	return b.String()
}
