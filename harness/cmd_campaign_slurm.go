package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"tokenbed/experiments"
	"tokenbed/experiments/campaign"
	"tokenbed/harness/backend"
	hcampaign "tokenbed/harness/campaign"
	"tokenbed/harness/runner"
	"tokenbed/harness/sim"
	"tokenbed/harness/slurm"
	"tokenbed/internal/cli"
	"tokenbed/internal/results"
)

// setFlags are --set JOB:PATH=VALUE flags, each checked as it is given
// (its job and the experiment after it are checked by ApplySets); raw
// keeps them as given, for the Slurm tasks that run campaign run.
type setFlags struct {
	sets []campaign.Set
	raw  []string
}

func (s *setFlags) String() string { return fmt.Sprint(len(s.sets)) + " sets" }

func (s *setFlags) Set(v string) error {
	x, err := campaign.ParseSet(v)
	if err != nil {
		return err
	}
	s.sets, s.raw = append(s.sets, x), append(s.raw, v)
	return nil
}

// cmdCampaignSubmit is harness campaign submit --slurm FILE: each job
// that is one sharded run becomes a job array and a merge, a job of seeds
// an array of whole runs, and a study or a swarm one task that runs it
// as harness campaign run --job does; an index job runs after them all.
// They are submitted longest task first. The container jobs stay on the
// submit host, named with why.
func cmdCampaignSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness campaign submit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	on := fs.Bool("slurm", false, "submit to Slurm (the only engine)")
	root := fs.String("results", "results", "results root every node sees (a shared filesystem)")
	maxShards := fs.Int("shards", 0, "at most this many shards per job (default: one per replica)")
	partition := fs.String("partition", "", "the Slurm partition (default: the cluster's default)")
	account := fs.String("account", "", "the Slurm account (default: the user's default)")
	agent := fs.String("agent", agentBinary(), "agent binary every node runs, for the jobs on real backends")
	id := fs.String("id", "", "campaign ID (default: c and the submit time, UTC)")
	var sets setFlags
	fs.Var(&sets, "set", "JOB:PATH=VALUE: override an experiment field of job JOB, after the file's overrides (repeatable)")
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if !*on || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: harness campaign submit --slurm [flags] CAMPAIGN.yaml")
		return exitUsage
	}
	opts := campaign.Options{Studies: hcampaign.IsStudy, Known: hcampaign.Studies(), Backends: backend.Names()}
	c, err := campaign.Load(fs.Arg(0), opts)
	if err == nil {
		err = c.ApplySets(sets.sets, opts)
	}
	if err != nil {
		fmt.Fprintln(stderr, "harness campaign submit: campaign:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *id == "" {
		*id = "c" + time.Now().UTC().Format("20060102T150405Z")
	}
	if !validCampaignID(*id) {
		fmt.Fprintf(stderr, "harness campaign submit: --id %q: letters, digits, '-', '_' and '.' only\n", *id)
		return exitUsage
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	absRoot, aerr := filepath.Abs(*root)
	absAgent, gerr := filepath.Abs(*agent)
	if err = firstErr(err, aerr, gerr); err != nil {
		fmt.Fprintln(stderr, "harness campaign submit:", err)
		return exitUsage
	}
	dir := filepath.Join(absRoot, "slurm", *id)
	file, ferr := filepath.Abs(fs.Arg(0))
	wd, werr := os.Getwd()
	if err = firstErr(ferr, werr); err != nil {
		fmt.Fprintln(stderr, "harness campaign submit:", err)
		return exitUsage
	}
	// A task runs its job with the submission's --set flags, from this
	// directory (the source tree on the shared filesystem).
	task := []string{"campaign", "run", "--id", *id, "--results", absRoot, "--agent", absAgent}
	for _, v := range sets.raw {
		task = append(task, "--set", v)
	}
	var jobs []slurm.Job
	var lengths []time.Duration
	for _, j := range c.Jobs {
		sj, why := slurmJob(j, *maxShards, absAgent, dir, *id)
		if why == notRun {
			sj, why = slurm.Job{Name: j.Name, Dir: wd, Task: append(slices.Clone(task), "--job", j.Name, file)}, ""
		}
		if why != "" {
			fmt.Fprintf(stdout, "stays on the submit host: %-24s %s\n", j.Name, why)
			continue
		}
		jobs = append(jobs, sj)
		lengths = append(lengths, taskLength(j, sj))
	}
	longestFirst(jobs, lengths)
	site := slurm.Site{Harness: exe, Results: absRoot, Partition: *partition, Account: *account}
	plan, err := slurm.CampaignPlan(jobs, site)
	if err != nil {
		fmt.Fprintln(stderr, "harness campaign submit:", err)
		return exitUsage
	}
	if !submitSaying(ctx, "harness campaign submit", dir, site, plan, stdout, stderr) {
		return exitRunError
	}
	fmt.Fprintf(stdout, "campaign %s: state: harness campaign status %s\n", *id, dir)
	return exitOK
}

// notRun is slurmJob's answer for a job that is not runs of one
// experiment (a study, a swarm): it is submitted as one task.
const notRun = "not one run"

// slurmJob is campaign job j as one sharded run, or as an array of whole
// runs (one per seed), or notRun, or why it stays on the submit host. Its runs are tagged with the
// campaign ID and the job as campaign run tags its runs; an overridden
// experiment is written into the submission's directory dir (JOB.yaml,
// JOB-seedN.yaml), and the tasks run it.
func slurmJob(j campaign.Job, maxShards int, agent, dir, id string) (slurm.Job, string) {
	switch {
	case j.Kind() == campaign.KindStudy || j.Swarm > 0:
		return slurm.Job{}, notRun
	case j.Backend == "container":
		return slurm.Job{}, "containers: not tried from a node (every node needs the image and a Docker daemon); harness campaign run --job runs it here"
	}
	exp, err := filepath.Abs(j.Experiment)
	if err != nil {
		return slurm.Job{}, err.Error()
	}
	b := j.Backend
	if b == "" {
		b = "netns"
	}
	args := []string{"--backend", b}
	if b != sim.Name {
		args = append(args, "--agent", agent)
	}
	if j.Replicas > 0 {
		args = append(args, "--replicas", fmt.Sprint(j.Replicas))
	}
	if j.Duration > 0 {
		args = append(args, "--duration", j.Duration.String())
	}
	if len(j.Seeds) > 0 {
		out := slurm.Job{Name: j.Name, RunArgs: args}
		for _, seed := range j.Seeds {
			over := map[string]any{"seed": seed}
			for k, v := range j.Overrides {
				over[k] = v
			}
			file, env, err := tagged(exp, dir, fmt.Sprintf("%s-seed%d.yaml", j.Name, seed), id, j.Name, over)
			if err != nil {
				return slurm.Job{}, err.Error()
			}
			out.Runs = append(out.Runs, slurm.Run{RunID: runner.NewRunID(), Experiment: file, Env: env})
		}
		return out, ""
	}
	exp, env, err := tagged(exp, dir, j.Name+".yaml", id, j.Name, j.Overrides)
	if err != nil {
		return slurm.Job{}, err.Error()
	}
	e, err := experiments.Load(exp)
	if err != nil {
		return slurm.Job{}, "experiment: " + err.Error()
	}
	replicas := e.Replicas
	if b == sim.Name {
		replicas = 1 // as harness run --backend sim: one continuous replica
	}
	if j.Replicas > 0 {
		replicas = j.Replicas
	}
	shards := replicas
	if maxShards > 0 && shards > maxShards {
		shards = maxShards
	}
	return slurm.Job{Name: j.Name, RunID: runner.NewRunID(), Experiment: exp, Shards: shards, RunArgs: args, Env: env}, ""
}

// tagged is the experiment a run of job runs (exp, or exp after over
// written into dir as name) and the environment that tags the run.
func tagged(exp, dir, name, id, job string, over map[string]any) (string, []string, error) {
	env := []string{results.CampaignEnv + "=" + id, results.JobEnv + "=" + job}
	if len(over) == 0 {
		return exp, env, nil
	}
	exp, err := hcampaign.WriteOverridden(exp, dir, name, over)
	if err != nil {
		return "", nil, fmt.Errorf("overrides: %w", err)
	}
	b, _ := json.Marshal(hcampaign.Tags(over)) // map[string]string: cannot fail
	return exp, append(env, results.OverridesEnv+"="+string(b)), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// taskLength is the estimated length of one of job j's tasks: its
// estimate over its shards or runs (the file's estimates are whole jobs
// on one machine).
func taskLength(j campaign.Job, sj slurm.Job) time.Duration {
	switch {
	case len(sj.Runs) > 0:
		return j.Estimate / time.Duration(len(sj.Runs))
	case sj.Shards > 1:
		return j.Estimate / time.Duration(sj.Shards)
	}
	return j.Estimate
}

// longestFirst orders jobs by their tasks' estimated length, longest
// first, ties in the file's order: Slurm starts pending jobs in
// submission order on the free CPUs, so the longest tasks starting first
// (LPT) ends the night soonest.
func longestFirst(jobs []slurm.Job, lengths []time.Duration) {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lengths[idx[a]] > lengths[idx[b]] })
	sorted := make([]slurm.Job, len(jobs))
	for i, k := range idx {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
}
