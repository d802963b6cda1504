// Package slurm is the Slurm engine: it turns a sharded run (or a
// campaign's sharded jobs) into sbatch scripts, submits them with their
// dependencies, and reads the jobs' states back with squeue and scontrol.
//
// A sharded run is two jobs:
//
//	NAME-shards  a job array of N tasks, --requeue: task T runs
//	             harness run --run-id RUNID --shard T+1/N, writing its
//	             shard directory under RESULTS/shards/RUNID/T+1/; a node that
//	             dies mid-shard costs that shard only, run again elsewhere
//	NAME-merge   --dependency=afterany:ARRAY: runs once every task has
//	             ended, however, so that a shard that failed for good is
//	             named by harness merge (its replicas not judged), never
//	             waited for; the merged run is RESULTS/RUNID
//
// A job of several whole runs (a campaign job's seeds) is one array,
// NAME-runs, task T running run T under its own run ID, with no merge.
// A campaign job that is not one run (a study, a swarm) is one task,
// NAME-task, --requeue, that runs it as harness campaign run --job does.
// A campaign adds one last job, afterany on every merge (or runs array),
// that indexes the night into the results database (harness index).
//
// The engine writes text and runs client commands; Slurm does the
// scheduling. Results go to a directory every node sees: a shared
// filesystem on a real cluster.
package slurm

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// Job is one sharded run.
type Job struct {
	Name       string   // job name stem: letters, digits, - _ .
	RunID      string   // the run's ID; each shard's is derived from it
	Experiment string   // experiment file, absolute
	Shards     int      // array size
	RunArgs    []string // further harness run flags (e.g. --backend sim)
	// Env is KEY=VALUE pairs each shard exports before it runs: a
	// campaign's tags (results.CampaignEnv and the rest), which the
	// shards' run.json record and the merge keeps.
	Env []string
	// Runs, when given, make the job an array of whole runs, one task
	// each (a campaign job's seeds), and no merge: Experiment, RunID,
	// Shards and Env are then not used.
	Runs []Run
	// Task, when given, makes the job one task, no array and no merge (a
	// campaign job the engine does not shard: a study, a swarm): the
	// script changes to Dir and runs the harness with these arguments
	// (campaign run --job NAME --id ID FILE). Only Name is used besides.
	Task []string
	Dir  string // absolute: the submitter's working directory, the source tree
}

// Run is one whole run of a job of several: its own experiment file
// (the seed overridden), run ID and tags.
type Run struct {
	RunID      string
	Experiment string // absolute
	Env        []string
}

// Site is where and as whom the jobs run.
type Site struct {
	Harness   string // the harness binary every node runs, absolute
	Results   string // shared results root, absolute
	Partition string // "" for the cluster's default
	Account   string // "" for the user's default
}

// Script is one sbatch script.
type Script struct {
	Name string // file name stem and Slurm job name
	Kind string // "array", "merge", "index"
	Text string
	// Tasks is an array's task count (0 for a single job): status
	// expects each, so that a task Slurm no longer reports is not
	// silently dropped.
	Tasks int
	// After are the indices, in the plan, of the scripts this one runs
	// after (afterany).
	After []int
}

var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (s Site) check() error {
	if !filepath.IsAbs(s.Harness) {
		return fmt.Errorf("harness binary %q: want an absolute path every node can run", s.Harness)
	}
	if !filepath.IsAbs(s.Results) {
		return fmt.Errorf("results directory %q: want an absolute path every node sees", s.Results)
	}
	// #SBATCH lines are not shell: sbatch's own parser reads them, so
	// the paths in them are kept to characters that need no quoting.
	for what, v := range map[string]string{"harness binary": s.Harness, "results directory": s.Results} {
		if quote(v) != v {
			return fmt.Errorf("%s %q: want a path of letters, digits and / . _ - (it goes into #SBATCH lines)", what, v)
		}
	}
	for what, v := range map[string]string{"partition": s.Partition, "account": s.Account} {
		if v != "" && !namePattern.MatchString(v) {
			return fmt.Errorf("%s %q: want letters, digits, '.', '_' or '-'", what, v)
		}
	}
	return nil
}

func (j Job) check() error {
	if !namePattern.MatchString(j.Name) {
		return fmt.Errorf("job name %q: want letters, digits, '.', '_' or '-'", j.Name)
	}
	if len(j.Task) > 0 {
		if !filepath.IsAbs(j.Dir) {
			return fmt.Errorf("job %s: directory %q: want an absolute path every node sees", j.Name, j.Dir)
		}
		return nil
	}
	if len(j.Runs) > 0 {
		for i, r := range j.Runs {
			if err := (Job{Name: j.Name, RunID: r.RunID, Experiment: r.Experiment, Shards: 1, Env: r.Env}).check(); err != nil {
				return fmt.Errorf("run %d: %w", i, err)
			}
		}
		return nil
	}
	if j.Shards < 1 || j.Shards > 10000 {
		return fmt.Errorf("job %s: %d shards: want 1 to 10000", j.Name, j.Shards)
	}
	if !filepath.IsAbs(j.Experiment) {
		return fmt.Errorf("job %s: experiment %q: want an absolute path every node sees", j.Name, j.Experiment)
	}
	if j.RunID == "" {
		return fmt.Errorf("job %s: no run ID", j.Name)
	}
	for _, kv := range j.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || !envName.MatchString(k) {
			return fmt.Errorf("job %s: environment %q: want NAME=VALUE", j.Name, kv)
		}
	}
	return nil
}

var scripts = template.Must(template.New("").Funcs(template.FuncMap{"q": quote, "qs": quoteAll, "env": quoteEnv}).Parse(`
{{define "head"}}#!/bin/sh
#SBATCH --job-name={{.Name}}
#SBATCH --output={{q .Log}}
#SBATCH --chdir={{q .Site.Results}}
{{if .Site.Partition}}#SBATCH --partition={{.Site.Partition}}
{{end}}{{if .Site.Account}}#SBATCH --account={{.Site.Account}}
{{end}}{{end}}
{{define "array"}}{{template "head" .}}#SBATCH --array=0-{{.Last}}
#SBATCH --requeue
#SBATCH --ntasks=1
# Shard K of N is task K-1. A requeued task starts again from nothing:
# its earlier, partial shard directory goes first. The run's verdict is
# the merged one, so a shard is not analysed on its own: the task fails
# only when the shard could not run.
set -eu
shard=$((SLURM_ARRAY_TASK_ID + 1))
dir={{q .ShardRoot}}/$shard
rm -rf "$dir"
mkdir -p "$dir"
{{range .Job.Env}}export {{env .}}
{{end}}exec {{q .Site.Harness}} run --run-id {{.Job.RunID}} --shard "$shard/{{.Job.Shards}}" --results "$dir" --no-analyze{{qs .Job.RunArgs}} {{q .Job.Experiment}}
{{end}}
{{define "runs"}}{{template "head" .}}#SBATCH --array=0-{{.Last}}
#SBATCH --requeue
#SBATCH --ntasks=1
# Task T is the job's run T (one per seed), whole, under its own run ID,
# judged as harness run judges it. A requeued task starts again from
# nothing: its earlier, partial run directory goes first.
set -eu
case "$SLURM_ARRAY_TASK_ID" in
{{range $i, $r := .Job.Runs}}{{$i}})
	run={{$r.RunID}} exp={{q $r.Experiment}}
{{range $r.Env}}	export {{env .}}
{{end}}	;;
{{end}}*)
	echo "task $SLURM_ARRAY_TASK_ID: the job has {{len .Job.Runs}} runs" >&2
	exit 2
	;;
esac
rm -rf {{q .Site.Results}}/"$run"
exec {{q .Site.Harness}} run --run-id "$run" --results {{q .Site.Results}}{{qs .Job.RunArgs}} "$exp"
{{end}}
{{define "task"}}{{template "head" .}}#SBATCH --requeue
#SBATCH --ntasks=1
# One campaign job the engine does not shard, run whole as harness
# campaign run runs it, from the submitter's working directory (a study
# runs go run in the source tree). It writes only its own job's record;
# the index job builds the database. A requeued task runs it again.
set -eu
cd {{q .Job.Dir}}
exec {{q .Site.Harness}}{{qs .Job.Task}}
{{end}}
{{define "merge"}}{{template "head" .}}#SBATCH --ntasks=1
# Runs after every shard has ended, whether it succeeded or not: harness
# merge names the shards that are missing, their replicas are not judged,
# and it exits 1.
set -eu
exec {{q .Site.Harness}} merge -o {{q .Merged}} {{q .ShardRoot}}/*/*
{{end}}
{{define "index"}}{{template "head" .}}#SBATCH --ntasks=1
# The campaign's last job: after every merge, index the night's results.
set -eu
exec {{q .Site.Harness}} index --results {{q .Site.Results}}
{{end}}`))

type scriptData struct {
	Name, Log, ShardRoot string
	Merged               string // the merged run's directory: RESULTS/RUNID
	Last                 int
	Site                 Site
	Job                  Job
}

// RunPlan is the scripts of one sharded run: its array and its merge.
func RunPlan(j Job, s Site) ([]Script, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := j.check(); err != nil {
		return nil, err
	}
	return appendJob(nil, j, s)
}

// CampaignPlan is the scripts of a campaign's jobs, in the order given
// (Slurm starts them in submission order: the caller puts the longest
// tasks first), then one index job after every merge, array of runs and
// task.
func CampaignPlan(jobs []Job, s Site) ([]Script, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []Script
	var merges []int
	seen := map[string]bool{}
	for _, j := range jobs {
		if err := j.check(); err != nil {
			return nil, err
		}
		if seen[j.Name] {
			return nil, fmt.Errorf("job name %s twice in the campaign", j.Name)
		}
		seen[j.Name] = true
		var err error
		if out, err = appendJob(out, j, s); err != nil {
			return nil, err
		}
		merges = append(merges, len(out)-1)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("a campaign with no job")
	}
	d := scriptData{Name: "index", Log: filepath.Join(s.Results, "slurm", "index.out"), Site: s}
	text, err := render("index", d)
	if err != nil {
		return nil, err
	}
	return append(out, Script{Name: "index", Kind: "index", Text: text, After: merges}), nil
}

func appendJob(out []Script, j Job, s Site) ([]Script, error) {
	if len(j.Task) > 0 {
		d := scriptData{Site: s, Job: j, Name: j.Name + "-task", Log: filepath.Join(s.Results, "slurm", j.Name+"-task.out")}
		text, err := render("task", d)
		if err != nil {
			return nil, err
		}
		return append(out, Script{Name: d.Name, Kind: "task", Text: text}), nil
	}
	if len(j.Runs) > 0 {
		d := scriptData{Site: s, Job: j, Last: len(j.Runs) - 1, Name: j.Name + "-runs", Log: filepath.Join(s.Results, "slurm", j.Name+"-run-%a.out")}
		text, err := render("runs", d)
		if err != nil {
			return nil, err
		}
		return append(out, Script{Name: d.Name, Kind: "array", Text: text, Tasks: len(j.Runs)}), nil
	}
	d := scriptData{Site: s, Job: j, Last: j.Shards - 1, ShardRoot: filepath.Join(s.Results, "shards", j.RunID),
		Merged: filepath.Join(s.Results, j.RunID)}
	d.Name, d.Log = j.Name+"-shards", filepath.Join(s.Results, "slurm", j.Name+"-shard-%a.out")
	arr, err := render("array", d)
	if err != nil {
		return nil, err
	}
	d.Name, d.Log = j.Name+"-merge", filepath.Join(s.Results, "slurm", j.Name+"-merge.out")
	merge, err := render("merge", d)
	if err != nil {
		return nil, err
	}
	a := len(out)
	return append(out, Script{Name: j.Name + "-shards", Kind: "array", Text: arr, Tasks: j.Shards},
		Script{Name: j.Name + "-merge", Kind: "merge", Text: merge, After: []int{a}}), nil
}

func render(name string, d scriptData) (string, error) {
	var b strings.Builder
	if err := scripts.ExecuteTemplate(&b, name, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

// quote makes s one shell word: bare when it holds only safe characters,
// single-quoted otherwise.
func quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// quoteEnv is KEY=VALUE with VALUE one shell word.
func quoteEnv(kv string) string {
	k, v, _ := strings.Cut(kv, "=")
	return k + "=" + quote(v)
}

// quoteAll is each of args quoted, each after a space.
func quoteAll(args []string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(" " + quote(a))
	}
	return b.String()
}
