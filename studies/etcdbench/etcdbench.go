// Package etcdbench is the etcd anchor (performance side by side with
// what users would pick instead of FTN): the FTN lock service (seed
// 001) and a 3-member etcd cluster (Debian's etcd-server) run the same
// workload, each in network namespaces built by the harness's netns
// backend with the same netem profile on every direction, and one reader
// (Samples) measures acquire+release latency from both histories.
//
// # Why a bench package and not a protocol plug-in
//
// The runner starts every process as the agent binary
// (harness/runner: backend.Cmd.Path is the agent), so etcd members as a
// plug-in would need an agent subcommand wrapping /usr/bin/etcd and the
// etcd client library linked into the agent: a change to agent/main.go
// and a heavy dependency in every agent. This package takes the testbed's
// core pieces instead: nsbackend builds the namespaces and starts the
// processes (etcd itself, or the agent for FTN), netem.ApplySourceTree
// puts the profile on each receiver's queue keyed by sender (as the
// runner's kernel impairment does), FTN's processes get ftnconfig files
// as the FTN plug-in writes them, and the etcd clients log in ftnlog's
// history schema. Its one fault is Config.Crash, the leader's SIGKILL
// (to measure the failover time after a leader crash); the runner's other
// schedule actions (partitions, outages) it does not have.
//
// # Figures
//
// From the clients' logs alone, the same reader for both systems:
// acquire+release latency (Samples), throughput (operations completed ok
// per second, Throughput) and the clients' recovery from the crash
// (MeasureFailover). Suite runs them all and FigureTable puts them side
// by side (`make ftn-etcd`).
//
// # Durability (what each system promises)
//
// etcd fsyncs its WAL before it acknowledges a write (3.4 has no switch
// to turn that off); its data directories are under Config.DataRoot:
// tmpfs (/dev/shm) by default, where an fsync costs no disk, because FTN
// keeps no disk state at all (its state lives in the servers' memory and
// is rebuilt from the clients after a crash, 001 "Server start"). A disk
// run is `--data-root DIR` on a disk-backed directory. Durability names
// the file system, and FigureTable states both settings.
package etcdbench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// System is what serves the locks.
type System string

// Systems.
const (
	FTN  System = "ftn"
	Etcd System = "etcd"
)

// DefaultWorkload is the bench's client workload: the FTN plug-in's
// default rate and hold (protocols/ftn.DefaultWorkload: one
// acquisition per second, held 200 ms), exclusive only, no data, and
// 1,000 names so that an acquire seldom waits for another client's hold
// (with 8 names a tenth of the acquires would, and p99 would measure
// the hold time, not the service).
var DefaultWorkload = ftnconfig.Workload{Names: 1000, Rate: 1, Hold: 200 * time.Millisecond}

// Ports.
const (
	FTNPort        = 7000
	EtcdClientPort = 2379
	EtcdPeerPort   = 2380
)

// Subnet holds the bench's addresses (the runner's, harness/runner.Subnet:
// each run's namespaces are its own).
var Subnet = netip.MustParsePrefix("10.77.0.0/16")

// Config is one run: one system, one profile.
type Config struct {
	System System
	// Profile is applied to every direction between two processes; ""
	// applies none (unimpaired).
	Profile  string
	Servers  int // 3
	Clients  int // 10
	Duration time.Duration
	// Warmup: operations invoked earlier than this after the clients
	// started are not measured (election, registration, connections).
	Warmup   time.Duration
	Workload ftnconfig.Workload
	Seed     uint64
	// Dir receives configurations, credentials and logs (logs/NAME.jsonl).
	Dir string
	// DataRoot is the parent of etcd's data directories.
	DataRoot string
	EtcdBin  string
	AgentBin string // the agent, for FTN
	// ClientCmd starts an etcd workload client: ClientCmd[0] is run with
	// ClientCmd[1:] and then Subcommand's arguments, with ClientEnv.
	ClientCmd []string
	ClientEnv []string
	// FTNTick is the FTN processes' tick (default 5 ms, the perf
	// experiments'); their timeouts keep the machines' default wall
	// times (ftnTiming), whatever the tick.
	FTNTick time.Duration
	// EtcdHeartbeat and EtcdElection set etcd's --heartbeat-interval and
	// --election-timeout; 0 keeps etcd's defaults (100 ms, 1 s).
	EtcdHeartbeat, EtcdElection time.Duration
	// EtcdDeadline is an etcd client's deadline for a Lock or Unlock,
	// after which it gives the operation up (result unknown) and goes on
	// with the next; 0: 10 s, longer than the server's own request
	// timeout (5 s + 2 elections), so that etcd answers first. An FTN
	// client needs none: it resends every 2 ticks' worth of 50 ms.
	EtcdDeadline time.Duration
	// Nice, when not 0, starts every process of either system (servers,
	// clients) at this nice value: on a machine shared with builds, a
	// server that waits for a core misses its heartbeats, and FTN (a
	// 300 ms lease, 500 ms timeouts) or etcd (1 s) fails over without a
	// crash. Not SCHED_FIFO, which `harness run` gives agents: etcd's
	// Go runtime (several threads, GOMAXPROCS 2) spun under it, starving
	// its own clients and the machine.
	Nice int
	// Crash, when > 0: this long after the clients started, the leader is
	// SIGKILLed (FTN: the server that last logged ftn_leader; etcd: the
	// member that the maintenance Status API names leader), and
	// Result.Failover measures the clients' recovery in the Window after
	// it (Window: until 1 s before the end by default).
	Crash, Window time.Duration
}

// Result is one run's figures.
type Result struct {
	System  System
	Profile string
	RunID   string
	// Impairment is how the profile was applied: none, kernel or
	// userspace (the kernel has no netem).
	Impairment string
	Samples    []Sample // measured holds, after the warmup
	Counts     Counts
	P50, P99   time.Duration
	// Ops completed ok from the warmup's end until the clients were
	// stopped, and their rate.
	Ops     int
	OpsPerS float64
	// Failover is the crash's measurement (Config.Crash), nil without.
	Failover *Failover
	// NewLeader is the server leading at the end of a run with a crash;
	// NewLeaderErr says why none was found when it is "".
	NewLeader    string
	NewLeaderErr string
	// Elected: FTN only, the crash to the next ftn_leader
	// (analysis/ftn.Performance); -1 none or not FTN.
	Elected time.Duration
}

func (c *Config) defaults() error {
	if c.Servers == 0 {
		c.Servers = 3
	}
	if c.Clients == 0 {
		c.Clients = 10
	}
	if c.Workload == (ftnconfig.Workload{}) {
		c.Workload = DefaultWorkload
	}
	if c.EtcdDeadline == 0 {
		c.EtcdDeadline = 10 * time.Second
	}
	if c.FTNTick == 0 {
		c.FTNTick = 5 * time.Millisecond
	}
	if c.Crash > 0 && c.Window == 0 {
		c.Window = c.Duration - c.Crash - time.Second
	}
	switch {
	case c.System != FTN && c.System != Etcd:
		return fmt.Errorf("system: %q: want %s or %s", c.System, FTN, Etcd)
	case c.Duration <= c.Warmup:
		return fmt.Errorf("duration: %v must exceed the warmup %v", c.Duration, c.Warmup)
	case c.Dir == "":
		return errors.New("dir: required")
	case c.System == Etcd && (c.EtcdBin == "" || len(c.ClientCmd) == 0 || c.DataRoot == ""):
		return errors.New("etcd_bin, client_cmd, data_root: required for etcd")
	case c.System == FTN && c.AgentBin == "":
		return errors.New("agent_bin: required for ftn")
	case c.Crash < 0 || c.Crash > 0 && (c.Crash <= c.Warmup || c.Window <= 0 || c.Crash+c.Window > c.Duration):
		return fmt.Errorf("crash: %v must follow the warmup %v and leave its window %v before the end %v", c.Crash, c.Warmup, c.Window, c.Duration)
	case c.FTNTick < time.Millisecond || ftnDefaultTick%c.FTNTick != 0:
		return fmt.Errorf("ftn_tick: %v must divide %v", c.FTNTick, ftnDefaultTick)
	}
	return nil
}

type member struct {
	inst string
	addr netip.Addr
}

// Run runs c: it builds the namespaces, applies the profile, starts the
// servers and then the clients, lets the workload run for c.Duration,
// stops the clients and servers (SIGTERM), removes everything it built
// and measures the clients' histories.
func Run(ctx context.Context, c Config) (res Result, err error) {
	if err := c.defaults(); err != nil {
		return res, err
	}
	var id [3]byte
	_, _ = crand.Read(id[:])
	res = Result{System: c.System, Profile: c.Profile, RunID: "tb" + hex.EncodeToString(id[:])}
	logs := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return res, err
	}
	prefix := backend.ReplicaPrefix(Subnet, 0)
	var servers, clients []member
	var agents []backend.Agent
	for i := range c.Servers + c.Clients {
		m := member{inst: fmt.Sprintf("s%d", i), addr: backend.AgentAddr(prefix, i)}
		if i >= c.Servers {
			m.inst = fmt.Sprintf("c%d", i-c.Servers)
			clients = append(clients, m)
		} else {
			servers = append(servers, m)
		}
		agents = append(agents, backend.Agent{Name: m.inst, Instance: m.inst, Addr: m.addr})
	}
	be := nsbackend.New()
	if err := be.Setup(ctx, backend.Spec{RunID: res.RunID, Replicas: [][]backend.Agent{agents}, Prefixes: []netip.Prefix{prefix}}); err != nil {
		return res, err
	}
	defer func() {
		if terr := be.Teardown(context.WithoutCancel(ctx)); err == nil {
			err = terr
		}
	}()
	eng, err := impair(be, agents, prefix, c.Profile, c.Seed, &res.Impairment)
	if err != nil {
		return res, err
	}
	if eng != nil {
		defer eng.Close()
	}
	start := starter{be: be, ctx: ctx, logs: logs, nice: c.Nice}
	var srvProcs, cliProcs []backend.Process
	switch c.System {
	case Etcd:
		srvProcs, cliProcs, err = startEtcd(start, c, res.RunID, servers, clients)
	case FTN:
		srvProcs, cliProcs, err = startFTN(start, c, servers, clients)
	}
	t0, _ := eventlog.Now()
	var crashNS int64
	var leader string
	if err == nil && c.Crash > 0 {
		if err = sleep(ctx, c.Crash); err == nil {
			leader, crashNS, err = crashLeader(start, c, servers, clients, srvProcs)
		}
	}
	if err == nil {
		err = sleep(ctx, time.Duration(t0+c.Duration.Nanoseconds()-mono()))
	}
	tStop := mono()
	if err == nil && c.Crash > 0 {
		// Who leads at the end: the survivors should have elected
		// another; "" when none is known.
		var lerr error
		if res.NewLeader, lerr = findLeader(start, c, servers, clients); lerr != nil {
			res.NewLeaderErr = lerr.Error()
		}
	}
	// Clients first, so that their last operations find the servers up.
	stop(cliProcs)
	stop(srvProcs)
	if err != nil {
		return res, err
	}
	var oks, bads [][]int64
	for _, m := range clients {
		evs, err := eventlog.ReadFile(filepath.Join(logs, m.inst+".jsonl"))
		if err != nil {
			return res, err
		}
		ss, n, err := Samples(evs)
		if err != nil {
			return res, err
		}
		res.Counts.Acquires += n.Acquires
		res.Counts.NotOK += n.NotOK
		for _, s := range ss {
			if s.InvokedNS >= t0+c.Warmup.Nanoseconds() {
				res.Samples = append(res.Samples, s)
			}
		}
		ok, bad, err := Completions(evs)
		if err != nil {
			return res, err
		}
		oks, bads = append(oks, ok), append(bads, bad)
	}
	res.P50, res.P99 = Quantiles(res.Samples)
	res.Ops, res.OpsPerS = Throughput(oks, t0+c.Warmup.Nanoseconds(), tStop)
	res.Elected = -1
	if c.Crash > 0 {
		f := MeasureFailover(oks, crashNS, c.Window)
		f.Leader = leader
		f.NotOK = count(bads, crashNS, crashNS+c.Window.Nanoseconds())
		res.Failover = &f
		if c.System == FTN {
			res.Elected, err = ftnElected(logs, servers, crashNS)
		}
	}
	return res, err
}

func mono() int64 { t, _ := eventlog.Now(); return t }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}

// impair puts profile on every direction, as the runner does: with the
// kernel's netem on each receiver's queue, one leaf per sender
// (impairKernel, without duplication, which needs devices of its own), or,
// when the kernel has no netem, with the userspace engine
// (netem/userspace, the runner's fallback), which the returned engine
// runs until closed. It says which in *how.
func impair(be backend.Backend, agents []backend.Agent, prefix netip.Prefix, profile string, seed uint64, how *string) (io.Closer, error) {
	if profile == "" {
		*how = "none"
		return nil, nil
	}
	p, err := netem.Parse(profile)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if p.Duplicate > 0 {
		return nil, fmt.Errorf("profile: %q duplicates; the bench applies no duplicating profile", profile)
	}
	*how = "kernel"
	for _, to := range agents {
		port, err := be.IngressPort(to.Instance)
		if err != nil {
			return nil, err
		}
		var dests []netem.Dest
		for _, from := range agents {
			if from.Instance != to.Instance {
				dests = append(dests, netem.Dest{Prefix: netip.PrefixFrom(from.Addr, 32), Profile: p})
			}
		}
		if _, err := netem.ApplySourceTree(port.NS, port.Link, dests); errors.Is(err, netem.ErrNoNetem) {
			*how = "userspace"
			return impairUserspace(be, agents, prefix, p, seed)
		} else if err != nil {
			return nil, fmt.Errorf("profile toward %s: %w", to.Instance, err)
		}
	}
	return nil, nil
}

func impairUserspace(be backend.Backend, agents []backend.Agent, prefix netip.Prefix, p netem.Profile, seed uint64) (io.Closer, error) {
	var id [3]byte
	_, _ = crand.Read(id[:])
	eng := userspace.New(userspace.Config{RunID: "tb" + hex.EncodeToString(id[:]), Seed: seed})
	fail := func(err error) (io.Closer, error) { return nil, errors.Join(err, eng.Close()) }
	for _, a := range agents {
		port, err := be.AgentPort(a.Instance)
		if err != nil {
			return fail(err)
		}
		if _, err := eng.AttachSubnet(port.NS, a.Addr, prefix); err != nil {
			return fail(err)
		}
		for _, b := range agents {
			if b.Instance != a.Instance {
				if err := eng.SetProfile(a.Addr, b.Addr, p); err != nil {
					return fail(err)
				}
			}
		}
	}
	if err := eng.Start(context.Background()); err != nil {
		return fail(err)
	}
	return eng, nil
}

// starter starts processes in their namespaces, with their output in
// logs/NAME.stderr, or in logs/OUT when out is not "".
type starter struct {
	be   backend.Backend
	ctx  context.Context
	logs string
	nice int // Config.Nice
}

func (s starter) start(inst, out, path string, args, env []string) (backend.Process, error) {
	if out == "" {
		out = inst + ".stderr"
	}
	f, err := os.OpenFile(filepath.Join(s.logs, out), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if s.nice != 0 {
		// nice sets the value and execs: every thread inherits it, and
		// the pid is the program's (the crash's SIGKILL reaches it).
		path, args = "nice", append([]string{"-n", fmt.Sprint(s.nice), path}, args...)
	}
	return s.be.Start(s.ctx, inst, backend.Cmd{Path: path, Args: args, Env: env, Stdout: f, Stderr: f})
}

// startEtcd starts a member per server with etcd's defaults (heartbeat
// 100 ms, election 1 s, a WAL fsync per commit) and a workload client
// per client, which talks to every member.
func startEtcd(s starter, c Config, token string, servers, clients []member) (srv, cli []backend.Process, err error) {
	var cluster []string
	for _, m := range servers {
		cluster = append(cluster, m.inst+"="+url(m.addr, EtcdPeerPort))
	}
	data, err := os.MkdirTemp(c.DataRoot, "tokenbed-etcd-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(data)
		}
	}()
	for _, m := range servers {
		args := []string{"--name", m.inst, "--data-dir", filepath.Join(data, m.inst),
			"--listen-client-urls", url(m.addr, EtcdClientPort), "--advertise-client-urls", url(m.addr, EtcdClientPort),
			"--listen-peer-urls", url(m.addr, EtcdPeerPort), "--initial-advertise-peer-urls", url(m.addr, EtcdPeerPort),
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new", "--initial-cluster-token", token,
			"--logger", "zap", "--log-outputs", "stderr"}
		if c.EtcdHeartbeat > 0 {
			args = append(args, "--heartbeat-interval", fmt.Sprint(c.EtcdHeartbeat.Milliseconds()))
		}
		if c.EtcdElection > 0 {
			args = append(args, "--election-timeout", fmt.Sprint(c.EtcdElection.Milliseconds()))
		}
		p, err := s.start(m.inst, "", c.EtcdBin, args, nil)
		if err != nil {
			return srv, cli, err
		}
		srv = append(srv, p)
	}
	for i, m := range clients {
		args := append(append([]string(nil), c.ClientCmd[1:]...), "client", "--name", m.inst, "--endpoints", etcdEndpoints(servers),
			"--log", filepath.Join(s.logs, m.inst+".jsonl"), "--seed", fmt.Sprint(c.Seed+uint64(i)),
			"--names", fmt.Sprint(c.Workload.Names), "--rate", fmt.Sprint(c.Workload.Rate), "--hold", c.Workload.Hold.String(),
			"--op-timeout", c.EtcdDeadline.String())
		// One OS thread of Go code per client process, as the FTN
		// clients (startFTN).
		p, err := s.start(m.inst, "", c.ClientCmd[0], args, append([]string{"GOMAXPROCS=1"}, c.ClientEnv...))
		if err != nil {
			return srv, cli, err
		}
		cli = append(cli, p)
	}
	// The data directories go when the members have stopped: Run stops
	// them before it returns; a later run makes its own.
	go func() {
		for _, p := range srv {
			p.Wait()
		}
		os.RemoveAll(data)
	}()
	return srv, cli, nil
}

func url(a netip.Addr, port int) string {
	return "http://" + netip.AddrPortFrom(a, uint16(port)).String()
}

// etcdEndpoints is the members' client URLs, comma-separated.
func etcdEndpoints(servers []member) string {
	var eps []string
	for _, m := range servers {
		eps = append(eps, url(m.addr, EtcdClientPort))
	}
	return strings.Join(eps, ",")
}

// startFTN starts FTN servers and workload clients (`agent ftn run`) with
// the files the FTN plug-in would write: a run CA, the shared server list,
// Config.FTNTick, the machines' default timeouts in wall time.
func startFTN(s starter, c Config, servers, clients []member) (srv, cli []backend.Process, err error) {
	dir := filepath.Join(c.Dir, "ca")
	if err := ca.Init(dir); err != nil {
		return nil, nil, err
	}
	var list []ftnconfig.Peer
	for _, m := range servers {
		list = append(list, ftnconfig.Peer{Name: m.inst, Addr: netip.AddrPortFrom(m.addr, FTNPort).String()})
	}
	for i, m := range append(append([]member(nil), servers...), clients...) {
		if err := ca.Issue(dir, m.inst); err != nil {
			return srv, cli, err
		}
		cfg := ftnconfig.Config{Name: m.inst, Role: ftnconfig.RoleServer, Listen: netip.AddrPortFrom(m.addr, FTNPort).String(),
			CA: filepath.Join(dir, ca.CACertFile), Credentials: dir, Log: filepath.Join(s.logs, m.inst+".jsonl"),
			Seed: c.Seed + uint64(i), Tick: c.FTNTick, TimeScale: 1, Servers: list}
		cfg.Server, cfg.Client = ftnTiming(c.FTNTick)
		if i >= len(servers) {
			w := c.Workload
			cfg.Role, cfg.Workload = ftnconfig.RoleClient, &w
		}
		b, err := yaml.Marshal(cfg)
		if err != nil {
			return srv, cli, err
		}
		path := filepath.Join(c.Dir, m.inst+".yaml")
		if _, err := ftnconfig.Decode(path, b); err != nil {
			return srv, cli, err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return srv, cli, err
		}
		p, err := s.start(m.inst, "", c.AgentBin, []string{"ftn", "run", "--config", path}, []string{"GOMAXPROCS=1"})
		if err != nil {
			return srv, cli, err
		}
		if i >= len(servers) {
			cli = append(cli, p)
		} else {
			srv = append(srv, p)
		}
	}
	return srv, cli, nil
}

// stop sends SIGTERM to every process and waits up to 10 s for all of
// them; the ones still running then are killed.
func stop(ps []backend.Process) {
	for _, p := range ps {
		_ = p.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		for _, p := range ps {
			p.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, p := range ps {
			_ = p.Signal(syscall.SIGKILL)
		}
		<-done
	}
}
