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
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

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

// gatewayOf is the address Docker gives the bridge: the last host address
// of p, so that agents can be numbered from 1.
func gatewayOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= (1 << (32 - p.Bits())) - 1 // broadcast
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func (b *Backend) labels(extra ...string) map[string]string {
	l := map[string]string{LabelRun: b.spec.RunID}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// createNetwork creates replica r's bridge network. Internal: no route
// out and no masquerading, so an agent can reach nothing but its replica.
//
// Equivalent to: `docker network create --internal --subnet P --gateway G
// -o com.docker.network.bridge.name=RUNID-rN --label tokenbed.run=RUNID RUNID-rN`.
func (b *Backend) createNetwork(ctx context.Context, r int, p netip.Prefix) error {
	ctx, cancel := engineOp(ctx)
	defer cancel()
	name := fmt.Sprintf("%s-r%d", b.spec.RunID, r)
	n := &dockerNet{name: name, bridge: name, prefix: p.Masked(), gateway: gatewayOf(p)}
	// Docker accepts two networks of one name: refuse it here, or the
	// holders would fail later with "ambiguous".
	ls, err := b.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return fmt.Errorf("ctrbackend: list networks: %w", err)
	}
	for _, o := range ls.Items {
		if o.Name == name {
			return fmt.Errorf("ctrbackend: a network named %s exists already (id %.12s): a run with this ID is in progress, or was killed (harness clean --run %s)", name, o.ID, b.spec.RunID)
		}
	}
	res, err := b.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver:   "bridge",
		Internal: true,
		IPAM:     &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: n.prefix, Gateway: n.gateway}}},
		Options: map[string]string{
			"com.docker.network.bridge.name":                 n.bridge,
			"com.docker.network.bridge.enable_ip_masquerade": "false",
		},
		Labels: b.labels(),
	})
	if err != nil && strings.Contains(err.Error(), "overlaps") {
		return fmt.Errorf("ctrbackend: create network %s: subnet %v overlaps a network that exists (another container run in progress, or one killed: harness clean): %w", name, p, err)
	}
	if err != nil {
		return fmt.Errorf("ctrbackend: create network %s (%v): %w", name, p, err)
	}
	n.id = res.ID
	if err := disableIPv6(n.bridge); err != nil {
		return fmt.Errorf("ctrbackend: network %s: %w", name, err)
	}
	b.mu.Lock()
	b.nets = append(b.nets, n)
	b.mu.Unlock()
	return nil
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

// podParallelism is how many pod holders are started at once.
var podParallelism = 4

func holderName(runID, inst string) string { return runID + ".net-" + inst }
func agentName(runID, inst string) string  { return runID + "-" + inst }

// startPods starts every holder, then gives each the others of its
// replica as permanent neighbours (no ARP crosses the capture, and the
// first pass does not wait for one), as the netns backend does.
func (b *Backend) startPods(ctx context.Context) error {
	// The engine does most of the work of a container start: a few at a
	// time shorten Setup (measured: see BenchmarkStartToReady).
	sem := make(chan struct{}, podParallelism)
	errs := make(chan error, len(b.pods))
	var wg sync.WaitGroup
	for _, agents := range b.spec.Replicas {
		for _, a := range agents {
			p := b.pods[a.Instance]
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				errs <- b.startHolder(ctx, p)
			}()
		}
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, agents := range b.spec.Replicas {
		for _, a := range agents {
			if err := b.setNeighbours(b.pods[a.Instance], agents); err != nil {
				return err
			}
		}
	}
	return nil
}

// startHolder starts a pod's holder container and opens its namespace.
func (b *Backend) startHolder(ctx context.Context, p *pod) error {
	ctx, cancel := engineOp(ctx)
	defer cancel()
	inst := p.agent.Instance
	name := holderName(b.spec.RunID, inst)
	req := testcontainers.ContainerRequest{
		Image:      b.image,
		Name:       name,
		Entrypoint: []string{PausePath},
		Labels:     b.labels(LabelInstance, inst, LabelRole, "pod"),
		Networks:   []string{p.net.name},
		EndpointSettingsModifier: func(eps map[string]*network.EndpointSettings) {
			if ep := eps[p.net.name]; ep != nil {
				ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: p.agent.Addr}
			}
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode(p.net.name)
			hc.CapDrop = []string{"ALL"}
			hc.ReadonlyRootfs = true
			hc.CgroupParent = b.rt.parent // every container of the run in its group
			// IPv6 autoconfiguration chatter would fill the captures
			// (on a host with IPv6 at all: else the sysctls do not exist).
			if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
				hc.Sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
			}
		},
	}
	c, err := b.prov.CreateContainer(ctx, req)
	if c != nil {
		p.holderID = c.GetContainerID()
	}
	if err != nil {
		return fmt.Errorf("ctrbackend: create pod holder %s: %w", name, err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("ctrbackend: start pod holder %s: %w", name, err)
	}
	st, err := b.inspect(ctx, p.holderID)
	if err != nil {
		return err
	}
	if !st.Running || st.Pid <= 0 {
		return fmt.Errorf("ctrbackend: pod holder %s is not running (exit %d, %s)", name, st.ExitCode, st.Error)
	}
	if p.ns, err = netns.GetFromPid(st.Pid); err != nil {
		return fmt.Errorf("ctrbackend: pod holder %s: namespace of pid %d: %w", name, st.Pid, err)
	}
	p.nsPath = fmt.Sprintf("/proc/%d/ns/net", st.Pid)
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("ctrbackend: pod holder %s: eth0: %w", name, err)
	}
	p.mac = l.Attrs().HardwareAddr
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	if len(addrs) != 1 || addrs[0].IP.String() != p.agent.Addr.String() {
		return fmt.Errorf("ctrbackend: pod holder %s: eth0 has %v, want %v", name, addrs, p.agent.Addr)
	}
	if err := dropDefaultRoute(h, name); err != nil {
		return err
	}
	veth, err := b.findHostVeth(p, l)
	if err != nil {
		return err
	}
	p.hostVeth = veth
	if err := disableIPv6(veth); err != nil {
		return fmt.Errorf("ctrbackend: pod holder %s: %w", name, err)
	}
	return nil
}

// disableIPv6 stops IPv6 autoconfiguration (router solicitations, MLD
// reports) on one of the run's host-side links: the bridge or a pod's
// veth, both made by Docker for this run alone and deleted with it. Their
// chatter would otherwise reach every agent's capture. The pods' own
// eth0 have it disabled by sysctl at creation.
//
// Equivalent to: `sysctl -w net.ipv6.conf.LINK.disable_ipv6=1`.
func disableIPv6(link string) error {
	p := filepath.Join("/proc/sys/net/ipv6/conf", link, "disable_ipv6")
	if _, err := os.Stat(filepath.Dir(p)); errors.Is(err, os.ErrNotExist) {
		return nil // no IPv6 on this host at all
	}
	if err := os.WriteFile(p, []byte("1"), 0); err != nil {
		return fmt.Errorf("disable IPv6 on %s: %w", link, err)
	}
	return nil
}

// dropDefaultRoute removes the default route Docker gives even an
// internal network's containers (via the bridge's address): an agent
// talks only to its replica's subnet, and without the route nothing it
// sends can leave it, whatever the host's firewall (Docker's isolation
// rules are absent when the engine runs with iptables disabled).
//
// Equivalent to: `ip route del default` inside the holder's namespace.
func dropDefaultRoute(h *netlink.Handle, name string) error {
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("ctrbackend: pod holder %s: routes: %w", name, err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() && r.Dst.Mask != nil && net.IP(r.Dst.Mask).IsUnspecified() {
			if err := h.RouteDel(&r); err != nil {
				return fmt.Errorf("ctrbackend: pod holder %s: delete default route: %w", name, err)
			}
		}
	}
	return nil
}

// findHostVeth finds the host end of the holder's eth0: its peer index
// (IFLA_LINK) names a veth in the harness's namespace, which must be a
// port of the run's bridge; anything else is not ours and is not used.
func (b *Backend) findHostVeth(p *pod, eth0 netlink.Link) (string, error) {
	hh, err := netlink.NewHandleAt(b.hostNS)
	if err != nil {
		return "", err
	}
	defer hh.Close()
	br, err := hh.LinkByName(p.net.bridge)
	if err != nil {
		return "", fmt.Errorf("ctrbackend: bridge %s of network %s not in the harness's namespace (does the engine run in another one?): %w", p.net.bridge, p.net.name, err)
	}
	peer := eth0.Attrs().ParentIndex
	l, err := hh.LinkByIndex(peer)
	if err != nil {
		return "", fmt.Errorf("ctrbackend: %s: host end (ifindex %d) of eth0: %w", p.agent.Instance, peer, err)
	}
	if l.Type() != "veth" || l.Attrs().MasterIndex != br.Attrs().Index {
		return "", fmt.Errorf("ctrbackend: %s: ifindex %d is %s %q on master %d, not a veth port of bridge %s", p.agent.Instance, peer, l.Type(), l.Attrs().Name, l.Attrs().MasterIndex, p.net.bridge)
	}
	return l.Attrs().Name, nil
}

// setNeighbours adds permanent neighbour entries in p's namespace for
// every other agent of its replica.
//
// Equivalent to: `ip neigh replace ADDR lladdr MAC dev eth0 nud permanent`
// inside the holder's namespace, per other agent.
func (b *Backend) setNeighbours(p *pod, agents []backend.Agent) error {
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	for _, o := range agents {
		if o.Instance == p.agent.Instance {
			continue
		}
		op := b.pods[o.Instance]
		n := &netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT, IP: o.Addr.AsSlice(), HardwareAddr: op.mac}
		if err := h.NeighSet(n); err != nil {
			return fmt.Errorf("ctrbackend: %s: neighbour %v: %w", p.agent.Instance, o.Addr, err)
		}
	}
	return nil
}

func (b *Backend) inspect(ctx context.Context, id string) (*container.State, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: inspect %.12s: %w", id, err)
	}
	if res.Container.State == nil {
		return nil, fmt.Errorf("ctrbackend: inspect %.12s: no state", id)
	}
	return res.Container.State, nil
}

func (b *Backend) pod(instance string) (*pod, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[instance]
	if p == nil || p.holderID == "" {
		return nil, fmt.Errorf("ctrbackend: no agent %q", instance)
	}
	return p, nil
}

// AgentPort implements backend.Backend: eth0 in the pod's namespace,
// which outlives the agent's container across crashes and restarts.
func (b *Backend) AgentPort(instance string) (backend.Port, error) {
	p, err := b.pod(instance)
	if err != nil {
		return backend.Port{}, err
	}
	return backend.Port{NS: p.ns, NSPath: p.nsPath, Link: "eth0", Name: b.spec.RunID + "-" + instance}, nil
}

// IngressPort implements backend.Backend: the host end of the pod's veth
// on the run's bridge, whose egress queue holds exactly the traffic toward
// the agent. Docker created it for the run's holder, nothing else uses it,
// and it is deleted with the holder (and any qdisc with it), so attaching
// a netem tree there (kernel path, on hosts with sch_netem) touches
// nothing that is not the run's. The userspace engine works inside the
// pod's own namespace instead (AgentPort).
func (b *Backend) IngressPort(instance string) (backend.Port, error) {
	p, err := b.pod(instance)
	if err != nil {
		return backend.Port{}, err
	}
	return backend.Port{NS: b.hostNS, NSPath: fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), Link: p.hostVeth}, nil
}

// Start implements backend.Backend: a new agent container in the pod's
// namespace runs the image's copy of cmd.Path with cmd.Args. The previous
// container of the instance, if any, must have exited; it is removed
// first (its output was already copied to its Stdout/Stderr).
func (b *Backend) Start(ctx context.Context, instance string, c backend.Cmd) (backend.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := b.pod(instance)
	if err != nil {
		return nil, err
	}
	if err := b.sameAgent(c.Path); err != nil {
		return nil, err
	}
	ctx, cancel := engineOp(ctx)
	defer cancel()
	b.mu.Lock()
	prev, prevID := p.proc, p.ctr
	b.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.done:
		default:
			return nil, fmt.Errorf("ctrbackend: start %s: its agent container %.12s is still running", instance, prevID)
		}
	}
	if prevID != "" {
		if _, err := b.cli.ContainerRemove(ctx, prevID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("ctrbackend: remove the previous container of %s: %w", instance, err)
		}
	}
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var mounts []mount.Mount
	for _, m := range b.spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m, Target: m})
	}
	name := agentName(b.spec.RunID, instance)
	req := testcontainers.ContainerRequest{
		Image:      b.image,
		Name:       name,
		Entrypoint: []string{AgentPath},
		Cmd:        c.Args,
		Env:        env,
		Labels:     b.labels(LabelInstance, instance, LabelRole, "agent"),
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode("container:" + p.holderID)
			hc.Mounts = mounts
			// The agent binds a port above 1024 and reads and writes
			// files it owns: the one capability it needs is for its
			// --rt-priority, as in the netns backend (realtime.go).
			hc.CapDrop = []string{"ALL"}
			hc.CapAdd = []string{"SYS_NICE"}
			hc.ReadonlyRootfs = true
			hc.CgroupParent = b.rt.parent
			hc.CPURealtimeRuntime = b.rt.share
		},
	}
	stdout, err := dupFile(c.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := dupFile(c.Stderr)
	if err != nil {
		closeFile(stdout)
		return nil, err
	}
	ctr, err := b.prov.CreateContainer(ctx, req)
	if ctr != nil {
		b.mu.Lock()
		p.ctr = ctr.GetContainerID()
		b.mu.Unlock()
	}
	if err == nil {
		err = ctr.Start(ctx)
	}
	var st *container.State
	if err == nil {
		st, err = b.inspect(ctx, ctr.GetContainerID())
	}
	if err != nil {
		closeFile(stdout)
		closeFile(stderr)
		return nil, fmt.Errorf("ctrbackend: start %s: %w", name, err)
	}
	pr := &proc{b: b, id: ctr.GetContainerID(), name: name, pid: st.Pid, pidfd: -1, done: make(chan struct{})}
	// A pidfd names this process, never one that reuses its PID later.
	if fd, err := unix.PidfdOpen(st.Pid, 0); err == nil {
		pr.pidfd = fd
	}
	b.mu.Lock()
	p.proc = pr
	b.procs = append(b.procs, pr)
	b.mu.Unlock()
	pr.follow(stdout, stderr)
	return pr, nil
}

// sameAgent checks that path is the binary the image was built from: a
// container can only run what is in its image.
func (b *Backend) sameAgent(path string) error {
	want, err := os.Stat(b.o.AgentBin)
	if err != nil {
		return fmt.Errorf("ctrbackend: agent binary: %w", err)
	}
	got, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("ctrbackend: start %s: %w", path, err)
	}
	if !os.SameFile(want, got) {
		return fmt.Errorf("ctrbackend: start %s: the run's image holds %s, not this program", path, b.o.AgentBin)
	}
	return nil
}

// dupFile returns a descriptor of its own on f (the caller may close f as
// soon as Start returns, while the container's output still flows).
func dupFile(f *os.File) (*os.File, error) {
	if f == nil {
		return nil, nil
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("ctrbackend: dup %s: %w", f.Name(), err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// proc is an agent container seen as a process.
type proc struct {
	b     *Backend
	id    string
	name  string
	pid   int
	fdMu  sync.Mutex // pidfd is closed when the container ends
	pidfd int        // -1 if none: signals go through the engine

	done chan struct{}
	code int
	sig  syscall.Signal
	err  error
}

func (p *proc) Pid() int { return p.pid }

// Signal sends s to the agent (PID 1 of its container).
//
// Equivalent to: `docker kill -s SIG RUNID-INSTANCE`. The signal goes
// straight to the container's PID 1 as the host sees it, which is what
// runc does for `docker kill`, without the API round trip (10–20 ms here):
// a schedule's crash of the holder must land while it still holds the
// token, as it does with the netns backend. Docker then sees its
// container exit. Where the harness may not signal it (no CAP_KILL over
// the container's user), the request goes through the engine.
func (p *proc) Signal(s syscall.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	p.fdMu.Lock()
	var err error = unix.EBADF
	if p.pidfd >= 0 {
		err = unix.PidfdSendSignal(p.pidfd, s, nil, 0)
	}
	p.fdMu.Unlock()
	switch err {
	case nil:
		return nil
	case unix.ESRCH:
		return os.ErrProcessDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.b.cli.ContainerKill(ctx, p.id, client.ContainerKillOptions{Signal: fmt.Sprint(int(s))})
	if err != nil && (cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err)) {
		return os.ErrProcessDone // it ended between the check and the kill
	}
	if err != nil {
		return fmt.Errorf("ctrbackend: kill -s %d %s: %w", int(s), p.name, err)
	}
	return nil
}

func (p *proc) Wait() (int, syscall.Signal, error) {
	<-p.done
	return p.code, p.sig, p.err
}

// follow copies the container's output to stdout and stderr until it
// ends, and waits for its exit status. The engine reports death by signal
// N as exit status 128+N (the runtime's convention); it is returned as
// (-1, N), as the netns backend does.
func (p *proc) follow(stdout, stderr *os.File) {
	ctx := context.Background()
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		rc, err := p.b.cli.ContainerLogs(ctx, p.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if err != nil {
			return
		}
		defer rc.Close()
		var out, errw io.Writer = io.Discard, io.Discard
		if stdout != nil {
			out = stdout
		}
		if stderr != nil {
			errw = stderr
		}
		stdcopy.StdCopy(out, errw, rc)
	}()
	go func() {
		defer close(p.done)
		defer func() {
			p.fdMu.Lock()
			if p.pidfd >= 0 {
				unix.Close(p.pidfd)
				p.pidfd = -1
			}
			p.fdMu.Unlock()
		}()
		defer closeFile(stdout)
		defer closeFile(stderr)
		w := p.b.cli.ContainerWait(ctx, p.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case res := <-w.Result:
			code := int(res.StatusCode)
			if res.Error != nil && res.Error.Message != "" {
				p.err = fmt.Errorf("ctrbackend: %s: %s", p.name, res.Error.Message)
			}
			if code > 128 && code < 128+65 {
				p.code, p.sig = -1, syscall.Signal(code-128)
			} else {
				p.code = code
			}
		case err := <-w.Error:
			p.code, p.err = -1, fmt.Errorf("ctrbackend: wait for %s: %w", p.name, err)
		}
		// The log stream ends with the container; bound the wait in case
		// the engine keeps it open.
		select {
		case <-logsDone:
		case <-time.After(5 * time.Second):
		}
	}()
}

// Teardown implements backend.Backend: it removes every container (agents
// and pod holders: docker rm -f kills what still runs), the networks and
// the image of the run, found by label as well as by what was recorded,
// so that a half-finished Setup leaves nothing either.
func (b *Backend) Teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b.mu.Lock()
	procs := b.procs
	b.procs = nil
	pods := b.pods
	b.pods = map[string]*pod{}
	b.nets = nil
	b.mu.Unlock()
	var errs []error
	if b.cli != nil {
		var err error
		if _, err = clean(ctx, b.cli, b.spec.RunID); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("ctrbackend: %s did not end", p.name))
		}
	}
	for _, p := range pods {
		if p.ns >= 0 {
			p.ns.Close()
		}
	}
	if b.hostNS >= 0 {
		b.hostNS.Close()
		b.hostNS = -1
	}
	if b.prov != nil {
		b.prov.Close()
	}
	return errors.Join(errs...)
}
