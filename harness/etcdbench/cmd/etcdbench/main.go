// Command etcdbench is the etcd anchor of issue 14 (package
// harness/etcdbench): it runs the FTN lock service and a 3-member etcd
// cluster with the same workload in network namespaces under each
// profile, and prints acquire+release latency p50/p99 side by side.
//
// Usage (as root; `make ftn-etcd`):
//
//	etcdbench compare --agent bin/agent [--etcd /usr/bin/etcd] [--out DIR]
//	          [--profiles ",delay 10ms"] [--clients 10] [--duration 40s]
//	          [--warmup 5s] [--data-root /dev/shm] [--seed 14]
//	etcdbench client FLAGS     an etcd workload client (compare starts it)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"tokenbed/harness/etcdbench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "client" {
		return etcdbench.ClientMain(args[1:], stderr)
	}
	if len(args) == 0 || args[0] != "compare" {
		fmt.Fprintln(stderr, "usage: etcdbench compare --agent AGENT [flags] | etcdbench client FLAGS")
		return 2
	}
	fs := flag.NewFlagSet("etcdbench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c etcdbench.Config
	fs.StringVar(&c.AgentBin, "agent", "", "the agent binary (FTN)")
	fs.StringVar(&c.EtcdBin, "etcd", "/usr/bin/etcd", "the etcd binary (Debian's etcd-server)")
	fs.StringVar(&c.Dir, "out", "", "directory for the runs' logs and the table (default results/etcd-anchor-TIME)")
	fs.StringVar(&c.DataRoot, "data-root", "/dev/shm", "parent of etcd's data directories (tmpfs by default: FTN keeps no disk state)")
	fs.IntVar(&c.Clients, "clients", 10, "workload clients")
	fs.DurationVar(&c.Duration, "duration", 40*time.Second, "workload time per run")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "operations invoked earlier are not measured")
	fs.Uint64Var(&c.Seed, "seed", 14, "random seed (workload names and gaps)")
	profiles := fs.String("profiles", ",delay 10ms", "netem profiles on every direction, comma-separated (empty: unimpaired)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if c.AgentBin == "" {
		fmt.Fprintln(stderr, "etcdbench compare: --agent is required")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	c.ClientCmd = []string{self}
	if c.Dir == "" {
		c.Dir = filepath.Join("results", "etcd-anchor-"+time.Now().UTC().Format("20060102T150405"))
	}
	c.Servers = 3
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rows, err := etcdbench.Compare(ctx, c, strings.Split(*profiles, ","), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	table := etcdbench.Table(rows)
	fmt.Fprint(stdout, table)
	b, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(filepath.Join(c.Dir, "table.md"), []byte(table), 0o644); err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "rows.json"), b, 0o644); err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	return 0
}
