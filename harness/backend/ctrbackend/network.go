package ctrbackend

// The run's networks: one internal bridge per replica, each pod's veth
// and static neighbours, and the ports impairment attaches to.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"tokenbed/internal/netlinkdump"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/vishvananda/netlink"

	"tokenbed/harness/backend"
)

// gatewayOf is the address Docker gives the bridge: the last host address
// of p, so that agents can be numbered from 1.
func gatewayOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= (1 << (32 - p.Bits())) - 1 // broadcast
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
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
	routes, err := netlinkdump.Retry(func() ([]netlink.Route, error) { return h.RouteList(nil, netlink.FAMILY_V4) })
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
