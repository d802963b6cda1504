// Package runner runs an experiment: it builds the network with a
// backend, applies the netem profiles, captures every agent interface,
// starts the agents with their credentials, applies the schedule (the
// nemesis: profile changes, outages, crashes, restarts, joins, leaves),
// records every action in the harness event log and the capture, and
// leaves a results directory for analysis. Data flows one way: experiment
// → runner → agents → logs and capture; the runner only reads agents' logs
// to aim a crash at whoever holds the token and to show progress.
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
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/backend/nsbackend"
	"tokenbed/harness/capture"
	"tokenbed/harness/results"
	"tokenbed/netem"
	"tokenbed/netem/userspace"
	"tokenbed/protocol"
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
	// Duration overrides the experiment's length (paper time), e.g. for
	// a smoke run; the schedule is cut to it.
	Duration time.Duration
	Log      *slog.Logger
	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// TTY makes progress a single line rewritten in place.
	TTY bool
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
	if o.AgentBin == "" {
		return "", errors.New("runner: no agent binary")
	}
	if _, err := os.Stat(o.AgentBin); err != nil {
		return "", fmt.Errorf("agent binary: %w (build it with make build)", err)
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
		c, err := ClaimID(o.RunID, dir)
		if err != nil {
			return "", err
		}
		o.Claim = c
	}
	if err := claimResults(dir); err != nil {
		return "", err
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
	r := &run{o: o, e: e, dir: dir, agents: map[string]*agentRun{}, proto: proto, obs: proto.NewObserver(),
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
	proc    backend.Process
	running bool
	tail    *tailer
}

type run struct {
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
	cap           *capture.Capture
	keyDir        string
	trees         map[string]*netem.Tree // by instance: the tree on the queue toward it
	eng           *userspace.Engine      // the userspace engine, when that is the path
	capDev        map[string]string      // device to capture per instance (default: its port's link)
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
}

func (r *run) run(ctx context.Context) (err error) {
	o, e := r.o, r.e
	r.info = results.RunInfo{RunID: o.RunID, Experiment: e.Name, Protocol: r.proto.Name(), Seed: e.Seed, GitRevision: gitRevision(), Kernel: kernelRelease(),
		Impairment: o.Impair, ImpairWhy: o.ImpairReason, TimeScale: e.TimeScale, NetScale: e.NetworkTimeScale,
		Replicas: e.Replicas, Started: time.Now().UTC(), Status: "running"}
	if err := results.WriteJSON(r.dir, results.RunFile, r.info); err != nil {
		return err
	}
	// The bytes that were loaded and run, not the file as it is now.
	if len(e.Raw) > 0 {
		if err := os.WriteFile(filepath.Join(r.dir, results.ExperimentFile), e.Raw, 0o644); err != nil {
			return err
		}
	}
	defer func() {
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
	}()

	hlog, hfile, err := eventlog.Create(filepath.Join(r.dir, results.LogsDir, results.HarnessLog), "harness")
	if err != nil {
		return err
	}
	r.hlog, r.hfile = hlog, hfile
	r.event(eventlog.Event{Kind: eventlog.RunStarted, Seed: e.Seed, TimeScale: e.TimeScale, Version: eventlog.SchemaVersion,
		Detail: fmt.Sprintf("experiment %s, run %s, impairment %s (%s), replicas %d", e.Name, o.RunID, o.Impair, o.ImpairReason, e.Replicas)})
	o.Log.Info("run", "id", o.RunID, "experiment", e.Name, "results", r.dir, "impairment", o.Impair, "why", o.ImpairReason)

	spec := backend.Spec{RunID: o.RunID}
	for rep := 0; rep < e.Replicas; rep++ {
		var as []backend.Agent
		pfx := backend.ReplicaPrefix(Subnet, rep)
		spec.Prefixes = append(spec.Prefixes, pfx)
		for i, a := range e.Agents {
			inst := results.Instance(a.Name, rep)
			ba := backend.Agent{Name: a.Name, Replica: rep, Instance: inst, Addr: backend.AgentAddr(pfx, i)}
			as = append(as, ba)
			r.agents[inst] = &agentRun{a: ba, spec: a}
			r.order = append(r.order, inst)
		}
		spec.Replicas = append(spec.Replicas, as)
	}
	if err := r.credentials(); err != nil {
		return err
	}
	spec.Mounts = []string{r.keyDir, r.absDir()}
	r.be = o.Backend
	if r.be == nil {
		r.be = nsbackend.New()
	}
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
	if err := r.impair(); err != nil {
		return err
	}
	if err := r.startCapture(ctx); err != nil {
		return err
	}
	if err := r.writeTopology(); err != nil {
		return err
	}
	if err := r.writeConfigs(); err != nil {
		return err
	}
	r.start = time.Now()
	nominal := map[string]int64{}
	for inst := range r.agents {
		nominal[inst] = r.nominalHold(inst)
	}
	for rep := 0; rep < e.Replicas; rep++ {
		c := results.NewPaperClock(e.TimeScale, r.start.UnixNano(), r.proto.Basis)
		c.Nominal = nominal
		r.clocks = append(r.clocks, c)
	}
	r.info.PaperSeconds = o.Duration.Seconds()
	r.info.ShardSeconds = (o.Duration / time.Duration(e.Replicas)).Seconds()
	r.info.AgentsStartNS = r.start.UnixNano()
	if err := results.WriteJSON(r.dir, results.RunFile, r.info); err != nil {
		return err
	}
	// Agents that create a token at start go last, once every peer has
	// logged agent_started: otherwise their first Move can leave before
	// the peer's socket exists (a container takes ~0.15 s to start) and
	// the pass pays a Move timeout that is the harness's, not the network's.
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
	return r.schedule(ctx)
}

func (r *run) event(ev eventlog.Event) {
	if err := r.hlog.Write(ev); err != nil {
		r.o.Log.Error("harness log", "err", err)
	}
	if r.cap != nil {
		r.cap.Annotate(ev)
	}
}

// credentials creates the run's CA and every member's key pair. Keys stay
// in a private temporary directory; certificates go to the results.
func (r *run) credentials() error {
	dir, err := os.MkdirTemp("", "tokenbed-"+r.o.RunID+"-keys-")
	if err != nil {
		return err
	}
	r.keyDir = dir
	if err := ca.Init(dir); err != nil {
		return err
	}
	copyFile(filepath.Join(dir, ca.CACertFile), filepath.Join(r.dir, results.CADir, ca.CACertFile))
	for _, inst := range r.order {
		if err := ca.Issue(dir, inst); err != nil {
			return err
		}
		copyFile(filepath.Join(dir, ca.CertFile(inst)), filepath.Join(r.dir, results.CADir, ca.CertFile(inst)))
	}
	return nil
}

// impair applies every direction's profile, scaled to network time, on
// the queue toward its receiver, keyed by sender (impairKernel).
func (r *run) impair() error {
	r.trees = map[string]*netem.Tree{}
	if r.o.Impair == ImpairNone {
		return nil
	}
	if r.o.Impair == ImpairUserspace {
		return r.impairUserspace()
	}
	if r.o.Impair != ImpairKernel {
		return fmt.Errorf("impairment %q is not available with the %s backend", r.o.Impair, r.be.Name())
	}
	return r.impairKernel()
}

func (r *run) startCapture(ctx context.Context) error {
	var ifs []capture.Interface
	for _, inst := range r.order {
		p, err := r.be.AgentPort(inst)
		if err != nil {
			return err
		}
		dev := p.Link
		if d := r.capDev[inst]; d != "" {
			dev = d
		}
		ifs = append(ifs, capture.Interface{Name: inst + "/" + dev, Device: dev, NetNSPath: p.NSPath,
			Description: fmt.Sprintf("agent %s, %v:%d", inst, r.agents[inst].a.Addr, AgentPort)})
	}
	c, err := capture.Create(ctx, filepath.Join(r.dir, results.CaptureFile), capture.Config{Interfaces: ifs,
		Comment: fmt.Sprintf("tokenbed run %s, experiment %s, seed %d", r.o.RunID, r.e.Name, r.e.Seed)})
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	r.cap = c
	return nil
}

// nominalHold is inst's nominal interval of application time in wall ns
// (the protocol's; 0 when it has none).
func (r *run) nominalHold(inst string) int64 { return r.proto.NominalNS(r.e, r.agents[inst].spec) }

func (r *run) writeTopology() error {
	var t results.Topology
	t.Port = AgentPort
	for _, inst := range r.order {
		a := r.agents[inst].a
		p, _ := r.be.AgentPort(inst)
		where := p.Name
		if where == "" {
			where = filepath.Base(p.NSPath)
		}
		t.Agents = append(t.Agents, results.AgentInfo{Name: a.Name, Replica: a.Replica, Instance: inst,
			Addr: netip.AddrPortFrom(a.Addr, AgentPort).String(), Namespace: where, Interface: p.Link,
			Log: filepath.Join(results.LogsDir, inst+".jsonl"), HoldNS: r.nominalHold(inst)})
	}
	for _, d := range r.e.Directions {
		t.Directions = append(t.Directions, results.DirectionInfo{From: d.From, To: d.To,
			Profile: experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale).String(), Paper: d.Text})
	}
	return results.WriteJSON(r.dir, results.TopologyFile, t)
}

// writeConfigs writes every agent's configuration file (in the key
// directory: it names the keys). An agent knows every member of its
// replica that runs from the start; a later agent knows nobody until its
// join step (writeJoinConfig).
func (r *run) writeConfigs() error {
	for _, inst := range r.order {
		ar := r.agents[inst]
		var peers []string
		if !ar.spec.Later {
			for _, other := range r.order {
				oa := r.agents[other]
				if other != inst && oa.a.Replica == ar.a.Replica && !oa.spec.Later {
					peers = append(peers, other)
				}
			}
		}
		if err := r.writeConfig(inst, peers); err != nil {
			return err
		}
	}
	return nil
}

// writeJoinConfig gives a joining agent what 002 §3.2 gives it: the
// address of one member, via, and nothing else; it learns the others from
// the directories piggybacked on the passes. Restarted later, it starts
// from the same file.
func (r *run) writeJoinConfig(inst, via string) error { return r.writeConfig(inst, []string{via}) }

// writeConfig writes inst's configuration file listing peers, as its
// protocol words it.
func (r *run) writeConfig(inst string, peers []string) error {
	ar := r.agents[inst]
	var ps []protocol.Process
	for _, other := range peers {
		ps = append(ps, r.process(other))
	}
	files := protocol.Files{CACert: filepath.Join(r.keyDir, ca.CACertFile), Credentials: r.keyDir,
		PeerCert: func(i string) string { return filepath.Join(r.keyDir, ca.CertFile(i)) },
		Log:      filepath.Join(r.absDir(), results.LogsDir, inst+".jsonl")}
	b, err := r.proto.Config(r.e, r.process(inst), ps, files, r.e.Seed^hash(inst))
	if err != nil {
		return fmt.Errorf("%s: configuration: %w", inst, err)
	}
	ar.cfgPath = filepath.Join(r.keyDir, inst+".yaml")
	return os.WriteFile(ar.cfgPath, b, 0o600)
}

// process is inst as its protocol sees it.
func (r *run) process(inst string) protocol.Process {
	ar := r.agents[inst]
	return protocol.Process{Instance: inst, Name: ar.a.Name, Replica: ar.a.Replica,
		Addr: netip.AddrPortFrom(ar.a.Addr, AgentPort), Spec: ar.spec}
}

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func (r *run) absDir() string {
	d, err := filepath.Abs(r.dir)
	if err != nil {
		return r.dir
	}
	return d
}

// startAgent starts (or restarts) an agent; join names the member to join
// through (002 §3.2), which its configuration lists (writeJoinConfig).
func (r *run) startAgent(ctx context.Context, inst, join string) error {
	ar := r.agents[inst]
	args := r.proto.Args(ar.cfgPath, protocol.Start{Join: join, RTPriority: r.o.RTPriority})
	stderr, err := os.OpenFile(filepath.Join(r.dir, results.LogsDir, inst+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	p, err := r.be.Start(ctx, inst, backend.Cmd{Path: r.o.AgentBin, Args: args, Env: []string{"GOTRACEBACK=crash", "GOMAXPROCS=1"}, Stdout: stderr, Stderr: stderr})
	if err != nil {
		return err
	}
	r.mu.Lock()
	ar.proc, ar.running = p, true
	if ar.tail == nil {
		ar.tail = newTailer(filepath.Join(r.dir, results.LogsDir, inst+".jsonl"))
	}
	r.mu.Unlock()
	go func() {
		code, sig, err := p.Wait()
		r.mu.Lock()
		if ar.proc == p {
			ar.running = false
		}
		r.mu.Unlock()
		detail := fmt.Sprintf("exit status %d", code)
		if sig != 0 {
			detail = fmt.Sprintf("killed by signal %d (%v)", int(sig), sig)
		}
		if err != nil {
			detail = err.Error()
		}
		r.event(eventlog.Event{Kind: eventlog.AgentExit, Peer: inst, Detail: detail})
	}()
	return nil
}

// waitStarted waits until every started agent has logged agent_started,
// and fails with the agent's own words if one exits first.
func (r *run) waitStarted(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		waiting := ""
		for _, inst := range r.order {
			ar := r.agents[inst]
			if ar.proc == nil {
				continue
			}
			started := false
			f, err := os.Open(filepath.Join(r.dir, results.LogsDir, inst+".jsonl"))
			if err == nil {
				b := make([]byte, 4096)
				n, _ := f.Read(b)
				f.Close()
				started = strings.Contains(string(b[:n]), `"kind":"agent_started"`)
			}
			r.mu.Lock()
			running := ar.running
			r.mu.Unlock()
			if !started && !running {
				msg, _ := os.ReadFile(filepath.Join(r.dir, results.LogsDir, inst+".stderr"))
				return fmt.Errorf("agent %s exited at start: %s", inst, strings.TrimSpace(string(msg)))
			}
			if !started {
				waiting = inst
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent %s did not start within 30 s", waiting)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cleanup stops the agents (SIGTERM, then SIGKILL), the capture, and
// removes everything the run created on the host.
func (r *run) cleanup() error {
	var errs []error
	r.mu.Lock()
	var procs []backend.Process
	for _, ar := range r.agents {
		if ar.proc != nil && ar.running {
			procs = append(procs, ar.proc)
		}
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for _, p := range procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-deadline:
			p.Signal(syscall.SIGKILL)
		}
	}
	if r.hlog != nil {
		n, what := r.obs.Progress()
		r.event(eventlog.Event{Kind: eventlog.RunFinished, Detail: fmt.Sprintf("%d %s, %d faults injected", n, what, r.faults)})
	}
	if r.eng != nil {
		st := r.eng.Stats()
		var delivered, late uint64
		for _, d := range st.Directions {
			delivered += d.Delivered
			late += d.Late
		}
		// How faithful the emulator was: analysis reports it beside the
		// latency figures.
		summary := fmt.Sprintf("realtime=%v bias=%v delivered=%d late_over_1ms=%d", st.Realtime, time.Duration(st.BiasNS), delivered, late)
		r.o.Log.Info("userspace engine", "summary", summary)
		r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "engine_summary", Detail: summary})
		if u := st.Unintended(); u > 0 {
			r.o.Log.Warn("userspace engine: drops the profiles did not ask for", "count", u, "stats", fmt.Sprintf("%+v", st))
			r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "engine_unintended_drops", Detail: fmt.Sprintf("%d: %+v", u, st)})
		}
		if err := r.eng.Close(); err != nil {
			errs = append(errs, fmt.Errorf("userspace engine: %w", err))
		}
		r.eng = nil
	}
	if r.cap != nil {
		st, err := r.cap.Stop()
		if err != nil {
			errs = append(errs, fmt.Errorf("capture: %w", err))
		}
		if d := st.Drops(); d > 0 {
			r.o.Log.Warn("capture dropped packets", "drops", d)
		}
		r.cap = nil
	}
	if r.be != nil {
		if err := r.removeOwnDevices(); err != nil {
			errs = append(errs, err)
		}
		if err := r.be.Teardown(context.Background()); err != nil {
			errs = append(errs, err)
		}
		r.be = nil
	}
	if r.keyDir != "" {
		os.RemoveAll(r.keyDir)
		r.keyDir = ""
	}
	if r.hfile != nil {
		r.hfile.Close()
		r.hfile = nil
	}
	for _, ar := range r.agents {
		if ar.tail != nil {
			ar.tail.close()
		}
	}
	return errors.Join(errs...)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// gitRevision is the revision the running binary was built from, as the
// Go toolchain stamped it: not whatever repository the run happens to be
// started in.
func gitRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return revisionOf(info)
}

func revisionOf(info *debug.BuildInfo) string {
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}
