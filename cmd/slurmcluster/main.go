// Command slurmcluster starts a Slurm cluster in namespaces
// (harness/slurmcluster) and keeps it until interrupted, for trying
// `harness run --slurm` without a cluster:
//
//	slurmcluster -nodes 2 &
//	nsenter --net=/run/netns/RUNID-slurmctl env SLURM_CONF=/tmp/tokenbed-RUNID-slurm/slurm.conf sinfo
//
// It prints the run ID, the slurm.conf path and the nsenter prefix that
// reaches the controller. SIGINT or SIGTERM removes everything; after a
// kill -9, harness clean does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"tokenbed/harness/slurmcluster"
)

func main() {
	nodes := flag.Int("nodes", 2, "slurmd count")
	cpus := flag.Int("cpus", 1, "CPUs each node offers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := slurmcluster.Start(ctx, slurmcluster.Options{Nodes: *nodes, CPUs: *cpus})
	if err != nil {
		fmt.Fprintln(os.Stderr, "slurmcluster:", err)
		os.Exit(1)
	}
	fmt.Printf("cluster %s up: %d nodes\nSLURM_CONF=%s\nclient prefix: nsenter --net=%s env SLURM_CONF=%s\n",
		c.RunID, len(c.Nodes), c.Conf, filepath.Join("/run/netns", c.CtlNS), c.Conf)
	<-ctx.Done()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "slurmcluster:", err)
		os.Exit(1)
	}
}
