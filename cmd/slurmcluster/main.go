// Command slurmcluster starts a Slurm cluster in namespaces
// (harness/slurmcluster) for trying the Slurm engine without a cluster.
//
// Without a command it keeps the cluster until interrupted:
//
//	slurmcluster -nodes 2 &
//	nsenter --net=/run/netns/RUNID-slurmctl env SLURM_CONF=/tmp/tokenbed-RUNID-slurm/slurm.conf sinfo
//
// printing the run ID, the slurm.conf path and the nsenter prefix that
// reaches the controller.
//
// With a command after --, it runs the command in the controller's
// network namespace with SLURM_CONF set, in the current directory; finds
// the submission directory in what the command prints (the "harness
// campaign status DIR" or "harness slurm status DIR" it ends with); polls
// the submission's state (harness/slurm's Status and Verdict, as harness
// campaign status does) until every job has ended; prints the jobs as
// Slurm reports them; removes the cluster and exits 0 when every job
// completed, 1 when one did not:
//
//	slurmcluster -nodes 2 -cpus 1 -- bin/harness campaign submit --slurm --shards 2 experiments/nightly.yaml
//
// SIGINT or SIGTERM removes everything (the jobs die with their nodes);
// after a kill -9, harness clean does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"tokenbed/harness/slurm"
	"tokenbed/harness/slurmcluster"
)

func main() {
	nodes := flag.Int("nodes", 2, "slurmd count")
	cpus := flag.Int("cpus", 1, "CPUs each node offers: the jobs a node runs at once")
	poll := flag.Duration("poll", 15*time.Second, "with a command: how often to read the submission's state")
	pin := flag.Bool("pin", true, "bind each node to CPUs of its own (nodes × cpus must fit this machine), so that one node's jobs cannot take another's CPU")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: slurmcluster [-nodes N] [-cpus C] [-pin=false] [-poll D] [-- COMMAND ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := slurmcluster.Start(ctx, slurmcluster.Options{Nodes: *nodes, CPUs: *cpus, Pin: *pin})
	if err != nil {
		fmt.Fprintln(os.Stderr, "slurmcluster:", err)
		os.Exit(1)
	}
	fmt.Printf("cluster %s up: %d nodes of %d CPUs\nSLURM_CONF=%s\nclient prefix: nsenter --net=%s env SLURM_CONF=%s\n",
		c.RunID, len(c.Nodes), *cpus, c.Conf, filepath.Join("/run/netns", c.CtlNS), c.Conf)
	for _, n := range c.Nodes {
		if n.CPUList != "" {
			fmt.Printf("node %s: CPUs %s\n", n.Name, n.CPUList)
		}
	}
	code := 0
	if flag.NArg() > 0 {
		code = runAndWait(ctx, c, flag.Args(), *poll, os.Stdout, os.Stderr)
	} else {
		<-ctx.Done()
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "slurmcluster:", err)
		code = 1
	}
	os.Exit(code)
}

// statusLine is how harness campaign submit and harness run --slurm name
// the submission's directory.
var statusLine = regexp.MustCompile(`harness (?:campaign|slurm) status (\S+)`)

// runAndWait runs argv against the cluster, then waits for the
// submission it made; it returns the exit code.
func runAndWait(ctx context.Context, c *slurmcluster.Cluster, argv []string, poll time.Duration, stdout, stderr io.Writer) int {
	cmd := c.Command(ctx, argv[0], argv[1:]...)
	cmd.Dir = "" // the caller's directory: the command's relative paths are the caller's
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = io.MultiWriter(stdout, &out), stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(stderr, "slurmcluster: %s: %v\n", strings.Join(argv, " "), err)
		return exitOf(err)
	}
	m := statusLine.FindAllStringSubmatch(out.String(), -1)
	if len(m) == 0 {
		fmt.Fprintln(stderr, "slurmcluster: the command named no submission (no \"harness campaign status DIR\" line): nothing to wait for")
		return 0
	}
	dir := m[len(m)-1][1]
	subs, err := slurm.ReadSubmission(dir)
	if err != nil {
		fmt.Fprintln(stderr, "slurmcluster:", err)
		return 1
	}
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return c.Output(ctx, name, args...)
	}
	start, last := time.Now(), ""
	for {
		ts, err := slurm.Status(ctx, run, subs)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "slurmcluster: status:", err)
			return 1
		}
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "slurmcluster: interrupted: removing the cluster and its jobs")
			return 130
		}
		v, bad := slurm.Verdict(ts)
		if p := progress(ts); p != last {
			fmt.Fprintf(stdout, "%s  %s\n", time.Since(start).Round(time.Second), p)
			last = p
		}
		if v != "running" {
			fmt.Fprintf(stdout, "\nsubmission %s, as Slurm reports it:\n%s", dir, slurm.Table(slurm.Describe(ctx, run, subs, ts)))
			fmt.Fprintf(stdout, "submission %s: %s after %s\n", dir, v, time.Since(start).Round(time.Second))
			for _, t := range bad {
				fmt.Fprintf(stdout, "  %s %s: %s (%s)\n", t.Name, t.JobID, t.State, t.Reason)
			}
			if v == "completed" {
				return 0
			}
			return 1
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// progress counts the tasks by state: "COMPLETED 3, PENDING 2, RUNNING 2".
func progress(ts []slurm.Task) string {
	n := map[string]int{}
	var order []string
	for _, t := range ts {
		if n[t.State] == 0 {
			order = append(order, t.State)
		}
		n[t.State]++
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%s %d", s, n[s]))
	}
	return strings.Join(parts, ", ")
}

func exitOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	return 1
}
