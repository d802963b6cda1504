package slurmcluster

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"tokenbed/internal/nsenter"
)

// network makes the namespaces (the bridge's first) and joins every
// member to br0 by a veth: port pI in the bridge's namespace, eth0 in the
// member's. Each name is in the run registry before it is made.
//
// Equivalent to, for the controller:
//
//	ip netns add RUNID-slurmnet && ip -n RUNID-slurmnet link add br0 type bridge
//	ip netns add RUNID-slurmctl
//	ip -n RUNID-slurmnet link add p0 master br0 type veth peer name eth0 netns RUNID-slurmctl
//	ip -n RUNID-slurmctl addr add 10.79.0.1/24 dev eth0 && ip -n RUNID-slurmctl link set eth0 up
func (c *Cluster) network(names []string) error {
	for _, n := range names {
		h, err := nsenter.NewNamed(n)
		if err != nil {
			return err
		}
		c.made = append(c.made, n)
		c.handles[n] = h
	}
	hub, err := netlink.NewHandleAt(c.handles[c.netNS])
	if err != nil {
		return err
	}
	defer hub.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := hub.LinkAdd(br); err != nil {
		return fmt.Errorf("%s: bridge: %w", c.netNS, err)
	}
	if err := hub.LinkSetUp(br); err != nil {
		return err
	}
	members := []struct{ ns, addr string }{{c.CtlNS, c.CtlAddr}}
	for _, n := range c.Nodes {
		members = append(members, struct{ ns, addr string }{n.NS, n.Addr})
	}
	for i, m := range members {
		port := fmt.Sprintf("p%d", i)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Index}, PeerName: "eth0", PeerNamespace: netlink.NsFd(c.handles[m.ns])}
		if err := hub.LinkAdd(v); err != nil {
			return fmt.Errorf("%s: veth %s to %s: %w", c.netNS, port, m.ns, err)
		}
		if err := hub.LinkSetUp(v); err != nil {
			return err
		}
		if err := c.address(m.ns, m.addr); err != nil {
			return fmt.Errorf("%s: %w", m.ns, err)
		}
	}
	return nil
}

// address puts addr/24 on the member's eth0 and brings it and lo up.
func (c *Cluster) address(ns, addr string) error {
	h, err := netlink.NewHandleAt(c.handles[ns])
	if err != nil {
		return err
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if name == "eth0" {
			a := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(addr).To4(), Mask: net.CIDRMask(24, 32)}}
			if err := h.AddrAdd(l, a); err != nil {
				return fmt.Errorf("address %s: %w", addr, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}
