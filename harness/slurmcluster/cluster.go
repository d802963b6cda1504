// Package slurmcluster starts a real multi-node Slurm cluster on one
// machine, in namespaces, for tests and for trying the Slurm engine
// without a cluster: munged, slurmctld and two or more slurmd, each
// daemon in its own network namespace, each slurmd also in its own UTS
// namespace so that gethostname() is its node name (Debian's Slurm has no
// multiple-slurmd, so `slurmd -N` is not available).
//
// For run ID tb123abc and two nodes:
//
//	tb123abc-slurmnet   a namespace holding bridge br0, one port pI per member
//	tb123abc-slurmctl   munged, and slurmctld as host tb123abc-ctl; eth0 10.79.0.1/24
//	tb123abc-n1         slurmd of node tb123abc-n1; eth0 10.79.0.11/24
//	tb123abc-n2         slurmd of node tb123abc-n2; eth0 10.79.0.12/24
//	/tmp/tokenbed-tb123abc-slurm   slurm.conf, the munge key and socket,
//	                    state, spool, pid and log files
//
// The run registry (/run/tokenbed/RUNID) lists every namespace and the
// directory before they are made, so `harness clean` removes a killed
// cluster like any other run's leftovers. The daemons run in the
// foreground with SIGKILL as parent-death signal; the processes they start
// (slurmstepd, job steps) live in the node namespaces and die with them.
//
// Client commands reach the controller from its namespace, with
// SLURM_CONF set: see Command.
package slurmcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/runner"
	"tokenbed/internal/nsenter"
)

// Options of a cluster. The zero value is two nodes of one CPU each.
type Options struct {
	RunID string // default: a new run ID
	Nodes int    // slurmd count; default 2
	CPUs  int    // CPUs each node offers to Slurm; default 1
	// SlurmdTimeout is how long (seconds) slurmctld waits for an
	// unresponsive node before marking it DOWN and requeueing its jobs;
	// default 10.
	SlurmdTimeout int
	// CredExpire (seconds) is the job credentials' lifetime, and how long
	// a requeued job waits before it may start again; default 10.
	CredExpire int
	// Ready bounds the wait for every node to register; default 60 s.
	Ready time.Duration
	// Pin gives each node CPUs of its own: node i's slurmd, and so every
	// job it runs, is bound to the i-th block of CPUs consecutive CPUs of
	// this process's affinity mask, as a real node's jobs run on its own
	// cores. Without it every node's jobs share all the machine's CPUs,
	// and a CPU-bound job on one node slows a real-process job's packets
	// on another. Start refuses Pin when Nodes × CPUs exceeds the mask.
	Pin bool
}

// Node is one slurmd.
type Node struct {
	Name string // node name and hostname
	Addr string
	NS   string // network namespace
	// CPUList is the CPUs the node's slurmd is bound to (taskset's list
	// form), empty when not pinned.
	CPUList string
}

// Cluster is a running in-namespace Slurm cluster.
type Cluster struct {
	RunID     string
	Dir       string // the run's directory: slurm.conf, key, state, logs
	Conf      string // path of slurm.conf
	CtlAddr   string
	CtlHost   string // the controller's hostname
	CtlNS     string
	Partition string
	Nodes     []Node

	opts    Options
	claim   *runner.Claim
	netNS   string
	made    []string // namespaces created, in order
	handles map[string]netns.NsHandle
	daemons map[string]*exec.Cmd // by role: "munged", "slurmctld", node name
	exited  map[string]chan struct{}
	madeDir bool // Close removes Dir only if Start made it
}

// Subnet of the cluster's bridge: private to the cluster's namespaces,
// so every cluster can use it.
const subnet = "10.79.0."

// forker forks every daemon: Linux sends the parent-death signal when the
// forking thread exits, so that thread must outlive the daemons.
var forker nsenter.Thread

// Available says why a cluster cannot start here, or nil.
func Available() error {
	for _, b := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "unshare", "hostname", "nsenter"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found (scripts/install-deps.sh installs slurmctld, slurmd, slurm-client and munge): %w", b, err)
		}
	}
	return nil
}

// Start starts a cluster and waits until every node is idle. On error
// everything made so far is removed.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.RunID == "" {
		o.RunID = runner.NewRunID()
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Nodes < 1 || o.Nodes > 200 {
		return nil, fmt.Errorf("slurm cluster: %d nodes: want 1 to 200", o.Nodes)
	}
	if o.CPUs == 0 {
		o.CPUs = 1
	}
	if o.SlurmdTimeout == 0 {
		o.SlurmdTimeout = 10
	}
	if o.CredExpire == 0 {
		o.CredExpire = 10
	}
	if o.Ready == 0 {
		o.Ready = 60 * time.Second
	}
	c := &Cluster{
		RunID: o.RunID, opts: o, Partition: "tb",
		Dir:     filepath.Join(os.TempDir(), "tokenbed-"+o.RunID+"-slurm"),
		CtlAddr: subnet + "1", CtlHost: o.RunID + "-ctl", CtlNS: o.RunID + "-slurmctl", netNS: o.RunID + "-slurmnet",
		handles: map[string]netns.NsHandle{}, daemons: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{},
	}
	c.Conf = filepath.Join(c.Dir, "slurm.conf")
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("%s-n%d", o.RunID, i)
		c.Nodes = append(c.Nodes, Node{Name: name, Addr: fmt.Sprintf("%s%d", subnet, 10+i), NS: name})
	}
	if o.Pin {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("slurm cluster: pin: %w", err)
		}
		lists, err := pinBlocks(cpusOf(&set), o.Nodes, o.CPUs)
		if err != nil {
			return nil, err
		}
		for i := range c.Nodes {
			c.Nodes[i].CPUList = lists[i]
		}
	}
	claim, err := runner.ClaimID(o.RunID, "")
	if err != nil {
		return nil, err
	}
	c.claim = claim
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	names := []string{c.netNS, c.CtlNS}
	for _, n := range c.Nodes {
		names = append(names, n.NS)
	}
	if err := c.claim.AddNamespaces(names...); err != nil {
		return err
	}
	if err := c.claim.AddDirs(c.Dir); err != nil {
		return err
	}
	if err := c.writeFiles(); err != nil {
		return err
	}
	if err := c.network(names); err != nil {
		return err
	}
	if err := c.startMunge(ctx); err != nil {
		return err
	}
	// Each daemon checks that gethostname() is its name in slurm.conf.
	// Setting the hostname in a fresh UTS namespace, then exec: the
	// daemon keeps the pid, and so the parent-death signal.
	script := fmt.Sprintf("hostname %s && exec slurmctld -D -i -f %s", c.CtlHost, c.Conf)
	if err := c.startDaemon("slurmctld", c.CtlNS, script); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		script := fmt.Sprintf("hostname %s && exec slurmd -D -f %s", n.Name, c.Conf)
		if n.CPUList != "" {
			script = fmt.Sprintf("hostname %s && exec taskset -c %s slurmd -D -f %s", n.Name, n.CPUList, c.Conf)
		}
		if err := c.startDaemon(n.Name, n.NS, script); err != nil {
			return err
		}
	}
	return c.waitIdle(ctx)
}

// writeFiles makes the run's directory, slurm.conf and a munge key of its
// own (1024 random bits, as mungekey makes).
func (c *Cluster) writeFiles() error {
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		return fmt.Errorf("slurm cluster directory: %w", err)
	}
	c.madeDir = true
	for _, d := range []string{"munge", "ctld", "jobs"} {
		// munged refuses a socket or key directory others can write.
		if err := os.Mkdir(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.Dir, "jobs"), 0o755); err != nil {
		return err
	}
	key := make([]byte, 128)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "munge", "munge.key"), key, 0o600); err != nil {
		return err
	}
	conf, err := c.conf()
	if err != nil {
		return err
	}
	return os.WriteFile(c.Conf, []byte(conf), 0o644)
}

func (c *Cluster) startMunge(ctx context.Context) error {
	m := filepath.Join(c.Dir, "munge")
	script := fmt.Sprintf("exec munged --foreground --force --socket=%s --key-file=%s/munge.key --pid-file=%s/munged.pid --seed-file=%s/munged.seed --log-file=%s/munged.log",
		c.MungeSocket(), m, m, m, m)
	if err := c.startDaemon("munged", c.CtlNS, script); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(c.MungeSocket()); err == nil {
			return nil
		}
		if err := c.exitedEarly("munged"); err != nil {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("munged: no socket %s after 10 s (log %s/munged.log)", c.MungeSocket(), m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDaemon forks `unshare --uts sh -c script` in namespace ns, in its
// own process group, with SIGKILL as parent-death signal.
func (c *Cluster) startDaemon(role, ns, script string) error {
	h, ok := c.handles[ns]
	if !ok {
		return fmt.Errorf("%s: namespace %s not made", role, ns)
	}
	cmd := exec.Command("unshare", "--uts", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	cmd.Dir = c.Dir
	log, err := os.Create(filepath.Join(c.Dir, role+".out"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := forker.Do(h, cmd.Start); err != nil {
		return fmt.Errorf("start %s: %w", role, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c.daemons[role], c.exited[role] = cmd, done
	return nil
}

func (c *Cluster) exitedEarly(role string) error {
	select {
	case <-c.exited[role]:
		out, _ := os.ReadFile(filepath.Join(c.Dir, role+".out"))
		return fmt.Errorf("%s exited: %s", role, strings.TrimSpace(string(out)))
	default:
		return nil
	}
}

// waitIdle waits until sinfo shows every node idle.
func (c *Cluster) waitIdle(ctx context.Context) error {
	deadline := time.Now().Add(c.opts.Ready)
	var last string
	for {
		out, err := c.Output(ctx, "sinfo", "-h", "-N", "-o", "%N %T")
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Count(last, " idle") == len(c.Nodes) {
			return nil
		}
		for role := range c.daemons {
			if err := c.exitedEarly(role); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm cluster %s: nodes not idle after %v: sinfo says %q (%v); logs in %s", c.RunID, c.opts.Ready, last, err, c.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Command returns a client command (sbatch, squeue, scontrol, sinfo,
// scancel, or a harness that calls them) that runs in the controller's
// network namespace with SLURM_CONF set, so it reaches slurmctld.
// `nsenter --net` switches the network namespace only; `ip netns exec`
// would remount /sys.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + filepath.Join(nsbackend.NetnsDir, c.CtlNS), "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	cmd.Dir = c.Dir
	return cmd
}

// Output runs a client command and returns its standard output; its
// standard error goes into the error.
func (c *Cluster) Output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := c.Command(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// KillNode kills node's slurmd and every process in its namespace (the
// job steps it runs), as a machine that dies would lose them. slurmctld
// marks the node DOWN after SlurmdTimeout and requeues its requeueable
// jobs.
func (c *Cluster) KillNode(name string) error {
	for _, n := range c.Nodes {
		if n.Name != name {
			continue
		}
		if cmd := c.daemons[name]; cmd != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited[name]
		}
		nsbackend.KillIn(filepath.Join(nsbackend.NetnsDir, n.NS))
		return nil
	}
	return fmt.Errorf("slurm cluster %s: no node %s", c.RunID, name)
}

// Close stops the daemons (SIGTERM, then SIGKILL), kills whatever else
// runs in the cluster's namespaces, removes them and the directory, and
// releases the run ID. It is safe to call more than once.
func (c *Cluster) Close() error {
	if c.claim == nil {
		return nil
	}
	for _, cmd := range c.daemons {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for role, cmd := range c.daemons {
		select {
		case <-c.exited[role]:
		case <-deadline:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited[role]
		}
	}
	for _, h := range c.handles {
		h.Close()
	}
	// Job steps and slurmstepd are not the daemons' process group:
	// RemoveNamespaces kills every process left in each namespace.
	_, err := nsbackend.RemoveNamespaces(c.made)
	if c.madeDir {
		if rerr := os.RemoveAll(c.Dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err == nil {
		c.claim.Release()
	}
	c.claim = nil
	return err
}
