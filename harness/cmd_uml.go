package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"tokenbed/harness/runner"
	"tokenbed/internal/pmqos"
	"tokenbed/internal/uml"
)

// UMLModules are what a run needs from the guest kernel.
var UMLModules = []string{"sch_netem", "sch_htb", "cls_u32", "veth", "bridge"}

// umlAvailable boots a probe guest (uml.Probe): an installed kernel that
// cannot run processes on this CPU (uml.ErrHostCPU) is not usable.
func umlAvailable() error { return uml.Probe() }

// runInUML runs the whole experiment inside a User Mode Linux guest, whose
// kernel has sch_netem: the same harness binary, with --impair kernel, on
// the host's filesystem (hostfs), so the results land on the host. The
// job's exit status comes back; analysis then runs on the host, at native
// speed.
func runInUML(ctx context.Context, f runFlags, fs *flag.FlagSet, expPath string, stdout, stderr io.Writer, log *slog.Logger) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "harness run:", err)
		return exitRunError
	}
	resultsRoot, _ := filepath.Abs(f.results)
	exp, _ := filepath.Abs(expPath)
	// The guest's harness derives a shard's own ID from the run's, as here.
	runID := f.runID
	if f.shardInfo != nil {
		runID = f.shardInfo.BaseRunID
	}
	args := append([]string{self}, umlArgs(fs, guestFlags(f, runID, resultsRoot), exp)...)
	if f.cpuBound != nil {
		// The instance's CPU is the host's: hold the bound here, for the
		// instance's life (the guest's own idle states are UML's).
		if req, err := pmqos.Hold(*f.cpuBound); err != nil {
			log.Warn("the CPUs' idle states are left as they are", "err", err)
		} else {
			defer req.Release()
			log.Info("PM QoS CPU latency held for the instance", "bound", req.Bound)
		}
	}
	cpu := f.cpu
	if cpu < 0 {
		cpu = 0
	}
	wd, _ := os.Getwd()
	job := uml.Job{Argv: args, Dir: wd, Modules: UMLModules, MemMB: 1024, CPU: cpu, Stdout: stdout, Stderr: stderr, Logger: log,
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}}
	start := time.Now()
	res, err := uml.Run(ctx, job)
	dir := filepath.Join(resultsRoot, f.runID)
	if err != nil || res.ExitCode != 0 {
		// The guest died before its harness could tidy up: do it here.
		why := "the User Mode Linux instance ended early"
		if ctx.Err() != nil {
			why = "interrupted"
		}
		runner.Abandon(resultsRoot, f.runID, why)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "harness run: interrupted; partial results in", dir)
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "harness run: User Mode Linux:", err)
		if res != nil && res.Console != "" {
			fmt.Fprintln(stderr, "guest console (last lines):")
			fmt.Fprintln(stderr, tail(res.Console, 20))
		}
		return exitRunError
	}
	log.Info("UML run finished", "exit", res.ExitCode, "boot", res.BootDuration.Round(time.Millisecond), "total", time.Since(start).Round(time.Second))
	if res.ExitCode != 0 {
		fmt.Fprintln(stderr, "harness run: the run inside User Mode Linux failed with exit status "+strconv.Itoa(res.ExitCode))
		return exitRunError
	}
	if f.noAnalyze {
		return exitOK
	}
	return analyzeDir(dir, stdout, stderr)
}

// guestFlags are the run flags the guest's harness gets otherwise than
// given: the kernel path inside, the run's ID and results, no analysis
// (the host analyses), and no PM QoS bound (the host holds it).
func guestFlags(f runFlags, runID, resultsRoot string) map[string]string {
	return map[string]string{"impair": runner.ImpairKernel, "run-id": runID,
		"results": resultsRoot, "agent": f.agent, "no-analyze": "true", "cpu-latency": "off"}
}

// umlArgs is the command line of the harness in the guest: harness run
// with the same flags as this one (fs, as parsed), but set, which the
// guest must see otherwise (its impairment is the guest kernel's, the
// results land on the host's absolute path, analysis runs on the host),
// and without the flags that act on the host (hostOnlyFlags).
func umlArgs(fs *flag.FlagSet, set map[string]string, exp string) []string {
	args := []string{"run"}
	fs.VisitAll(func(fl *flag.Flag) {
		if hostOnlyFlags[fl.Name] {
			return
		}
		v, ok := set[fl.Name]
		if !ok {
			v = fl.Value.String()
		}
		args = append(args, "--"+fl.Name+"="+v)
	})
	return append(args, exp)
}

func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

// cleanUMLDirs removes the private directories of User Mode Linux
// instances that are gone. They carry no run ID, so only a clean of every
// run removes them.
func cleanUMLDirs(stdout io.Writer) (int, error) {
	dirs, err := uml.RemoveStale("", 0)
	for _, d := range dirs {
		fmt.Fprintf(stdout, "removed UML directory %s\n", d)
	}
	return len(dirs), err
}
