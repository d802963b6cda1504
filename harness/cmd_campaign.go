package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"tokenbed/analysis/index"
	"tokenbed/experiments"
	"tokenbed/experiments/campaign"
	"tokenbed/harness/backend"
	hcampaign "tokenbed/harness/campaign"
	"tokenbed/internal/cli"
	"tokenbed/internal/results"
	"tokenbed/internal/resultsdb"
)

// cmdCampaign is harness campaign: run runs a campaign file's jobs in
// order (harness/campaign); submit --slurm and status are the Slurm
// engine's (cmd_campaign_slurm.go).
func cmdCampaign(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "submit" {
		return cmdCampaignSubmit(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "status" {
		return cmdSlurm(ctx, args, stdout, stderr)
	}
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: harness campaign run [flags] [CAMPAIGN.yaml]   (harness campaign run -h for flags)")
			return exitOK
		}
		fmt.Fprintln(stderr, "usage: harness campaign run [flags] [CAMPAIGN.yaml]")
		return exitUsage
	}
	fs := flag.NewFlagSet("harness campaign run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("results", "results", "results root: the jobs' runs, and campaigns/ID/ with the campaign's record and job logs")
	dbPath := fs.String("db", "", "results database (default: RESULTS/"+index.DBFile+")")
	id := fs.String("id", "", "campaign ID (default: c and the start time, UTC)")
	agent := fs.String("agent", agentBinary(), "agent binary, for the jobs on real backends")
	only := fs.String("job", "", "run only this job of the file, recorded under --id as one task of a Slurm submission (RESULTS/campaigns/ID/jobs/JOB.json; no database: the submission's index job builds it)")
	check := fs.Bool("check", false, "parse the campaign file and its experiments, print the jobs, run nothing")
	var sets setFlags
	fs.Var(&sets, "set", "JOB:PATH=VALUE: override an experiment field of job JOB, after the file's overrides (repeatable)")
	if code, stop := cli.Parse(fs, args[1:], stdout); stop {
		return code
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "harness campaign run: want at most one campaign file")
		return exitUsage
	}
	opts := campaign.Options{Studies: hcampaign.IsStudy, Known: hcampaign.Studies(), Backends: backend.Names()}
	file, raw := "(embedded)", experiments.Nightly
	var c *campaign.Campaign
	var err error
	if fs.NArg() == 1 {
		file = fs.Arg(0)
		c, err = campaign.Load(file, opts)
	} else {
		c, err = campaign.Parse("experiments/nightly.yaml (embedded)", raw, opts)
	}
	if err == nil {
		err = c.ApplySets(sets.sets, opts)
	}
	if err != nil {
		fmt.Fprintln(stderr, "harness campaign run: campaign:")
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *check {
		for i, j := range c.Jobs {
			what := j.Experiment + " on " + j.Backend
			if j.Kind() == campaign.KindStudy {
				what = "study " + j.Study
			}
			fmt.Fprintf(stdout, "%2d %-24s %-50s estimate %v\n", i+1, j.Name, what, j.Estimate)
		}
		return exitOK
	}
	if *only != "" && *id == "" {
		fmt.Fprintln(stderr, "harness campaign run: --job: want the campaign's --id")
		return exitUsage
	}
	if *id != "" && !validCampaignID(*id) {
		fmt.Fprintf(stderr, "harness campaign run: --id %q: letters, digits, '-', '_' and '.' only\n", *id)
		return exitUsage
	}
	if *agent, err = filepath.Abs(*agent); err != nil {
		fmt.Fprintln(stderr, "harness campaign run: --agent:", err)
		return exitUsage
	}
	res, err := hcampaign.Run(ctx, hcampaign.Options{Campaign: c, File: file, Root: *root, DB: *dbPath, ID: *id,
		Agent: *agent, Only: *only, Progress: hcampaign.NewProgress(stdout, isTTY(stdout))})
	if err != nil {
		fmt.Fprintln(stderr, "harness campaign run:", err)
		return exitRunError
	}
	record := filepath.Join(res.Dir, results.CampaignFile)
	if *only != "" {
		record = filepath.Join(res.Dir, results.JobsDir, *only+".json")
	}
	fmt.Fprintf(stdout, "record: %s\n", record)
	switch res.Info.Status {
	case resultsdb.CampaignPassed:
		return exitOK
	case resultsdb.CampaignInterrupted:
		return exitInterrupted
	}
	return exitFailed
}

func validCampaignID(s string) bool {
	for _, c := range s {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != "" && s[0] != '.' && len(s) <= 64
}
