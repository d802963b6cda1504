package ctrbackend

// Pods: the holder container of each agent, which owns the agent's
// network namespace across crashes and restarts.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"tokenbed/internal/netlinkdump"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

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
	addrs, err := netlinkdump.Retry(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_V4) })
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
