package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/backend"
	"tokenbed/harness/capture"
	"tokenbed/harness/protocol"
	"tokenbed/harness/sim"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// ImpairSim is the impairment path of the simulator: its links are the
// userspace engine's netem model, in virtual time.
const ImpairSim = "sim"

// The simulator (backend "sim", package harness/sim) runs through this
// runner like any backend: the same credentials, configurations, topology,
// schedule, harness log and results directory. What differs is behind the
// seams (seams.go), whose simulated implementations are here: the clock
// (now and sleep: virtual time, which the schedule drives), the host (no
// claim, no agent binary, no resource server), how a process starts (the
// protocol builds a sim.Process from its configuration, protocol.Simulated),
// the links (World.SetProfile instead of the engine's) and the capture
// (written by the world from its links, capture.Writer). The run is then a
// function of the experiment and its seed: no goroutine, no wall clock,
// nothing in map order reaches the logs or the capture.

// simSeams are a run in sb's world. The world is read at each use:
// Configure replaces it before the network is built.
func simSeams(sb *sim.Backend, timeScale float64) seams {
	return seams{clock: simClock{sb: sb, timeScale: timeScale}, host: simHost{sb: sb}, procs: &simProcs{sb: sb},
		links: simLinks{sb: sb}, capture: simCapture{sb: sb}}
}

var (
	_ clock     = simClock{}
	_ host      = simHost{}
	_ processes = (*simProcs)(nil)
	_ links     = simLinks{}
	_ capturer  = simCapture{}
)

// simClock is the world's virtual time.
type simClock struct {
	sb        *sim.Backend
	timeScale float64
}

func (c simClock) Now() time.Time { return c.sb.World.Now() }

// Wait runs the world until next, or for a tick of virtual time when
// paper time is not virtual time (a compressed time scale).
func (c simClock) Wait(ctx context.Context, _ <-chan time.Time, next time.Time) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	w := c.sb.World
	if c.timeScale != 1 || next.IsZero() {
		next = w.Now().Add(schedTick)
	}
	return w.RunUntil(next)
}

func (c simClock) Pause(d time.Duration) error {
	w := c.sb.World
	return w.RunUntil(w.Now().Add(d))
}

// Stamp puts virtual time on both clocks, as the simulated processes log.
func (c simClock) Stamp(ev *eventlog.Event) {
	if ev.MonoNS == 0 {
		ev.WallNS, ev.MonoNS = c.sb.World.Now().UnixNano(), c.sb.World.Mono()
	}
}

// simHost: a simulation creates nothing on the host but its results.
type simHost struct{ sb *sim.Backend }

func (simHost) check(Options) error { return nil }

// claim: no registry entry (and no root).
func (simHost) claim(string, string) (*Claim, error) { return nil, nil }

// planResource: the simulator runs no processes of its own and its
// agents do no I/O: there the operation is the hold, which is all 003's
// own simulation modelled.
func (simHost) planResource(r *run, _ *backend.Spec) error { return r.holdInsteadOfResource() }

// watchCPU: the simulated agents run on virtual time, not on the host's
// CPUs.
func (simHost) watchCPU(Options) func() *results.HostCPU {
	return func() *results.HostCPU { return nil }
}

// prepare makes the world the run needs.
func (h simHost) prepare(r *run, _ int) error {
	// The world hands every event over as it logs it, in time order
	// across processes: tailing the files would read them file by file,
	// and a simulated stretch of hours holds many passes of one token.
	h.sb.Configure(sim.Config{Seed: r.e.Seed, OnExit: r.simExited, OnEvent: r.observe})
	return nil
}

// simProcs start the protocol's simulated processes.
type simProcs struct {
	sb *sim.Backend
	// One process runs every agent: each certificate is verified once
	// per run, not once per agent that loads or receives it.
	verified ca.Verified
}

// credentials: the CA and keys derive from the seed, valid from the
// virtual epoch on (and for ever), so a seed gives the same signatures.
func (*simProcs) credentials(seed uint64) *ca.Source {
	return ca.Seeded(seed, sim.Epoch, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
}

// configure keeps the configuration in memory when the protocol can
// (protocol.SimConfigured): n agents that know each other would write
// n(n-1) peer entries, and parse them back.
func (*simProcs) configure(r *run, inst string, peers []protocol.Process, files protocol.Files, seed uint64) error {
	sc, ok := r.proto.(protocol.SimConfigured)
	if !ok {
		return agentProcs{}.configure(r, inst, peers, files, seed)
	}
	start, err := sc.SimConfig(r.e, r.process(inst), peers, files, seed)
	if err != nil {
		return fmt.Errorf("%s: configuration: %w", inst, err)
	}
	ar := r.agents[inst]
	ar.simStart, ar.cfgPath = start, ""
	return nil
}

// start starts inst as its protocol's simulated process.
func (p *simProcs) start(_ context.Context, r *run, inst, join string) error {
	ps, ok := r.proto.(protocol.Simulated)
	if !ok {
		return fmt.Errorf("protocol %s cannot run in the simulator (it does not implement protocol.Simulated)", r.proto.Name())
	}
	ar := r.agents[inst]
	w := p.sb.World
	o := protocol.Start{Join: join, Verified: &p.verified}
	var sp sim.Process
	var logPath string
	var err error
	if ar.simStart != nil {
		sp, logPath, err = ar.simStart(o, w.Now())
	} else {
		sp, logPath, err = ps.SimProcess(ar.cfgPath, o, w.Now())
	}
	if err != nil {
		return err
	}
	if err := w.Start(inst, sp, logPath); err != nil {
		return err
	}
	r.mu.Lock()
	ar.proc, ar.running = &simProc{w: w, inst: inst}, true
	r.mu.Unlock()
	return nil
}

// simLinks are the world's links: the userspace engine's netem model.
type simLinks struct{ sb *sim.Backend }

func (l simLinks) impair(r *run) error { return r.setProfiles(l.sb.World.SetProfile) }

func (l simLinks) setProfile(r *run, from, to string, p netem.Profile) error {
	return l.sb.World.SetProfile(r.agents[from].a.Addr, r.agents[to].a.Addr, p)
}

// simCapture writes the capture from the world's links: one interface
// per agent, in start order (its host index).
type simCapture struct{ sb *sim.Backend }

func (c simCapture) start(_ context.Context, r *run) (recorder, error) {
	f, err := os.OpenFile(filepath.Join(r.dir, results.CaptureFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var names, descs []string
	for _, inst := range r.order {
		names = append(names, inst+"/"+sim.Link)
		descs = append(descs, fmt.Sprintf("agent %s, %v:%d (simulated)", inst, r.agents[inst].a.Addr, AgentPort))
	}
	w, err := capture.NewWriter(f, names, descs, fmt.Sprintf("tokenbed run %s, experiment %s, seed %d, simulated", r.o.recordedID(), r.e.Name, r.e.Seed))
	if err != nil {
		f.Close()
		return nil, err
	}
	c.sb.World.Record(w)
	return &simRecorder{w: w, f: f}, nil
}

// simRecorder is the capture of a simulated run: the world's writer, on
// the results file.
type simRecorder struct {
	w *capture.Writer
	f *os.File
}

func (s *simRecorder) Annotate(ev eventlog.Event) error { return s.w.Annotate(ev) }

func (s *simRecorder) Stop() (capture.Stats, error) {
	st, err := s.w.Stop()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return st, err
}

// simProc is a simulated process as the runner handles processes: a
// signal acts at once, in virtual time, so Wait never waits.
type simProc struct {
	w    *sim.World
	inst string
	sig  syscall.Signal
}

var _ backend.Process = (*simProc)(nil)

func (p *simProc) Pid() int { return 0 }

func (p *simProc) Signal(s syscall.Signal) error {
	if !p.w.Running(p.inst) {
		return nil
	}
	switch s {
	case syscall.SIGKILL:
		p.sig = s
		return p.w.Crash(p.inst)
	case syscall.SIGTERM, syscall.SIGINT:
		p.sig = s
		return p.w.Stop(p.inst, s.String())
	}
	return p.w.Signal(p.inst, s) // a signal the process handles and lives on
}

func (p *simProc) Wait() (int, syscall.Signal, error) {
	if p.sig == syscall.SIGKILL {
		return -1, syscall.SIGKILL, nil
	}
	return 0, 0, nil
}

// simExited is the world's word that a process ended: what the goroutine
// waiting on a real process logs, at once and in order.
func (r *run) simExited(inst string, sig os.Signal) {
	r.mu.Lock()
	ar := r.agents[inst]
	ar.running = false
	r.mu.Unlock()
	detail := "exit status 0"
	if sig != nil {
		s := sig.(syscall.Signal)
		detail = fmt.Sprintf("killed by signal %d (%v)", int(s), s)
	}
	r.event(eventlog.Event{Kind: eventlog.AgentExit, Peer: inst, Detail: detail})
}

// schedTick is how often the schedule looks at the paper clocks.
const schedTick = 25 * time.Millisecond

// RunSimulated runs o.Experiment in a new simulated world, as harness run
// --backend sim does: one continuous replica at paper speed (replicas,
// time scale and network time scale 1). It returns the results directory
// and the world, for its clock and counters. Callers that run many
// simulations (harness swarm) call it from several goroutines: each run
// has its own world and runs single-threaded in it. workers is the
// world's sim.Config.Workers (0: the default; -1: none, the whole
// simulation on the caller's goroutine).
func RunSimulated(ctx context.Context, o Options, workers int) (string, *sim.World, error) {
	e := *o.Experiment
	e.Replicas, e.TimeScale, e.NetworkTimeScale = 1, 1, 1
	o.Experiment = &e
	be := &sim.Backend{World: sim.New(sim.Config{}), Workers: workers}
	o.Backend, o.Impair = be, ImpairSim
	if o.ImpairReason == "" {
		o.ImpairReason = "simulated: each direction is the userspace engine's netem model, in virtual time"
	}
	dir, err := Run(ctx, o)
	return dir, be.World, err
}

// directionIndex is e.Directions by (from, to): set-up looks up each of
// the n(n-1) directions, and Experiment.Direction scans them all, which
// made set-up O(n⁴) (a thousand agents never started). It points into
// e.Directions: a copy of each (its profile is some 300 bytes) was 450 MB
// for 1,000 agents.
func directionIndex(e *experiments.Experiment) map[[2]string]*experiments.Direction {
	m := make(map[[2]string]*experiments.Direction, len(e.Directions))
	for i := range e.Directions {
		d := &e.Directions[i]
		m[[2]string{d.From, d.To}] = d
	}
	return m
}
