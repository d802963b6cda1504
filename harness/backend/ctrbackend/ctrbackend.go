// Package ctrbackend runs agents in Docker containers, through
// testcontainers-go: the alternative to the network-namespace backend for
// users who want each agent in its own container (own PID namespace, own
// root filesystem, a resource boundary) on a Docker bridge network.
//
// Per run:
//
//	image    tokenbed-agent:RUNID   FROM scratch: the static agent binary
//	                                (/agent) and the pod holder (/pause),
//	                                built with testcontainers-go's
//	                                FromDockerfile, no registry needed
//	network  RUNID-rN               one internal bridge network per replica
//	                                (subnet Prefixes[N], bridge RUNID-rN on
//	                                the host, gateway the last address)
//
// Per agent, a pod of two containers, as in Kubernetes:
//
//	RUNID.net-INSTANCE  the holder: /pause on the replica's network with the
//	                    agent's fixed address. It owns the network namespace
//	                    (eth0, address, static neighbours) for the whole run.
//	RUNID-INSTANCE      the agent: /agent run ..., joined to the holder's
//	                    network namespace (--network container:HOLDER).
//
// The split is what makes crash and restart faithful: docker kill ends the
// agent container (a real SIGKILL of the agent), and a restart is a new
// container in the same namespace, so the capture socket, the address, the
// neighbour entries and any impairment attached to the namespace or to its
// host-side veth survive it, as they do with the netns backend. Without
// the holder each restart would get a new namespace and a new veth, and a
// capture or qdisc attached at setup would silently stop seeing traffic.
//
// Every object carries the label tokenbed.run=RUNID and a name starting
// with the run ID; Teardown removes them, and Leftovers/Clean find what a
// killed harness left by that label alone. Ryuk (testcontainers' reaper)
// is disabled: its image cannot be pulled offline, and cleanup is ours.
//
// Equivalent to, for agent A of replica 0 of run tb123abc:
//
//	docker build -t tokenbed-agent:tb123abc --label tokenbed.run=tb123abc CONTEXT
//	docker network create --internal --subnet 10.77.0.0/24 --gateway 10.77.0.254 \
//	    -o com.docker.network.bridge.name=tb123abc-r0 --label tokenbed.run=tb123abc tb123abc-r0
//	docker run -d --name tb123abc.net-A --network tb123abc-r0 --ip 10.77.0.1 \
//	    --sysctl net.ipv6.conf.all.disable_ipv6=1 --cap-drop ALL --read-only \
//	    --cgroup-parent /tokenbed-tb123abc \
//	    --label tokenbed.run=tb123abc --entrypoint /pause tokenbed-agent:tb123abc
//	docker run -d --name tb123abc-A --network container:tb123abc.net-A \
//	    --mount type=bind,src=KEYDIR,dst=KEYDIR --mount type=bind,src=RESULTS,dst=RESULTS \
//	    --cap-drop ALL --cap-add SYS_NICE --read-only --label tokenbed.run=tb123abc \
//	    --cgroup-parent /tokenbed-tb123abc --cpu-rt-runtime SHARE \
//	    --entrypoint /agent tokenbed-agent:tb123abc run --config KEYDIR/A.yaml --rt-priority 5
//
// The cgroup parent and its real-time budget are the run's, where the
// kernel needs one for the agents' real-time priority (realtime.go).
package ctrbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/vishvananda/netns"

	"tokenbed/harness/backend"
)

// Labels on every object of a run.
const (
	LabelRun      = "tokenbed.run"      // the run ID
	LabelInstance = "tokenbed.instance" // the agent instance (containers)
	LabelRole     = "tokenbed.role"     // "pod" (holder) or "agent" (containers)
)

// ImageRepo is the repository of the per-run images (tagged with the run
// ID) and of make image (tagged dev).
const ImageRepo = "tokenbed-agent"

// Paths inside the image.
const (
	AgentPath = "/agent"
	PausePath = "/pause"
)

// ErrNoEngine is returned (wrapped) when no Docker engine answers.
var ErrNoEngine = errors.New("no Docker engine reachable")

// Options configure a Backend.
type Options struct {
	// AgentBin is the static agent binary (CGO_ENABLED=0) the run's image
	// is built from. Start refuses to run any other program.
	AgentBin string
	// Log receives progress at Info and testcontainers' own messages at
	// Debug; nil discards them.
	Log *slog.Logger
	// BuildLog receives the image build's output; nil discards it.
	BuildLog io.Writer
}

// Timings are durations measured by Setup.
type Timings struct {
	Connect    time.Duration // reaching the engine
	ImageBuild time.Duration // building the run's image
	Networks   time.Duration // creating the replicas' networks
	Pods       time.Duration // creating and starting every pod holder
}

type pod struct {
	agent    backend.Agent
	net      *dockerNet
	holderID string
	ns       netns.NsHandle
	nsPath   string // /proc/HOLDERPID/ns/net
	mac      net.HardwareAddr
	hostVeth string // the holder's veth peer in the host namespace

	ctr  string // current agent container ID, "" before the first Start
	proc *proc
}

type dockerNet struct {
	id, name, bridge string
	prefix           netip.Prefix
	gateway          netip.Addr
}

// Backend is the container backend. Its methods are safe for concurrent
// use once Setup has returned.
type Backend struct {
	o      Options
	prov   *testcontainers.DockerProvider
	cli    client.APIClient
	hostNS netns.NsHandle

	mu      sync.Mutex
	spec    backend.Spec
	image   string
	nets    []*dockerNet
	pods    map[string]*pod
	procs   []*proc
	timings Timings
	rt      rtPlan // the agents' real-time scheduling (realtime.go)
}

// New returns a backend that will build its image from o.AgentBin.
func New(o Options) *Backend {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.BuildLog == nil {
		o.BuildLog = io.Discard
	}
	return &Backend{o: o, pods: map[string]*pod{}, hostNS: -1}
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "container" }

// Timings returns what Setup measured.
func (b *Backend) Timings() Timings {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timings
}

// Image returns the run's image reference (after Setup).
func (b *Backend) Image() string { return b.image }

// slogPrintf adapts testcontainers' Printf logger to slog at Debug level.
type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}

var ryukOnce sync.Once

// Connect reaches the Docker engine through testcontainers-go with Ryuk
// disabled (TESTCONTAINERS_RYUK_DISABLED=true, set for this process). The
// error wraps ErrNoEngine when nothing answers.
func Connect(ctx context.Context, log *slog.Logger) (*testcontainers.DockerProvider, error) {
	ryukOnce.Do(func() {
		// The reaper image cannot be pulled without a registry, and
		// cleanup here is explicit and by label. Read once by
		// testcontainers: set before the first provider.
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	})
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tclog.SetDefault(slogPrintf{log}) // its connection banner goes to the package logger
	if !testcontainers.ReadConfig().RyukDisabled {
		return nil, errors.New("ctrbackend: testcontainers' reaper (Ryuk) is enabled by configuration (~/.testcontainers.properties ryuk.disabled=false?); it cannot be pulled offline: disable it")
	}
	prov, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(slogPrintf{log}))
	if err == nil {
		err = prov.Health(ctx)
		if err != nil {
			prov.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: %w (%v): start the Docker engine (systemctl start docker), check DOCKER_HOST, or use --backend netns", ErrNoEngine, err)
	}
	return prov, nil
}

// Setup implements backend.Backend: it builds the image, the replicas'
// networks and every agent's pod holder.
func (b *Backend) Setup(ctx context.Context, spec backend.Spec) (err error) {
	if err := checkSpec(spec); err != nil {
		return err
	}
	if b.o.AgentBin == "" {
		return errors.New("ctrbackend: Options.AgentBin: no agent binary to build the image from")
	}
	b.spec = spec
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Teardown(context.Background()))
		}
	}()
	t0 := time.Now()
	prov, err := Connect(ctx, b.o.Log)
	if err != nil {
		return err
	}
	b.prov, b.cli = prov, prov.Client()
	if b.hostNS, err = netns.GetFromPid(os.Getpid()); err != nil {
		return fmt.Errorf("ctrbackend: the harness's network namespace: %w", err)
	}
	if b.rt, err = b.planRealtime(ctx); err != nil {
		return err
	}
	if b.rt.note != "" {
		b.o.Log.Warn("agents in containers may not get real-time priority: their pass latency will move with the machine's load", "why", b.rt.note)
	}
	t1 := time.Now()
	if err := b.buildImage(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t2 := time.Now()
	b.o.Log.Info("container image built", "image", b.image, "took", t2.Sub(t1).Round(time.Millisecond))
	for r, agents := range spec.Replicas {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.createNetwork(ctx, r, spec.Prefixes[r]); err != nil {
			return err
		}
		for _, a := range agents {
			b.pods[a.Instance] = &pod{agent: a, net: b.nets[r], ns: -1}
		}
	}
	t3 := time.Now()
	if err := b.startPods(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	b.timings = Timings{Connect: t1.Sub(t0), ImageBuild: t2.Sub(t1), Networks: t3.Sub(t2), Pods: time.Since(t3)}
	b.mu.Unlock()
	return nil
}

// checkSpec refuses what Docker would refuse later with a vaguer message.
func checkSpec(spec backend.Spec) error {
	if !backend.ValidRunID(spec.RunID) {
		return fmt.Errorf("ctrbackend: run id %q: want tb and six hex digits", spec.RunID)
	}
	if len(spec.Prefixes) != len(spec.Replicas) {
		return fmt.Errorf("ctrbackend: spec has %d replicas but %d prefixes: each replica needs its own subnet", len(spec.Replicas), len(spec.Prefixes))
	}
	seen := map[netip.Prefix]int{}
	for r, agents := range spec.Replicas {
		p := spec.Prefixes[r]
		if !p.Addr().Is4() || p.Bits() > 29 {
			return fmt.Errorf("ctrbackend: replica %d: prefix %v: want an IPv4 subnet of /29 or larger", r, p)
		}
		for q, o := range seen {
			if q.Overlaps(p) {
				return fmt.Errorf("ctrbackend: replicas %d and %d: prefixes %v and %v overlap (Docker refuses overlapping networks)", o, r, q, p)
			}
		}
		seen[p] = r
		gw := gatewayOf(p)
		for _, a := range agents {
			switch {
			case !p.Contains(a.Addr):
				return fmt.Errorf("ctrbackend: agent %s: address %v is outside its replica's prefix %v", a.Instance, a.Addr, p)
			case a.Addr == gw:
				return fmt.Errorf("ctrbackend: agent %s: address %v is the network's gateway (the last address of %v): too many agents for the subnet", a.Instance, a.Addr, p)
			case a.Addr == p.Masked().Addr():
				return fmt.Errorf("ctrbackend: agent %s: address %v is the network address of %v", a.Instance, a.Addr, p)
			}
		}
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m) {
			return fmt.Errorf("ctrbackend: mount %q: want an absolute path (it is mounted at the same path)", m)
		}
		if st, err := os.Stat(m); err != nil || !st.IsDir() {
			return fmt.Errorf("ctrbackend: mount %q: want an existing directory (%v)", m, err)
		}
	}
	return nil
}

func (b *Backend) labels(extra ...string) map[string]string {
	l := map[string]string{LabelRun: b.spec.RunID}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// opTimeout bounds one engine operation.
const opTimeout = 2 * time.Minute

// engineOp is the context of one engine operation that creates or
// changes something. It is not cancelled with the run (Ctrl-C): a request
// cut off mid-way can still complete in the engine after Teardown looked
// for what to remove (a container created, or a build's intermediate
// image, a moment later), so each operation runs to its end and the
// caller checks for cancellation between operations.
func engineOp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
}
