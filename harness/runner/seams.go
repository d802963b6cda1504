package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/harness/backend"
	"tokenbed/harness/capture"
	"tokenbed/harness/protocol"
	"tokenbed/harness/sim"
	"tokenbed/internal/cpustat"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// seams are what differs between a run on a network and a simulated one.
// The rest of the runner (credentials, configurations, topology, the
// schedule, the harness log, the results directory) is the same code for
// both; each seam is chosen once, in newSeams, from the backend. The real
// implementations are here, the simulator's in sim.go.
type seams struct {
	clock   clock
	host    host
	procs   processes
	links   links
	capture capturer
}

// newSeams is the one place that asks whether the run is simulated: the
// simulator's backend brings its world, whose clock, processes, links and
// capture the run then uses.
func newSeams(be backend.Backend, timeScale float64) seams {
	if sb, ok := be.(*sim.Backend); ok {
		return simSeams(sb, timeScale)
	}
	return realSeams()
}

// realSeams are a run on a network: wall clock, processes of the agent
// binary started by the backend, netem on the host, the live capture.
func realSeams() seams {
	return seams{clock: wallClock{}, host: onHost{}, procs: agentProcs{}, links: hostLinks{}, capture: liveCapture{}}
}

// clock is the run's time: when things happen and how the schedule
// waits (the tstime model).
type clock interface {
	Now() time.Time
	// Wait waits for the schedule's next look: a tick, or next (the next
	// thing the schedule knows is due) where the clock can jump there.
	Wait(ctx context.Context, tick <-chan time.Time, next time.Time) error
	// Pause lets d pass.
	Pause(d time.Duration) error
	// Stamp gives a harness event its times, where the clock is not the
	// one the event log reads itself.
	Stamp(ev *eventlog.Event)
}

// host is what a run creates on the host beside its results: the run-ID
// claim (harness clean reads it), the file descriptors, the agent binary
// it starts, the shared resource's server.
type host interface {
	// check fails before anything is created when the run cannot start.
	check(o Options) error
	// claim takes the run ID for the run's side effects; nil when it
	// has none.
	claim(runID, dir string) (*Claim, error)
	// planResource adds the shared resource to the network to build, or
	// says what the agents do instead.
	planResource(r *run, spec *backend.Spec) error
	// prepare readies the host (or the world) for n processes, before
	// the network is built.
	prepare(r *run, n int) error
	// watchCPU starts following what the host's CPUs do while the agents
	// run, and holds o.CPULatency; the function it returns stops, releases
	// and says what they did, or nil where no host CPU runs the agents.
	watchCPU(o Options) func() *results.HostCPU
}

// processes configure and start the agents.
type processes interface {
	// credentials is where the CA and keys come from (nil: fresh ones).
	credentials(seed uint64) *ca.Source
	// configure gives inst its configuration (writeConfig).
	configure(r *run, inst string, peers []protocol.Process, files protocol.Files, seed uint64) error
	// start starts inst, joining through join when not "", and records
	// its process as running.
	start(ctx context.Context, r *run, inst, join string) error
}

// links impair the directions between agents.
type links interface {
	// impair gives every direction its profile, scaled to network time.
	impair(r *run) error
	// setProfile changes the direction between two instances in place.
	setProfile(r *run, from, to string, p netem.Profile) error
}

// capturer starts the capture of every agent's interface.
type capturer interface {
	start(ctx context.Context, r *run) (recorder, error)
}

var (
	_ clock     = wallClock{}
	_ host      = onHost{}
	_ processes = agentProcs{}
	_ links     = hostLinks{}
	_ capturer  = liveCapture{}
)

// wallClock is real time.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Wait(ctx context.Context, tick <-chan time.Time, _ time.Time) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-tick:
		return nil
	}
}

func (wallClock) Pause(d time.Duration) error {
	time.Sleep(d)
	return nil
}

// Stamp leaves the times to the event log, which reads the wall clock.
func (wallClock) Stamp(*eventlog.Event) {}

// onHost is a run that creates namespaces or containers and processes.
type onHost struct{}

func (onHost) check(o Options) error {
	if o.AgentBin == "" {
		return errors.New("runner: no agent binary")
	}
	if _, err := os.Stat(o.AgentBin); err != nil {
		return fmt.Errorf("agent binary: %w (build it with make build)", err)
	}
	return nil
}

func (onHost) claim(runID, dir string) (*Claim, error) { return ClaimID(runID, dir) }

func (onHost) planResource(r *run, spec *backend.Spec) error { return r.planServers(spec) }

func (onHost) prepare(_ *run, n int) error { return ensureFiles(n) }

// watchCPU reads /proc/stat every second: a run's latency is only as good
// as the host's scheduling, and a hypervisor that runs another guest on
// the CPUs delays every datagram in flight (docs/studies/endurance.md).
func (onHost) watchCPU(o Options) func() *results.HostCPU {
	held, heldErr := holdCPULatency(o)
	w := cpustat.Start(time.Second, cpustat.ReadHost)
	return func() *results.HostCPU {
		h := hostCPU(w.Stop())
		h.LatencyError = heldErr
		if held != nil {
			us := held.Bound.Microseconds()
			h.LatencyBoundUS = &us
			if err := held.Release(); err != nil {
				h.LatencyError = "release: " + err.Error()
			}
		}
		return h
	}
}

// agentProcs are processes of the agent binary, configured by files.
type agentProcs struct{}

func (agentProcs) credentials(uint64) *ca.Source { return nil }

func (agentProcs) configure(r *run, inst string, peers []protocol.Process, files protocol.Files, seed uint64) error {
	ar := r.agents[inst]
	b, err := r.proto.Config(r.e, r.process(inst), peers, files, seed)
	if err != nil {
		return fmt.Errorf("%s: configuration: %w", inst, err)
	}
	ar.cfgPath = filepath.Join(r.keyDir, inst+".yaml")
	return os.WriteFile(ar.cfgPath, b, 0o600)
}

func (agentProcs) start(ctx context.Context, r *run, inst, join string) error {
	return r.startProcess(ctx, inst, join)
}

// hostLinks are netem on the host: the kernel's trees, or the userspace
// engine, or none.
type hostLinks struct{}

func (hostLinks) impair(r *run) error {
	switch r.o.Impair {
	case ImpairNone:
		return nil
	case ImpairUserspace:
		return r.impairUserspace()
	case ImpairKernel:
		return r.impairKernel()
	}
	return fmt.Errorf("impairment %q is not available with the %s backend", r.o.Impair, r.be.Name())
}

// setProfile changes the leaf for from's address in the tree on the
// queue toward to, or the engine's direction.
func (hostLinks) setProfile(r *run, from, to string, p netem.Profile) error {
	if r.eng != nil {
		return r.eng.SetProfile(r.agents[from].a.Addr, r.agents[to].a.Addr, p)
	}
	t := r.trees[to]
	if t == nil {
		if r.o.Impair == ImpairNone {
			return fmt.Errorf("impairment none: cannot change %s>%s", from, to)
		}
		return fmt.Errorf("no impairment tree toward %s", to)
	}
	return t.Change(netip.PrefixFrom(r.agents[from].a.Addr, 32), p)
}

// liveCapture captures every agent's interface with AF_PACKET sockets
// (package capture).
type liveCapture struct{}

func (liveCapture) start(ctx context.Context, r *run) (recorder, error) {
	var ifs []capture.Interface
	for _, inst := range r.order {
		p, err := r.be.AgentPort(inst)
		if err != nil {
			return nil, err
		}
		dev := p.Link
		if d := r.capDev[inst]; d != "" {
			dev = d
		}
		ifs = append(ifs, capture.Interface{Name: inst + "/" + dev, Device: dev, NetNSPath: p.NSPath,
			Description: fmt.Sprintf("agent %s, %v:%d", inst, r.agents[inst].a.Addr, AgentPort)})
	}
	c, err := capture.Create(ctx, filepath.Join(r.dir, results.CaptureFile), capture.Config{Interfaces: ifs, RingBlocks: captureRingBlocks(len(ifs)),
		Comment: fmt.Sprintf("tokenbed run %s, experiment %s, seed %d", r.o.recordedID(), r.e.Name, r.e.Seed)})
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return c, nil
}
