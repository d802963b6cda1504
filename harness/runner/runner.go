// Package runner runs an experiment: it builds the network with a
// backend, applies the netem profiles, captures every agent interface,
// starts the agents with their credentials, applies the schedule (the
// nemesis: profile changes, outages, crashes, restarts, joins, leaves),
// records every action in the harness event log and the capture, and
// leaves a results directory for analysis. Data flows one way: experiment
// → runner → processes → logs and capture; the runner only reads the
// processes' logs to feed the protocol's live observer (a crash aimed at
// "holder") and the paper clock, and to show progress.
//
// The runner knows no protocol: the experiment's protocol plug-in
// (package protocol) writes each process's configuration, gives its
// command line, resolves the schedule's protocol words and classifies
// events for the paper clock.
//
// Files: runner.go (options, the run's steps), configs.go (credentials
// and configuration files), topology.go (impairment, capture, topology),
// agents.go (starting processes), schedule.go (the nemesis), cleanup.go,
// claims.go (the run-ID claims that harness clean reads),
// provenance.go (revision and kernel), seams.go (what differs between a
// run on a network and a simulated one: clock, host, process start,
// links, capture; chosen once, with their real implementations), sim.go
// (the simulator's implementations of the seams), kerneltree.go and
// userspace.go (the impairment paths).
package runner

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/capture"
	"tokenbed/harness/protocol"
	"tokenbed/internal/results"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
)

// AgentPort is the UDP port every agent listens on.
const AgentPort = 7400

// Subnet of the agents: replica r gets 10.77.r.0/24.
var Subnet = netip.MustParsePrefix("10.77.0.0/16")

// Impairment paths.
const (
	ImpairAuto      = "auto"
	ImpairKernel    = "kernel"    // sch_netem through netlink on the host kernel
	ImpairUserspace = "userspace" // the userspace engine (netem/userspace)
	ImpairUML       = "uml"       // the whole run inside User Mode Linux, with its sch_netem
	ImpairNone      = "none"      // only for experiments whose every profile is empty
)

// Options of a run.
type Options struct {
	Experiment *experiments.Experiment
	// ExperimentFile names where the experiment came from; the results
	// keep Experiment.Raw, the bytes that were loaded.
	ExperimentFile string
	ResultsRoot    string // default "results"
	RunID          string // default: generated
	// Backend builds the network; nil means network namespaces
	// (nsbackend).
	Backend      backend.Backend
	Impair       string // a resolved path: kernel, userspace or none (the caller resolves auto and uml)
	ImpairReason string
	AgentBin     string
	// RTPriority, when not 0, runs every agent SCHED_FIFO at this priority
	// (agent --rt-priority): the paper gave each agent its own machine,
	// here dozens share two cores, and at normal priority a busy neighbour
	// (a build, a test) adds milliseconds to a pass's tail.
	RTPriority int
	// CPULatency, when not nil, is held as the host's PM QoS CPU
	// latency bound while the agents run (internal/pmqos): at 0, idle
	// CPUs poll instead of halting, and on a virtual machine a datagram
	// then does not wait for the hypervisor to wake a halted vCPU.
	CPULatency *time.Duration
	// Duration overrides the experiment's length (paper time), e.g. for
	// a smoke run; the schedule is cut to it.
	Duration time.Duration
	Log      *slog.Logger
	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// TTY makes progress a single line rewritten in place.
	TTY bool
	// Shard, when set, makes the run one shard of a larger one (harness
	// run --shard): only the replicas Shard.Items are built, run and
	// recorded, each as it is in the whole run (its number, subnet, part
	// of the paper timeline, member names, seeds), and shard.json says
	// so. The harness log and capture name Shard.BaseRunID, as the merged
	// run does; the rest of the run is under RunID (Shard.RunID).
	Shard *results.ShardInfo
	// Claim is the run's hold on its ID (ClaimID), taken by a caller that
	// had to claim the ID before its own side effects; nil: Run claims
	// it. Run releases it once everything the run created is removed.
	Claim *Claim
}

// NewRunID returns a fresh run ID: "tb" and six hex digits.
func NewRunID() string {
	var b [3]byte
	crand.Read(b[:])
	return "tb" + hex.EncodeToString(b[:])
}

// Run runs the experiment and returns the results directory. On error or
// cancellation the results directory keeps what was recorded, run.json
// says how the run ended, and everything created on the host is removed.
func Run(ctx context.Context, o Options) (dir string, err error) {
	// Until the run itself takes it over, a claim (the caller's or ours)
	// is released on every early return.
	handed := false
	defer func() {
		if !handed && o.Claim != nil {
			o.Claim.Release()
		}
	}()
	e := o.Experiment
	if o.RunID == "" {
		o.RunID = NewRunID()
	}
	if !backend.ValidRunID(o.RunID) {
		return "", fmt.Errorf("run id %q: want tb and six hex digits", o.RunID)
	}
	if o.ResultsRoot == "" {
		o.ResultsRoot = "results"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Duration == 0 {
		o.Duration = e.Duration
	}
	// Before the first event: a simulated run's clock is virtual.
	s := newSeams(o.Backend, e.TimeScale)
	if err := s.host.check(o); err != nil {
		return "", err
	}
	if o.Impair == ImpairNone {
		for _, d := range e.Directions {
			if d.Text != "" {
				return "", fmt.Errorf("impairment none, but direction %s has profile %q: refusing to run without the impairment the experiment asks for", d.Key(), d.Text)
			}
		}
	}
	// Claim the ID, then the results directory, both exclusively, before
	// writing anything: a reused ID must not touch another run's files.
	dir = filepath.Join(o.ResultsRoot, o.RunID)
	if o.Claim == nil {
		c, err := s.host.claim(o.RunID, dir)
		if err != nil {
			return "", err
		}
		o.Claim = c
	}
	if err := claimResults(dir); err != nil {
		return "", err
	}
	if o.Shard != nil {
		if err := results.WriteJSON(dir, results.ShardFile, o.Shard); err != nil {
			return dir, err
		}
	}
	for _, d := range []string{filepath.Join(dir, results.LogsDir), filepath.Join(dir, results.CADir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return dir, err
		}
	}
	proto, err := protocol.Lookup(e.Protocol)
	if err != nil {
		return "", err
	}
	r := &run{seams: s, o: o, e: e, dir: dir, agents: map[string]*agentRun{}, proto: proto, obs: proto.NewObserver(),
		planned: map[[2]string]netem.Profile{}, outages: map[[2]string]int{}, crashedHolder: map[int]string{}}
	defer func() {
		if p := recover(); p != nil {
			r.cleanup()
			panic(p)
		}
	}()
	handed = true
	err = r.run(ctx)
	return dir, err
}

type agentRun struct {
	a       backend.Agent
	spec    experiments.Agent
	cfgPath string
	// simStart, in a simulation, starts the agent from its configuration
	// in memory (protocol.SimConfigured), which has no file.
	simStart protocol.SimStart
	proc     backend.Process
	running  bool
	tail     *tailer
}

type run struct {
	seams // what differs in a simulation (seams.go)
	// The profile each direction (instances) has outside outages, and
	// how many outages of it are on; the schedule's goroutine only.
	planned map[[2]string]netem.Profile
	outages map[[2]string]int
	// crashedHolder is, per replica, the instance the last crash of
	// "holder" killed: the target of a restart of "holder".
	crashedHolder map[int]string
	o             Options
	e             *experiments.Experiment
	dir           string
	info          results.RunInfo
	be            backend.Backend
	hlog          *eventlog.Writer
	hfile         *os.File
	cap           recorder
	keyDir        string
	certPaths     map[string]string      // by instance: its certificate in keyDir
	trees         map[string]*netem.Tree // by instance: the tree on the queue toward it
	eng           *userspace.Engine      // the userspace engine, when that is the path
	capDev        map[string]string      // device to capture per instance (default: its port's link)
	prefixes      []netip.Prefix         // replica r's subnet
	servers       []*resourceServer      // the shared resource, one per replica (resource.go)
	start         time.Time

	// proto is the protocol the processes run; obs follows their logs
	// for the schedule's targets and progress (under mu).
	proto protocol.Protocol

	mu     sync.Mutex
	agents map[string]*agentRun
	order  []string // instances in start order
	obs    protocol.Observer
	clocks []*results.PaperClock
	shard  time.Duration // paper length of each replica's shard
	faults int
	// faultsElsewhere counts, in a shard, the faults of replicas the
	// other shards hold, as they fall due (faultNumber).
	faultsElsewhere int
	// stopCPU stops the watch on the host's CPUs (host.watchCPU).
	stopCPU func() *results.HostCPU
}

// run is the run's steps, in order; whatever happens, end records how
// it ended and removes what it created.
func (r *run) run(ctx context.Context) (err error) {
	if err := r.begin(); err != nil {
		return err
	}
	defer func() { err = r.end(ctx, err) }()
	if err := r.openLog(); err != nil {
		return err
	}
	spec, err := r.plan()
	if err != nil {
		return err
	}
	if err := r.build(ctx, spec); err != nil {
		return err
	}
	if err := r.startClocks(); err != nil {
		return err
	}
	r.stopCPU = r.host.watchCPU(r.o)
	if err := r.startAgents(ctx); err != nil {
		return err
	}
	return r.schedule(ctx)
}

// begin writes run.json (running) and the experiment as it was loaded.
func (r *run) begin() error {
	o, e := r.o, r.e
	r.info = results.RunInfo{RunID: o.RunID, Experiment: e.Name, Protocol: r.proto.Name(), Seed: e.Seed,
		Impairment: o.Impair, ImpairWhy: o.ImpairReason, TimeScale: e.TimeScale, NetScale: e.NetworkTimeScale,
		Replicas: e.Replicas, Started: time.Now().UTC(), Status: "running"}
	if err := provenance(&r.info); err != nil {
		return err
	}
	if err := results.WriteJSON(r.dir, results.RunFile, r.info); err != nil {
		return err
	}
	// The bytes that were loaded and run, not the file as it is now.
	if len(e.Raw) > 0 {
		if err := os.WriteFile(filepath.Join(r.dir, results.ExperimentFile), e.Raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// end removes what the run created, records in run.json how it ended,
// and releases the run ID once nothing is left behind.
func (r *run) end(ctx context.Context, err error) error {
	o := r.o
	if r.stopCPU != nil {
		// Before cleanup: what the CPUs did while the agents ran, not
		// while the harness tore the network down.
		r.info.HostCPU = r.stopCPU()
		r.noteCPU()
	}
	cerr := r.cleanup()
	r.info.Finished = time.Now().UTC()
	switch {
	case err == nil && cerr == nil:
		r.info.Status = "ok"
	case ctx.Err() != nil:
		r.info.Status = "interrupted"
		r.info.Error = context.Cause(ctx).Error()
	default:
		r.info.Status = "error"
		r.info.Error = errors.Join(err, cerr).Error()
	}
	if werr := results.WriteJSON(r.dir, results.RunFile, r.info); werr != nil && err == nil {
		err = werr
	}
	if cerr == nil {
		o.Claim.Release()
	} else {
		// Keep the registry entry: harness clean finishes the job.
		o.Log.Warn("the run left something behind; harness clean --run "+o.RunID+" removes it", "err", cerr)
	}
	if cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// openLog opens the harness event log with its run_started line.
func (r *run) openLog() error {
	o, e := r.o, r.e
	hlog, hfile, err := eventlog.Create(filepath.Join(r.dir, results.LogsDir, results.HarnessLog), "harness")
	if err != nil {
		return err
	}
	r.hlog, r.hfile = hlog, hfile
	r.event(eventlog.Event{Kind: eventlog.RunStarted, Seed: e.Seed, TimeScale: e.TimeScale, Version: eventlog.SchemaVersion,
		Detail: fmt.Sprintf("experiment %s, run %s, impairment %s (%s), replicas %d", e.Name, o.recordedID(), o.Impair, o.ImpairReason, e.Replicas)})
	o.Log.Info("run", "id", o.RunID, "experiment", e.Name, "results", r.dir, "impairment", o.Impair, "why", o.ImpairReason)
	return nil
}

// plan lays out the network to build: each replica's subnet and agents,
// and the shared resource's servers.
func (r *run) plan() (backend.Spec, error) {
	e := r.e
	spec := backend.Spec{RunID: r.o.RunID}
	for rep := 0; rep < e.Replicas; rep++ {
		var as []backend.Agent
		if !r.o.holds(rep) {
			// Another shard's: its subnet stays reserved, nothing is built.
			pfx, err := backend.ReplicaPrefixFor(Subnet, rep, len(e.Agents)+1)
			if err != nil {
				return spec, err
			}
			spec.Prefixes = append(spec.Prefixes, pfx)
			r.prefixes = append(r.prefixes, pfx)
			spec.Replicas = append(spec.Replicas, nil)
			continue
		}
		// One host number more than the agents: the resource server's.
		pfx, err := backend.ReplicaPrefixFor(Subnet, rep, len(e.Agents)+1)
		if err != nil {
			return spec, err
		}
		spec.Prefixes = append(spec.Prefixes, pfx)
		r.prefixes = append(r.prefixes, pfx)
		for i, a := range e.Agents {
			inst := results.Instance(a.Name, rep)
			ba := backend.Agent{Name: a.Name, Replica: rep, Instance: inst, Addr: backend.AgentAddr(pfx, i)}
			as = append(as, ba)
			r.agents[inst] = &agentRun{a: ba, spec: a}
			r.order = append(r.order, inst)
		}
		spec.Replicas = append(spec.Replicas, as)
	}
	return spec, r.planResource(&spec)
}

// build makes everything the agents need before they start: the host's
// readiness, credentials, the network, its topology file, impairment,
// capture, configurations and the resource servers.
func (r *run) build(ctx context.Context, spec backend.Spec) error {
	o := r.o
	r.be = o.Backend
	if r.be == nil {
		r.be = nsbackend.New()
	}
	if err := r.host.prepare(r, len(r.order)+len(r.servers)); err != nil {
		return err
	}
	if err := r.credentials(r.procs.credentials(r.e.Seed)); err != nil {
		return err
	}
	spec.Mounts = []string{r.keyDir, r.absDir()}
	r.info.Backend = r.be.Name()
	if _, ok := r.be.(*nsbackend.Backend); ok {
		if err := o.Claim.AddNamespaces(nsbackend.Namespaces(spec)...); err != nil {
			return fmt.Errorf("run registry: %w", err)
		}
	}
	t0 := time.Now()
	if err := r.be.Setup(ctx, spec); err != nil {
		return fmt.Errorf("network setup: %w", err)
	}
	o.Log.Info("network ready", "agents", len(r.order), "took", time.Since(t0).Round(time.Millisecond))
	// The topology goes first: a run that fails in the impairment's or
	// the capture's start-up checks still leaves harness analyze
	// something to say about it.
	if err := r.writeTopology(); err != nil {
		return err
	}
	t0 = time.Now()
	if err := r.impair(); err != nil {
		return err
	}
	o.Log.Info("impairment ready", "path", o.Impair, "took", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := r.startCapture(ctx); err != nil {
		return err
	}
	o.Log.Info("capture ready", "interfaces", len(r.order), "took", time.Since(t0).Round(time.Millisecond))
	if err := r.writeConfigs(); err != nil {
		return err
	}
	return r.startResource(ctx)
}

// startClocks sets the agents' start time and each replica's paper
// clock, and records them in run.json.
func (r *run) startClocks() error {
	e := r.e
	r.start = r.clock.Now()
	nominal := map[string]int64{}
	for inst := range r.agents {
		nominal[inst] = r.nominalHold(inst)
	}
	for rep := 0; rep < e.Replicas; rep++ {
		c := results.NewPaperClock(e.TimeScale, r.start.UnixNano(), r.proto.Basis)
		c.Nominal = nominal
		r.clocks = append(r.clocks, c)
	}
	r.info.PaperSeconds = r.o.Duration.Seconds()
	r.info.ShardSeconds = (r.o.Duration / time.Duration(e.Replicas)).Seconds()
	r.info.AgentsStartNS = r.start.UnixNano()
	return results.WriteJSON(r.dir, results.RunFile, r.info)
}

// startAgents starts the agents that are there from the start. Agents
// that create a token at start go last, once every peer has logged
// agent_started: otherwise their first Move can leave before the peer's
// socket exists (a container takes ~0.15 s to start) and the pass pays a
// Move timeout that is the harness's, not the network's.
func (r *run) startAgents(ctx context.Context) error {
	for _, generators := range []bool{false, true} {
		for _, inst := range r.order {
			if sp := r.agents[inst].spec; !sp.Later && sp.Generate == generators {
				if err := r.startAgent(ctx, inst, ""); err != nil {
					return err
				}
			}
		}
		if err := r.waitStarted(ctx); err != nil {
			return err
		}
	}
	return nil
}

// recorder is where the harness's actions go beside the packets: the live
// capture, or the simulator's.
type recorder interface {
	Annotate(eventlog.Event) error
	Stop() (capture.Stats, error)
}

func (r *run) event(ev eventlog.Event) {
	r.clock.Stamp(&ev)
	if err := r.hlog.Write(ev); err != nil {
		r.o.Log.Error("harness log", "err", err)
	}
	if r.cap != nil {
		r.cap.Annotate(ev)
	}
}

// holds reports whether the run builds and runs replica rep: every
// replica, unless the run is a shard.
func (o Options) holds(rep int) bool {
	if o.Shard == nil {
		return true
	}
	for _, it := range o.Shard.Items {
		if it == uint64(rep) {
			return true
		}
	}
	return false
}

// recordedID is the run ID the harness log and the capture name: a
// shard's is its run's, so that the merged files are the whole run's.
func (o Options) recordedID() string {
	if o.Shard != nil {
		return o.Shard.BaseRunID
	}
	return o.RunID
}

func (r *run) absDir() string {
	d, err := filepath.Abs(r.dir)
	if err != nil {
		return r.dir
	}
	return d
}
