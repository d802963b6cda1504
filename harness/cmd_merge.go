package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"tokenbed/harness/shard"
	"tokenbed/internal/cli"
)

func cmdMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("harness merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the merged results directory (default: beside the first shard, named for the run's ID)")
	noAnalyze := fs.Bool("no-analyze", false, "do not analyse the merged results")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: harness merge [-o DIR] SHARD_DIR...\n\n"+
			"Merges the shards of one run (harness run --shard K/N) into one results directory and\n"+
			"analyses it as harness analyze does. Refuses shards of different runs, experiments, seeds,\n"+
			"revisions or backends, a shard given twice and overlapping replicas; a shard not given\n"+
			"leaves its replicas not judged, named in the verdicts.")
		fs.PrintDefaults()
	}
	if code, stop := cli.Parse(fs, args, stdout); stop {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "harness merge: want the shard directories")
		return exitUsage
	}
	res, err := shard.Merge(fs.Args(), *out)
	if err != nil {
		fmt.Fprintln(stderr, "harness merge:", err)
		if res.Dir == "" {
			return exitUsage
		}
		return exitRunError
	}
	fmt.Fprintf(stdout, "merged: %s (shards %s)\n", res.Dir, strings.Join(res.Shards, ", "))
	code := exitOK
	if !*noAnalyze {
		code = analyzeDir(res.Dir, stdout, stderr)
	}
	// A merge without every shard is not the run: it fails, so that a
	// Slurm merge job says so too, not only the array task that failed.
	if len(res.MissingShards) > 0 {
		fmt.Fprintf(stderr, "harness merge: shards %s missing: replicas %v not judged\n", strings.Join(res.MissingShards, ", "), res.MissingReplicas)
		if code == exitOK {
			code = exitFailed
		}
	}
	return code
}
