package slurm

import (
	"context"
	"fmt"
	"regexp"
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
	// Elapsed is the time it ran, as Slurm prints it ([D-]H:MM:SS or
	// M:SS); Exit is its exit code as scontrol prints it (CODE:SIGNAL),
	// "" until Describe asks for it.
	Elapsed, Exit string
}

// Status reads the state of every job of a submission from Slurm: squeue
// (every state, array tasks one a line) while slurmctld remembers the
// job, scontrol show job as a second source. Neither needs accounting
// (sacct needs slurmdbd, which Debian's Slurm here does not run). A job
// or array task neither reports (older than MinJobAge, or an array task
// cancelled while pending, which Slurm 22.05 drops) is reported with
// state UNKNOWN, not guessed, and counts as not completed.
func Status(ctx context.Context, run Commander, subs []Submitted) ([]Task, error) {
	var out []Task
	for _, s := range subs {
		ts, err := squeue(ctx, run, s)
		if err != nil {
			return out, err
		}
		if len(ts) == 0 {
			ts = scontrol(ctx, run, s.Name, s.JobID)
		}
		out = append(out, missingTasks(ctx, run, s, ts)...)
	}
	return out, nil
}

func squeue(ctx context.Context, run Commander, s Submitted) ([]Task, error) {
	b, err := run(ctx, "squeue", "-h", "-r", "-t", "all", "-j", s.JobID, "-o", "%i|%T|%r|%N|%M")
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
		if len(f) < 4 {
			continue
		}
		t := Task{Name: s.Name, JobID: f[0], State: f[1], Reason: f[2], Node: f[3]}
		if len(f) > 4 {
			t.Elapsed = f[4]
		}
		ts = append(ts, t)
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

// missingTasks adds, for an array, the tasks neither listing gave (a
// task cancelled while pending is not listed by squeue): each asked of
// scontrol by its own ID, UNKNOWN if it does not know it either.
func missingTasks(ctx context.Context, run Commander, s Submitted, ts []Task) []Task {
	if s.Tasks == 0 {
		return ts
	}
	seen := map[string]bool{}
	for _, t := range ts {
		seen[t.JobID] = true
	}
	for k := 0; k < s.Tasks; k++ {
		id := fmt.Sprintf("%s_%d", s.JobID, k)
		if !seen[id] {
			ts = append(ts, scontrol(ctx, run, s.Name, id)...)
		}
	}
	// A line for several tasks (a pending remainder, "12_[2-3]" or
	// "12_2-3") is not a task: its tasks are each listed or asked for
	// above.
	out := ts[:0]
	for _, t := range ts {
		if taskID.MatchString(t.JobID) {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return taskLess(out[i].JobID, out[j].JobID) })
	return out
}

var taskID = regexp.MustCompile(`^[0-9]+_[0-9]+$`)

func scontrol(ctx context.Context, run Commander, name, jobID string) []Task {
	b, err := run(ctx, "scontrol", "-o", "show", "job", jobID)
	if err != nil {
		return []Task{{Name: name, JobID: jobID, State: "UNKNOWN", Reason: "neither squeue nor scontrol reports it: cancelled before it started (Slurm then drops a pending array task), or ended more than MinJobAge ago (no accounting here)"}}
	}
	return parseScontrol(name, b)
}

// parseScontrol reads `scontrol -o show job` output: one job or array
// task a line, KEY=VALUE words.
func parseScontrol(name string, b []byte) []Task {
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
		ts = append(ts, Task{Name: name, JobID: id, State: kv["JobState"], Reason: kv["Reason"], Node: kv["NodeList"],
			Elapsed: kv["RunTime"], Exit: kv["ExitCode"]})
	}
	return ts
}

// Describe fills in each task's exit code (and its elapsed time where
// squeue gave none) from `scontrol show job`, one call per submitted job
// (an array's ID lists its every task): squeue prints no exit code. A
// task scontrol no longer knows keeps what it had.
func Describe(ctx context.Context, run Commander, subs []Submitted, ts []Task) []Task {
	known := map[string]Task{}
	for _, s := range subs {
		b, err := run(ctx, "scontrol", "-o", "show", "job", s.JobID)
		if err != nil {
			continue
		}
		for _, t := range parseScontrol(s.Name, b) {
			known[t.JobID] = t
		}
	}
	out := make([]Task, len(ts))
	for i, t := range ts {
		if k, ok := known[t.JobID]; ok {
			t.Exit = k.Exit
			if t.Elapsed == "" {
				t.Elapsed = k.Elapsed
			}
		}
		out[i] = t
	}
	return out
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

// Table is the tasks as aligned text, one a line: the job ID and array
// task apart (a single job's task is "-"), then what Slurm reports.
func Table(ts []Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-5s %-28s %-12s %-20s %-6s %-10s %s\n", "JOBID", "TASK", "NAME", "STATE", "NODE", "EXIT", "ELAPSED", "REASON")
	for _, t := range ts {
		id, task, ok := strings.Cut(t.JobID, "_")
		if !ok {
			task = "-"
		}
		fmt.Fprintf(&b, "%-8s %-5s %-28s %-12s %-20s %-6s %-10s %s\n", id, task, t.Name, t.State, dash(t.Node), dash(t.Exit), dash(t.Elapsed), t.Reason)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
