package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"tokenbed/experiments"
	"tokenbed/harness/sim"
	"tokenbed/harness/slurm"
)

// slurmFlags are harness run's flags for the Slurm engine.
type slurmFlags struct {
	on                 bool
	shards             int
	partition, account string
}

// slurmOnly are the run flags the engine consumes itself: a shard's
// command line does not get them (the script sets --results and
// --run-id per shard).
var slurmOnly = map[string]bool{"slurm": true, "shards": true, "partition": true, "account": true, "results": true, "run-id": true, "cpu": true, "no-analyze": true}

func (s *slurmFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.on, "slurm", false, "submit the run to Slurm as a job array of --shards shards and a merge job, and return (RESULTS must be a directory every node sees)")
	fs.IntVar(&s.shards, "shards", 0, "with --slurm: the number of shards (default: one per replica)")
	fs.StringVar(&s.partition, "partition", "", "with --slurm: the Slurm partition (default: the cluster's default)")
	fs.StringVar(&s.account, "account", "", "with --slurm: the Slurm account (default: the user's default)")
}

// runSlurm submits the run: shard K of N runs `harness run --shard K/N`
// on whichever node Slurm gives it, the merge job `harness merge`.
func runSlurm(ctx context.Context, f runFlags, fs *flag.FlagSet, e *experiments.Experiment, expPath string, stdout, stderr io.Writer) int {
	replicas := e.Replicas
	shards := f.slurm.shards
	if shards == 0 {
		shards = replicas
	}
	if shards < 1 || shards > replicas {
		fmt.Fprintf(stderr, "harness run: --shards %d: want 1 to the run's %d replicas (a shard holds at least one; give --replicas for more)\n", shards, replicas)
		return exitUsage
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	abs := func(p string) string {
		if a, aerr := filepath.Abs(p); aerr == nil {
			return a
		}
		return p
	}
	if err != nil {
		fmt.Fprintln(stderr, "harness run: --slurm: the harness binary:", err)
		return exitRunError
	}
	// Every flag given is passed to the shards, except the engine's own;
	// paths become absolute, since the shards run in the results root.
	var args []string
	fs.Visit(func(fl *flag.Flag) {
		if slurmOnly[fl.Name] {
			return
		}
		v := fl.Value.String()
		if fl.Name == "agent" {
			v = abs(v)
		}
		args = append(args, "--"+fl.Name, v)
	})
	if f.backend != sim.Name && !strings.Contains(strings.Join(args, " "), "--agent ") {
		args = append(args, "--agent", abs(f.agent))
	}
	name := strings.TrimSuffix(filepath.Base(expPath), filepath.Ext(expPath))
	site := slurm.Site{Harness: exe, Results: abs(f.results), Partition: f.slurm.partition, Account: f.slurm.account}
	plan, err := slurm.RunPlan(slurm.Job{Name: name, RunID: f.runID, Experiment: abs(expPath), Shards: shards, RunArgs: args}, site)
	if err != nil {
		fmt.Fprintln(stderr, "harness run: --slurm:", err)
		return exitUsage
	}
	dir := filepath.Join(site.Results, "slurm", f.runID)
	if !submitSaying(ctx, "harness run: --slurm", dir, site, plan, stdout, stderr) {
		return exitRunError
	}
	fmt.Fprintf(stdout, "run %s: %d shards under %s; merged into %s\nstate: harness slurm status %s\n",
		f.runID, shards, filepath.Join(site.Results, "shards", f.runID), site.Results, dir)
	return exitOK
}

// submitSaying submits plan, printing each job ID sbatch gave; on error
// it says so under prefix and returns false.
func submitSaying(ctx context.Context, prefix, dir string, site slurm.Site, plan []slurm.Script, stdout, stderr io.Writer) bool {
	subs, err := slurm.Submit(ctx, execSlurm, dir, site, plan)
	for _, s := range subs {
		fmt.Fprintf(stdout, "submitted %-28s job %s\n", s.Name, s.JobID)
	}
	if err != nil {
		fmt.Fprintln(stderr, prefix+":", err)
		return false
	}
	return true
}

// exitPending: harness slurm status found jobs not yet ended.
const exitPending = 4

// execSlurm runs a Slurm client command on this host.
func execSlurm(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// cmdSlurm is harness slurm status SUBMISSION_DIR: the state of every job
// and array task of a submission, from squeue and scontrol; exit 0 when
// all completed, 1 when one did not, 4 (exitPending) while any is pending or
// running.
func cmdSlurm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: harness slurm status SUBMISSION_DIR   (RESULTS/slurm/RUNID, or RESULTS/slurm/CAMPAIGN_ID)")
		return exitUsage
	}
	subs, err := slurm.ReadSubmission(args[1])
	if err != nil {
		fmt.Fprintln(stderr, "harness slurm status:", err)
		return exitUsage
	}
	ts, err := slurm.Status(ctx, execSlurm, subs)
	if err != nil {
		fmt.Fprintln(stderr, "harness slurm status:", err)
		return exitRunError
	}
	v, bad := slurm.Verdict(ts)
	fmt.Fprint(stdout, slurm.Table(slurm.Describe(ctx, execSlurm, subs, ts)))
	fmt.Fprintf(stdout, "submission %s: %s\n", args[1], v)
	for _, t := range bad {
		fmt.Fprintf(stdout, "  %s %s: %s (%s)\n", t.Name, t.JobID, t.State, t.Reason)
	}
	switch v {
	case "completed":
		return exitOK
	case "running":
		return exitPending
	}
	return exitFailed
}
