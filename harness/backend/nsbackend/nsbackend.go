// Package nsbackend runs agents in Linux network namespaces: the harness's
// default, embedded backend. Everything it creates lives in namespaces
// named after the run ID, so removing them removes every link, bridge,
// address and qdisc too, and nothing is created in the host's namespace.
//
// Per replica:
//
//	RUNID-hubN      a namespace with bridge br0 and one port pI per agent
//	RUNID-INSTANCE  an agent's namespace: lo, and eth0 (10.77.0.I/16),
//	                the other end of pI; permanent neighbour entries for the
//	                other agents, so no ARP crosses the capture
//
// Equivalent to, for agent A of replica 0:
//
//	ip netns add tb123abc-hub0
//	ip -n tb123abc-hub0 link add br0 type bridge && ip -n tb123abc-hub0 link set br0 up
//	ip netns add tb123abc-A
//	ip -n tb123abc-hub0 link add p0 type veth peer name e0 netns tb123abc-A
//	ip -n tb123abc-hub0 link set p0 master br0 up
//	ip -n tb123abc-A link set e0 name eth0 && ip -n tb123abc-A addr add 10.77.0.1/16 dev eth0
//	ip -n tb123abc-A link set eth0 up && ip -n tb123abc-A link set lo up
//
// Agents start inside their namespace (the harness forks from a thread
// switched into it), in their own process group, with SIGKILL as parent
// death signal: if the harness itself is killed, its agents die with it.
package nsbackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/harness/backend"
	"tokenbed/internal/nsenter"
)

// NetnsDir is where named namespaces are bound (as iproute2 does).
const NetnsDir = "/run/netns"

type agentNet struct {
	agent   backend.Agent
	ns      netns.NsHandle
	nsName  string
	hub     netns.NsHandle
	hubName string
	port    string // hub-side veth
	mac     net.HardwareAddr
}

// Backend is the network-namespace backend.
type Backend struct {
	mu     sync.Mutex
	spec   backend.Spec
	agents map[string]*agentNet
	hubs   []string // namespace names
	procs  []*proc
	made   []string // every namespace created, for teardown
}

// New returns an empty backend.
func New() *Backend { return &Backend{agents: map[string]*agentNet{}} }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "netns" }

// prepareNetnsDir makes NetnsDir a shared bind mount of itself, as
// iproute2's "ip netns add" does before its first namespace. Doing the same
// keeps our namespace mounts and iproute2's on one layer: were iproute2 to
// bind NetnsDir over mounts we made earlier, ours would be hidden beneath
// and could no longer be removed (EBUSY).
var (
	mountMu    sync.Mutex
	weMountedD bool // prepareNetnsDir made the mount: undo it when empty
)

func prepareNetnsDir() error {
	mountMu.Lock()
	defer mountMu.Unlock()
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == NetnsDir {
			return nil // already a mount point (by iproute2 or by us)
		}
	}
	if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", NetnsDir, err)
	}
	if err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", NetnsDir, err)
	}
	weMountedD = true
	return nil
}

// releaseNetnsDir undoes prepareNetnsDir's mount once no namespace is
// left under it, so the host is left as it was found.
func releaseNetnsDir() {
	mountMu.Lock()
	defer mountMu.Unlock()
	if !weMountedD {
		return
	}
	if ents, err := os.ReadDir(NetnsDir); err == nil && len(ents) == 0 {
		if unix.Unmount(NetnsDir, unix.MNT_DETACH) == nil {
			weMountedD = false
		}
	}
}

// Setup implements backend.Backend.
func (b *Backend) Setup(ctx context.Context, spec backend.Spec) (err error) {
	if !backend.ValidRunID(spec.RunID) {
		return fmt.Errorf("nsbackend: run id %q: want tb and six hex digits", spec.RunID)
	}
	b.spec = spec
	if err := prepareNetnsDir(); err != nil {
		return fmt.Errorf("nsbackend: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Teardown(context.Background()))
		}
	}()
	for r, agents := range spec.Replicas {
		if len(agents) == 0 {
			continue // a replica another shard runs (harness run --shard)
		}
		bits := spec.Prefixes[r].Bits()
		hubName := hubNS(spec.RunID, r)
		hub, err := nsenter.NewNamed(hubName)
		if err != nil {
			return err
		}
		b.made = append(b.made, hubName)
		b.hubs = append(b.hubs, hubName)
		hh, err := netlink.NewHandleAt(hub)
		if err != nil {
			return err
		}
		defer hh.Close()
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := hh.LinkAdd(br); err != nil {
			return fmt.Errorf("%s: add bridge: %w", hubName, err)
		}
		if err := hh.LinkSetUp(br); err != nil {
			return err
		}
		disableIPv6(hub)
		for i, a := range agents {
			if err := ctx.Err(); err != nil {
				return err
			}
			an := &agentNet{agent: a, nsName: agentNS(spec.RunID, a.Instance), hub: hub, hubName: hubName, port: fmt.Sprintf("p%d", i)}
			ns, err := nsenter.NewNamed(an.nsName)
			if err != nil {
				return err
			}
			an.ns = ns
			b.made = append(b.made, an.nsName)
			b.agents[a.Instance] = an
			disableIPv6(ns)
			peerTmp := fmt.Sprintf("e%d", i)
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an.port, MasterIndex: br.Index}, PeerName: peerTmp, PeerNamespace: netlink.NsFd(ns)}
			if err := hh.LinkAdd(veth); err != nil {
				return fmt.Errorf("%s: add veth %s: %w", hubName, an.port, err)
			}
			p, err := hh.LinkByName(an.port)
			if err != nil {
				return err
			}
			if err := hh.LinkSetMaster(p, br); err != nil {
				return err
			}
			if err := hh.LinkSetUp(p); err != nil {
				return err
			}
			ah, err := netlink.NewHandleAt(ns)
			if err != nil {
				return err
			}
			err = func() error {
				defer ah.Close()
				l, err := ah.LinkByName(peerTmp)
				if err != nil {
					return err
				}
				if err := ah.LinkSetName(l, "eth0"); err != nil {
					return err
				}
				addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr.AsSlice(), Mask: net.CIDRMask(bits, a.Addr.BitLen())}}
				if err := ah.AddrAdd(l, addr); err != nil {
					return fmt.Errorf("%s: address %v: %w", an.nsName, a.Addr, err)
				}
				if err := ah.LinkSetUp(l); err != nil {
					return err
				}
				lo, err := ah.LinkByName("lo")
				if err != nil {
					return err
				}
				an.mac = l.Attrs().HardwareAddr
				return ah.LinkSetUp(lo)
			}()
			if err != nil {
				return fmt.Errorf("%s: %w", an.nsName, err)
			}
		}
		// Static neighbours: no ARP on the wire or on the first pass.
		for _, a := range agents {
			an := b.agents[a.Instance]
			ah, err := netlink.NewHandleAt(an.ns)
			if err != nil {
				return err
			}
			l, err := ah.LinkByName("eth0")
			if err != nil {
				ah.Close()
				return err
			}
			for _, o := range agents {
				if o.Instance == a.Instance {
					continue
				}
				on := b.agents[o.Instance]
				n := &netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT, IP: o.Addr.AsSlice(), HardwareAddr: on.mac}
				if err := ah.NeighSet(n); err != nil {
					ah.Close()
					return fmt.Errorf("%s: neighbour %v: %w", an.nsName, o.Addr, err)
				}
			}
			ah.Close()
		}
	}
	return nil
}

// disableIPv6 keeps IPv6 autoconfiguration chatter (router and neighbour
// solicitations) out of the captures: the agents use IPv4.
func disableIPv6(ns netns.NsHandle) {
	_ = nsenter.Do(ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1"), 0)
	})
	_ = nsenter.Do(ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0)
	})
}

func (b *Backend) agent(instance string) (*agentNet, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	an := b.agents[instance]
	if an == nil {
		return nil, fmt.Errorf("nsbackend: no agent %q", instance)
	}
	return an, nil
}

// AgentPort implements backend.Backend.
func (b *Backend) AgentPort(instance string) (backend.Port, error) {
	an, err := b.agent(instance)
	if err != nil {
		return backend.Port{}, err
	}
	return backend.Port{NS: an.ns, NSPath: filepath.Join(NetnsDir, an.nsName), Link: "eth0"}, nil
}

// IngressPort implements backend.Backend.
func (b *Backend) IngressPort(instance string) (backend.Port, error) {
	an, err := b.agent(instance)
	if err != nil {
		return backend.Port{}, err
	}
	return backend.Port{NS: an.hub, NSPath: filepath.Join(NetnsDir, an.hubName), Link: an.port}, nil
}

type proc struct {
	cmd  *exec.Cmd
	once sync.Once
	code int
	sig  syscall.Signal
	err  error
	done chan struct{}
}

func (p *proc) Pid() int { return p.cmd.Process.Pid }

func (p *proc) Signal(s syscall.Signal) error {
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	return p.cmd.Process.Signal(s)
}

func (p *proc) Wait() (int, syscall.Signal, error) {
	<-p.done
	return p.code, p.sig, p.err
}

// Start implements backend.Backend: the child is forked from a thread in
// the agent's namespace and inherits it.
func (b *Backend) Start(ctx context.Context, instance string, c backend.Cmd) (backend.Process, error) {
	an, err := b.agent(instance)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the forking thread exits: keep it locked and
	// alive for as long as the harness runs by forking from a thread that
	// is never handed back (see startThread).
	if err := startThread.Do(an.ns, cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", c.Path, an.nsName, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code, p.sig = -1, ws.Signal()
			} else {
				p.code = ee.ExitCode()
			}
		default:
			p.err = err
		}
		close(p.done)
	}()
	return p, nil
}

// Teardown implements backend.Backend.
func (b *Backend) Teardown(ctx context.Context) error {
	b.mu.Lock()
	procs := b.procs
	b.procs = nil
	made := b.made
	b.made = nil
	agents := b.agents
	b.agents = map[string]*agentNet{}
	b.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.Signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		p.Wait()
	}
	for _, an := range agents {
		an.ns.Close()
	}
	var errs []error
	for i := len(made) - 1; i >= 0; i-- {
		if err := deleteNamed(made[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", made[i], err))
		}
	}
	releaseNetnsDir()
	return errors.Join(errs...)
}

func hubNS(runID string, replica int) string { return fmt.Sprintf("%s-hub%d", runID, replica) }

func agentNS(runID, instance string) string { return runID + "-" + instance }

// Namespaces lists the namespaces Setup creates for spec: a run records
// them (in the run registry) before it creates them, so that what a
// killed run left can be told from what others made.
func Namespaces(spec backend.Spec) []string {
	var names []string
	for r, as := range spec.Replicas {
		if len(as) == 0 {
			continue
		}
		names = append(names, hubNS(spec.RunID, r))
		for _, a := range as {
			names = append(names, agentNS(spec.RunID, a.Instance))
		}
	}
	return names
}

// RemoveNamespaces kills the processes inside each named namespace that
// exists and deletes it; it returns those it removed. Names are taken
// from a run's registry entry: nothing else is touched.
func RemoveNamespaces(names []string) ([]string, error) {
	var removed []string
	var errs []error
	for _, n := range names {
		if strings.ContainsRune(n, '/') || n == "" || n[0] == '.' {
			errs = append(errs, fmt.Errorf("namespace name %q: not a name", n))
			continue
		}
		path := filepath.Join(NetnsDir, n)
		if _, err := os.Lstat(path); err != nil {
			continue
		}
		killIn(path)
		if err := deleteNamed(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// Leftovers lists the namespaces of run IDs (or of every run when runID
// is empty) found in NetnsDir. Only names of the form RUNID-... with a
// valid run ID are considered: nothing else is ever touched.
func Leftovers(runID string) ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		id, _, ok := strings.Cut(e.Name(), "-")
		if !ok || !backend.ValidRunID(id) || (runID != "" && id != runID) {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

// Clean deletes every namespace named after runID (tests, for their own
// IDs): harness clean goes by the run registry instead (RemoveNamespaces),
// since a name alone does not prove a tokenbed run made it.
func Clean(runID string) ([]string, error) {
	names, err := Leftovers(runID)
	if err != nil {
		return nil, err
	}
	return RemoveNamespaces(names)
}

// deleteNamed unbinds and removes a named namespace. The bind mount may be
// stacked: once iproute2 has made /run/netns a shared recursive bind of
// itself ("ip netns add" does), every mount below it appears twice, so
// unmount until the file is no mount point any more.
func deleteNamed(name string) error {
	path := filepath.Join(NetnsDir, name)
	for i := 0; i < 8; i++ {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			break
		}
	}
	return os.Remove(path)
}

// KillIn kills every process in the network namespace bound at path.
func KillIn(path string) { killIn(path) }

// killIn kills every process whose network namespace is the one bound at
// path (agents left by a harness killed before its parent-death signal
// could act, e.g. a frozen harness).
func killIn(path string) {
	var target syscall.Stat_t
	if err := syscall.Stat(path, &target); err != nil {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Ino == target.Ino && st.Dev == target.Dev {
			var pid int
			if _, err := fmt.Sscanf(p, "/proc/%d/ns/net", &pid); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// startThread forks every agent. Two reasons for one long-lived thread:
// the child inherits the forking thread's network namespace, and Linux
// sends the parent-death signal when the forking thread (not the process)
// exits, so that thread must outlive the agents.
var startThread nsenter.Thread
