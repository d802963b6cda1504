package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Commander runs a Slurm client command (sbatch, squeue, scontrol) and
// returns its standard output. Exec runs it on this host; a test runs it
// where its in-namespace controller is reachable.
type Commander func(ctx context.Context, name string, args ...string) ([]byte, error)

// Submitted is one submitted script: what `harness slurm status` reads.
type Submitted struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	JobID string   `json:"job_id"`
	After []string `json:"after,omitempty"` // job IDs, afterany
	Tasks int      `json:"tasks,omitempty"` // an array's task count
}

// SubmissionFile is the record of a submission, in its directory.
const SubmissionFile = "submission.json"

// Submit writes plan's scripts into dir (NAME.sbatch), submits them in
// order, each with --dependency=afterany on the job IDs of the scripts it
// runs after, and records the job IDs in dir/submission.json. The jobs'
// log directory, results/slurm, is made first: sbatch does not make it,
// and a job whose output file cannot be opened fails without a word.
func Submit(ctx context.Context, run Commander, dir string, site Site, plan []Script) ([]Submitted, error) {
	if err := os.MkdirAll(filepath.Join(site.Results, "slurm"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var subs []Submitted
	for _, s := range plan {
		path := filepath.Join(dir, s.Name+".sbatch")
		if err := os.WriteFile(path, []byte(s.Text), 0o644); err != nil {
			return subs, err
		}
		sub := Submitted{Name: s.Name, Kind: s.Kind, Tasks: s.Tasks}
		args := []string{"--parsable"}
		for _, a := range s.After {
			sub.After = append(sub.After, subs[a].JobID)
		}
		if len(sub.After) > 0 {
			args = append(args, "--dependency=afterany:"+strings.Join(sub.After, ":"))
		}
		out, err := run(ctx, "sbatch", append(args, path)...)
		if err != nil {
			return subs, fmt.Errorf("sbatch %s: %w", path, err)
		}
		// --parsable prints "JOBID" or "JOBID;CLUSTER".
		id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
		if id == "" || strings.Trim(id, "0123456789") != "" {
			return subs, fmt.Errorf("sbatch %s: job ID %q is not a number", path, out)
		}
		sub.JobID = id
		subs = append(subs, sub)
		if err := writeSubmission(dir, subs); err != nil {
			return subs, err
		}
	}
	return subs, nil
}

func writeSubmission(dir string, subs []Submitted) error {
	b, err := json.MarshalIndent(subs, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, SubmissionFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, SubmissionFile))
}

// ReadSubmission reads dir/submission.json.
func ReadSubmission(dir string) ([]Submitted, error) {
	b, err := os.ReadFile(filepath.Join(dir, SubmissionFile))
	if err != nil {
		return nil, err
	}
	var subs []Submitted
	if err := json.Unmarshal(b, &subs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SubmissionFile), err)
	}
	return subs, nil
}
