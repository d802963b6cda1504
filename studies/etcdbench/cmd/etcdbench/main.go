// Command etcdbench is the etcd anchor (package studies/etcdbench): it runs the FTN lock service and a 3-member etcd
// cluster with the same workload in network namespaces under each
// profile, then throughput with 50 closed-loop clients and failover
// after a crash of the leader, and prints one comparison table.
//
// Usage (as root; `make ftn-etcd`):
//
//	etcdbench compare --agent bin/agent [--etcd /usr/bin/etcd] [--out DIR]
//	          [--profiles ",delay 10ms"] [--clients 10] [--duration 40s]
//	          [--warmup 5s] [--data-root /dev/shm] [--seed 14]
//	          [--throughput-clients 50] [--throughput-duration 15s]
//	          [--failover-clients 10] [--failover-rate 20] [--crash 15s]
//	          [--failover-duration 26s] [--failover-window 10s]
//	          [--etcd-variants] [--etcd-deadline 1s] [--ftn-tick 5ms]
//	          [--nice -10]
//	etcdbench table DIR/suite.json   prints a compare's tables again
//	etcdbench client FLAGS     an etcd workload client (compare starts it)
//	etcdbench leader FLAGS     prints etcd's leader (compare starts it)
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

	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/studies/etcdbench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if code, ok := etcdbench.Subcommand(args, stdout, stderr); ok {
		return code
	}
	if len(args) == 2 && args[0] == "table" {
		return table(args[1], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "compare" {
		fmt.Fprintln(stderr, "usage: etcdbench compare --agent AGENT [flags] | etcdbench table DIR/suite.json | etcdbench client FLAGS")
		return 2
	}
	fs := flag.NewFlagSet("etcdbench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c etcdbench.Config
	fs.StringVar(&c.AgentBin, "agent", "", "the agent binary (FTN)")
	fs.StringVar(&c.EtcdBin, "etcd", "/usr/bin/etcd", "the etcd binary (Debian's etcd-server)")
	out := fs.String("out", "", "directory for the runs' logs and the tables (default results/etcd-anchor-TIME)")
	fs.StringVar(&c.DataRoot, "data-root", "/dev/shm", "parent of etcd's data directories (tmpfs by default: FTN keeps no disk state)")
	fs.IntVar(&c.Clients, "clients", 10, "latency: workload clients")
	fs.DurationVar(&c.Duration, "duration", 40*time.Second, "latency: workload time per run")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "operations invoked earlier are not measured")
	fs.Uint64Var(&c.Seed, "seed", 14, "random seed (workload names and gaps)")
	fs.IntVar(&c.Nice, "nice", -10, "every process of both systems at this nice value, ahead of the machine's other work")
	fs.DurationVar(&c.FTNTick, "ftn-tick", 5*time.Millisecond, "FTN processes' tick (timeouts keep their default wall times)")
	profiles := fs.String("profiles", ",delay 10ms", "latency: netem profiles on every direction, comma-separated (empty: unimpaired)")
	tClients := fs.Int("throughput-clients", 50, "throughput: closed-loop clients")
	tDuration := fs.Duration("throughput-duration", 15*time.Second, "throughput: workload time per run (0: skip)")
	fClients := fs.Int("failover-clients", 10, "failover: clients")
	fRate := fs.Float64("failover-rate", 20, "failover: acquisitions per second per client (no hold)")
	fDuration := fs.Duration("failover-duration", 26*time.Second, "failover: workload time per run")
	crash := fs.Duration("crash", 15*time.Second, "failover: SIGKILL of the leader this long after the clients start (0: skip)")
	window := fs.Duration("failover-window", 10*time.Second, "failover: measured window after (and before) the crash")
	variants := fs.Bool("etcd-variants", true, "failover: rerun etcd with a client deadline, and with FTN's timers and that deadline")
	etcdDeadline := fs.Duration("etcd-deadline", time.Second, "failover variants: the etcd client's deadline for a Lock or Unlock")
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
	if *out == "" {
		*out = filepath.Join("results", "etcd-anchor-"+time.Now().UTC().Format("20060102T150405"))
	}
	c.Servers = 3
	p := etcdbench.Plan{Latency: c, Profiles: strings.Split(*profiles, ",")}
	if *tDuration > 0 {
		p.Throughput = c
		p.Throughput.Clients, p.Throughput.Duration = *tClients, *tDuration
		p.Throughput.Workload = ftnconfig.Workload{Names: 1000, Rate: 1000}
	}
	if *crash > 0 {
		p.Failover = c
		p.Failover.Clients, p.Failover.Duration, p.Failover.Crash, p.Failover.Window = *fClients, *fDuration, *crash, *window
		p.Failover.Workload = ftnconfig.Workload{Names: 1000, Rate: *fRate}
		if *variants {
			// FTN's heartbeat and election timeout in wall time
			// (ftnTiming: 1 and 10 ticks of 50 ms).
			p.EtcdVariants = []etcdbench.Variant{{Deadline: *etcdDeadline},
				{Heartbeat: 50 * time.Millisecond, Election: 500 * time.Millisecond, Deadline: *etcdDeadline}}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	suite, err := etcdbench.RunSuite(ctx, p, *out, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	table := tables(suite)
	fmt.Fprint(stdout, table)
	b, _ := json.MarshalIndent(suite, "", "  ")
	for name, data := range map[string][]byte{"table.md": []byte(table), "suite.json": b} {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
			fmt.Fprintln(stderr, "etcdbench:", err)
			return 1
		}
	}
	return 0
}

func tables(s etcdbench.Suite) string {
	return etcdbench.FigureTable(s) + "\nLatency in detail:\n\n" + etcdbench.Table(s.Latency)
}

// table prints the tables of a compare's suite.json.
func table(path string, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "etcdbench:", err)
		return 1
	}
	var s etcdbench.Suite
	if err := json.Unmarshal(b, &s); err != nil {
		fmt.Fprintf(stderr, "etcdbench: %s: %v\n", path, err)
		return 1
	}
	fmt.Fprint(stdout, tables(s))
	return 0
}
