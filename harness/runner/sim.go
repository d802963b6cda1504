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
	"tokenbed/harness/results"
	"tokenbed/harness/sim"
)

// ImpairSim is the impairment path of the simulator: its links are the
// userspace engine's netem model, in virtual time.
const ImpairSim = "sim"

// The simulator (backend "sim", package harness/sim) runs through this
// runner like any backend: the same credentials, configurations, topology,
// schedule, harness log and results directory. What differs is behind
// four seams: the clock (now and sleep: virtual time, which the schedule
// drives), how a process starts (the protocol builds a sim.Process from
// the configuration file it wrote, protocol.Simulated), the links
// (World.SetProfile instead of the engine's) and the capture (written by
// the world from its links, capture.Writer). The run is then a function
// of the experiment and its seed: no goroutine, no wall clock, nothing in
// map order reaches the logs or the capture.

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

// simCredentials: the CA and keys derive from the seed, valid from the
// virtual epoch on (and for ever), so a seed gives the same signatures.
func (r *run) simCredentials() *ca.Source {
	if r.simb == nil {
		return nil
	}
	return ca.Seeded(r.e.Seed, sim.Epoch, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
}

// configureSim prepares the world before Setup builds it.
func (r *run) configureSim() {
	// The world hands every event over as it logs it, in time order
	// across processes: tailing the files would read them file by file,
	// and a simulated stretch of hours holds many passes of one token.
	r.simb.Configure(sim.Config{Seed: r.e.Seed, OnExit: r.simExited, OnEvent: r.observe})
	// One process runs every agent: each certificate is verified once
	// per run, not once per agent that loads or receives it.
	r.simVerified = &ca.Verified{}
}

// startSimCapture writes the capture from the world's links: one
// interface per agent, in start order (its host index).
func (r *run) startSimCapture() error {
	f, err := os.OpenFile(filepath.Join(r.dir, results.CaptureFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	var names, descs []string
	for _, inst := range r.order {
		names = append(names, inst+"/"+sim.Link)
		descs = append(descs, fmt.Sprintf("agent %s, %v:%d (simulated)", inst, r.agents[inst].a.Addr, AgentPort))
	}
	w, err := capture.NewWriter(f, names, descs, fmt.Sprintf("tokenbed run %s, experiment %s, seed %d, simulated", r.o.RunID, r.e.Name, r.e.Seed))
	if err != nil {
		f.Close()
		return err
	}
	r.simb.World.Record(w)
	r.cap = &simRecorder{w: w, f: f}
	return nil
}

// simProc is a simulated process as the runner handles processes: a
// signal acts at once, in virtual time, so Wait never waits.
type simProc struct {
	r    *run
	inst string
	sig  syscall.Signal
}

var _ backend.Process = (*simProc)(nil)

func (p *simProc) Pid() int { return 0 }

func (p *simProc) Signal(s syscall.Signal) error {
	w := p.r.simb.World
	if !w.Running(p.inst) {
		return nil
	}
	p.sig = s
	if s == syscall.SIGKILL {
		return w.Crash(p.inst)
	}
	return w.Stop(p.inst, s.String())
}

func (p *simProc) Wait() (int, syscall.Signal, error) {
	if p.sig == syscall.SIGKILL {
		return -1, syscall.SIGKILL, nil
	}
	return 0, 0, nil
}

// startSim starts inst as its protocol's simulated process.
func (r *run) startSim(inst string, ar *agentRun, join string) (backend.Process, error) {
	ps, ok := r.proto.(protocol.Simulated)
	if !ok {
		return nil, fmt.Errorf("protocol %s cannot run in the simulator (it does not implement protocol.Simulated)", r.proto.Name())
	}
	w := r.simb.World
	o := protocol.Start{Join: join, Verified: r.simVerified}
	var p sim.Process
	var logPath string
	var err error
	if ar.simStart != nil {
		p, logPath, err = ar.simStart(o, w.Now())
	} else {
		p, logPath, err = ps.SimProcess(ar.cfgPath, o, w.Now())
	}
	if err != nil {
		return nil, err
	}
	if err := w.Start(inst, p, logPath); err != nil {
		return nil, err
	}
	return &simProc{r: r, inst: inst}, nil
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

// now is the run's clock: the wall clock, or the simulation's.
func (r *run) now() time.Time {
	if r.simb != nil {
		return r.simb.World.Now()
	}
	return time.Now()
}

// sleep waits for the schedule's next look: a tick of the wall clock, or,
// simulated, the world runs until next (the next thing the schedule
// knows is due), or a tick of virtual time when paper time is not
// virtual time (a compressed time scale).
func (r *run) sleep(ctx context.Context, tick <-chan time.Time, next time.Time) error {
	if r.simb == nil {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick:
			return nil
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	w := r.simb.World
	if r.e.TimeScale != 1 || next.IsZero() {
		next = w.Now().Add(schedTick)
	}
	return w.RunUntil(next)
}

// schedTick is how often the schedule looks at the paper clocks.
const schedTick = 25 * time.Millisecond

// pause lets d pass: asleep, or simulated.
func (r *run) pause(d time.Duration) error {
	if r.simb != nil {
		w := r.simb.World
		return w.RunUntil(w.Now().Add(d))
	}
	time.Sleep(d)
	return nil
}

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
