package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	agentres "tokenbed/agent/resource"
	"tokenbed/harness/backend"
	"tokenbed/internal/results"
	"tokenbed/internal/strictyaml"
)

// The shared resource server of seed 003 (agent/resource): when an
// agent's protected operation is {kind: resource} without a server
// address, the run starts one server per replica in a namespace of its
// own on the replica's bridge, at the host number after the last agent's,
// and gives its address to the replica's agents. It is not a member: no
// credentials, no impairment (the resource is the server's, the network
// under test is the members'), no capture; its log is
// logs/resource-server[.rN].jsonl.

// ResourceName is the server's name in each replica (instance
// ResourceName.rN, log logs/INSTANCE.jsonl); no agent may have it.
const ResourceName = agentres.ServerName

// ResourcePort is the server's TCP port.
const ResourcePort = 7500

// resourceServer is one replica's server.
type resourceServer struct {
	a    backend.Agent
	proc backend.Process
	log  string
}

// operationOf reads the operation section of an agent's configuration
// (undecoded in the experiment: the protocol plug-in checked it).
func operationOf(cfg strictyaml.Node) agentres.Config {
	var c agentres.Config
	if _, taken := cfg.Split(func(k string) bool { return k == "operation" }); !taken["operation"].IsZero() {
		taken["operation"].Decode(&c)
	}
	return c
}

// needsServer reports whether an agent's operation needs the server the
// run provides.
func needsServer(cfg strictyaml.Node) bool {
	op := operationOf(cfg)
	return op.Kind == agentres.KindResource && op.Server == ""
}

// withOperation returns cfg with its operation replaced by op.
func withOperation(cfg strictyaml.Node, op agentres.Config) (strictyaml.Node, error) {
	over, err := strictyaml.Parse("the run's resource server", []byte(fmt.Sprintf("operation: {kind: %s, server: %q}\n", op.Kind, op.Server)))
	if err != nil {
		return cfg, err
	}
	return strictyaml.Merge(cfg, over), nil
}

// wantsResource reports whether some agent's operation needs a server
// the run provides.
func (r *run) wantsResource() bool {
	for _, a := range r.e.Agents {
		if needsServer(a.Config) {
			return true
		}
	}
	return false
}

// planResource plans the shared resource (host.planResource), when an
// agent wants it.
func (r *run) planResource(spec *backend.Spec) error {
	if !r.wantsResource() {
		return nil
	}
	return r.host.planResource(r, spec)
}

// holdInsteadOfResource makes the hold the operation of every agent that
// wants the resource.
func (r *run) holdInsteadOfResource() error {
	for _, ar := range r.agents {
		if needsServer(ar.spec.Config) {
			cfg, err := withOperation(ar.spec.Config, agentres.Config{Kind: agentres.KindHold})
			if err != nil {
				return err
			}
			ar.spec.Config = cfg
		}
	}
	r.o.Log.Info("resource server: none in the simulator; the operation is the hold")
	return nil
}

// planServers adds each replica's server to the network to build and
// gives its address to the agents that need it.
func (r *run) planServers(spec *backend.Spec) error {
	if _, taken := r.e.Agent(ResourceName); taken {
		return fmt.Errorf("agent name %q is reserved for the resource server", ResourceName)
	}
	for rep := range spec.Replicas {
		if len(spec.Replicas[rep]) == 0 {
			continue // another shard's replica
		}
		a := backend.Agent{Name: ResourceName, Replica: rep, Instance: results.Instance(ResourceName, rep),
			Addr: backend.AgentAddr(spec.Prefixes[rep], len(r.e.Agents))}
		spec.Replicas[rep] = append(spec.Replicas[rep], a)
		r.servers = append(r.servers, &resourceServer{a: a,
			log: filepath.Join(r.absDir(), results.LogsDir, a.Instance+".jsonl")})
		addr := netip.AddrPortFrom(a.Addr, ResourcePort).String()
		for _, ar := range r.agents {
			if ar.a.Replica == rep && needsServer(ar.spec.Config) {
				cfg, err := withOperation(ar.spec.Config, agentres.Config{Kind: agentres.KindResource, Server: addr})
				if err != nil {
					return err
				}
				ar.spec.Config = cfg
			}
		}
	}
	return nil
}

// routeAroundEngine lets every agent reach its replica's server on its
// own link, beside the engine that carries the replica's subnet: one
// /32 route per agent.
//
// Equivalent to, in each agent's namespace: ip route add SERVER/32 dev eth0
func (r *run) routeAroundEngine() error {
	for _, s := range r.servers {
		for _, inst := range r.order {
			if r.agents[inst].a.Replica != s.a.Replica {
				continue
			}
			p, err := r.be.AgentPort(inst)
			if err != nil {
				return err
			}
			h, err := netlink.NewHandleAt(p.NS)
			if err != nil {
				return err
			}
			err = func() error {
				defer h.Close()
				l, err := h.LinkByName(p.Link)
				if err != nil {
					return err
				}
				return h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Scope: unix.RT_SCOPE_LINK,
					Dst: &net.IPNet{IP: s.a.Addr.AsSlice(), Mask: net.CIDRMask(32, 32)}})
			}()
			if err != nil {
				return fmt.Errorf("%s: route to the resource server: %w", inst, err)
			}
		}
	}
	return nil
}

// startResource starts every replica's server and waits for its
// resource_started line.
func (r *run) startResource(ctx context.Context) error {
	for _, s := range r.servers {
		stderr, err := os.OpenFile(strings.TrimSuffix(s.log, ".jsonl")+".stderr", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		args := []string{"resource-server", "--listen", netip.AddrPortFrom(s.a.Addr, ResourcePort).String(),
			"--log", s.log, "--name", s.a.Instance}
		p, err := r.be.Start(ctx, s.a.Instance, backend.Cmd{Path: r.o.AgentBin, Args: args, Env: []string{"GOMAXPROCS=1"}, Stdout: stderr, Stderr: stderr})
		stderr.Close()
		if err != nil {
			return fmt.Errorf("resource server: %w", err)
		}
		s.proc = p
		for deadline := time.Now().Add(10 * time.Second); ; {
			b, _ := os.ReadFile(s.log)
			if strings.Contains(string(b), `"kind":"`+string(agentres.ServerStarted)+`"`) {
				break
			}
			if time.Now().After(deadline) {
				msg, _ := os.ReadFile(strings.TrimSuffix(s.log, ".jsonl") + ".stderr")
				return fmt.Errorf("resource server %s did not start: %s", s.a.Instance, strings.TrimSpace(string(msg)))
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(10 * time.Millisecond):
			}
		}
		r.o.Log.Info("resource server", "instance", s.a.Instance, "addr", s.a.Addr, "port", strconv.Itoa(ResourcePort), "log", s.log)
	}
	return nil
}

// stopResource stops the servers, after the agents: their last
// disconnects are in the log.
func (r *run) stopResource() {
	for _, s := range r.servers {
		if s.proc == nil {
			continue
		}
		s.proc.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			s.proc.Signal(syscall.SIGKILL)
		}
		s.proc = nil
	}
}
