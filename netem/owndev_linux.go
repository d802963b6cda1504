package netem

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"tokenbed/internal/netlinkdump"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
)

// ownDevice is a sender impaired on an IFB device of its own (see
// SourceTree): the device, and the redirect filter on the ingress of the
// sender's port. Fields are set as each piece exists, so that remove
// undoes exactly what was done.
type ownDevice struct {
	source netip.Prefix
	via    string
	dev    string // set once the device exists
	prio   uint16 // set once the filter exists
	proto  uint16
}

// ingressMade records the ingress qdiscs a tree of this process added, by
// namespace and link: only those are removed again, and only when no
// filter is left in them (trees toward other hosts share a sender's).
var ingressMade sync.Map

func ingressKey(ns netns.NsHandle, link string) string { return ns.UniqueId() + "/" + link }

// addOwn puts sender s on the device p.Device: the IFB device with s's
// netem at its root, the ingress qdisc on s.Via, and a filter there that
// redirects s's packets toward host into the device. The filter's
// priority is the tree link's ifindex, unique per host, so that each
// tree removes only its own filter from a shared ingress.
func (t *Tree) addOwn(c *conn, s Source, host netip.Prefix, p Placement) error {
	o := &ownDevice{source: s.Prefix, via: s.Via}
	t.own = append(t.own, o)
	opErr := func(what string, err error) error {
		return &OpError{Op: "own device " + what + " for " + s.Prefix.String(), Link: p.Device, Err: err}
	}
	treeIdx, err := c.ifindex(t.link)
	if err != nil {
		return opErr("tree link", err)
	}
	if treeIdx > 0xffff {
		return opErr("filter priority", fmt.Errorf("ifindex %d of %s does not fit a filter priority", treeIdx, t.link))
	}
	viaIdx, err := c.ifindex(s.Via)
	if err != nil {
		return opErr("via", err)
	}
	if err := c.h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: p.Device}}); err != nil {
		return opErr("add (ifb)", err)
	}
	o.dev = p.Device
	dev, err := c.h.LinkByName(p.Device)
	if err != nil {
		return opErr("find", err)
	}
	if err := c.h.LinkSetUp(dev); err != nil {
		return opErr("up", err)
	}
	q, err := Add(Target{NS: t.ns, Link: p.Device}, s.Profile)
	if err != nil {
		return err
	}
	t.leaves[s.Prefix] = q
	ing := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: viaIdx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	switch err := c.h.QdiscAdd(ing); {
	case err == nil:
		ingressMade.Store(ingressKey(t.ns, s.Via), true)
	case errors.Is(err, syscall.EEXIST):
		// Another tree's (or the caller's): its filters stay.
	default:
		return opErr("ingress on "+s.Via, err)
	}
	proto, src := u32Keys(s.Prefix, true)
	_, dst := u32Keys(host, false)
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: viaIdx, Parent: netlink.HANDLE_INGRESS, Priority: uint16(treeIdx), Protocol: proto},
		Sel:         &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: append(src, dst...)},
		Actions:     []netlink.Action{netlink.NewMirredAction(dev.Attrs().Index)},
	}
	if err := c.h.FilterAdd(f); err != nil {
		return opErr("redirect filter on "+s.Via, err)
	}
	o.prio, o.proto = uint16(treeIdx), proto
	return nil
}

// ownDevice returns the own device of sender prefix, or nil.
func (t *Tree) ownDevice(prefix netip.Prefix) *ownDevice {
	for _, o := range t.own {
		if o.source == prefix {
			return o
		}
	}
	return nil
}

// Own returns the name of the device of its own that sender prefix is
// impaired on, or "" when it is a leaf of the tree.
func (t *Tree) Own(prefix netip.Prefix) string {
	if o := t.ownDevice(prefix); o != nil {
		return o.dev
	}
	return ""
}

// OwnDevices returns the names of the devices of their own that senders
// of t are impaired on, in the order of the senders.
func (t *Tree) OwnDevices() []string {
	var out []string
	for _, o := range t.own {
		if o.dev != "" {
			out = append(out, o.dev)
		}
	}
	return out
}

func (o *ownDevice) remove(c *conn, ns netns.NsHandle) error {
	var errs []error
	via, verr := c.h.LinkByName(o.via)
	if o.prio != 0 && verr == nil {
		f := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: via.Attrs().Index, Parent: netlink.HANDLE_INGRESS, Priority: o.prio, Protocol: o.proto}}
		if err := c.h.FilterDel(f); err != nil {
			errs = append(errs, fmt.Errorf("redirect filter on %s: %w", o.via, err))
		}
		o.prio = 0
	}
	if verr == nil {
		if _, made := ingressMade.Load(ingressKey(ns, o.via)); made {
			if fs, err := netlinkdump.Retry(func() ([]netlink.Filter, error) { return c.h.FilterList(via, netlink.HANDLE_INGRESS) }); err == nil && len(fs) == 0 {
				ing := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: via.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
				if err := c.h.QdiscDel(ing); err != nil {
					errs = append(errs, fmt.Errorf("ingress on %s: %w", o.via, err))
				} else {
					ingressMade.Delete(ingressKey(ns, o.via))
				}
			}
		}
	}
	if o.dev != "" {
		if l, err := c.h.LinkByName(o.dev); err != nil {
			errs = append(errs, err)
		} else if err := c.h.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("device %s: %w", o.dev, err))
		}
		o.dev = ""
	}
	return errors.Join(errs...)
}

// ErrNoOwnDevice is matched (errors.Is) by CheckOwnDevice's error: this
// kernel cannot give a duplicating sender a device of its own.
var ErrNoOwnDevice = errors.New("cannot place a duplicating netem on a device of its own (needs CONFIG_IFB, CONFIG_NET_SCH_INGRESS, CONFIG_NET_CLS_U32, CONFIG_NET_ACT_MIRRED)")

// CheckOwnDevice builds, in a scratch namespace named RUNID-owncheck
// (removed in every case), a three-sender SourceTree with one duplicating
// sender, as Apply does for a run, and reports whether this kernel takes
// it. Call it before a kernel run in which some direction duplicates and
// shares its host's queue with other senders; on error (matching
// ErrNoOwnDevice, or ErrNoNetem), Plan(err) says which directions the
// kernel cannot take. It needs root.
func CheckOwnDevice(runID string) error {
	if runID == "" {
		return errors.New("netem: CheckOwnDevice needs a run ID to name its scratch namespace")
	}
	return inScratchNS(OwnCheckNS(runID), "own-device check", func(ns netns.NsHandle) error {
		c, err := dial(ns)
		if err != nil {
			return err
		}
		defer c.close()
		// A veth pair stands for the host's and the senders' ports (veth is
		// what the backends use; dummy may be missing).
		if err := c.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "host0"}, PeerName: "send0"}); err != nil {
			return fmt.Errorf("veth: %w", err)
		}
		host := netip.MustParsePrefix("192.0.2.1/32")
		st := SourceTree{Link: "host0", Host: host, Sources: []Source{
			{Dest: Dest{Prefix: netip.MustParsePrefix("192.0.2.2/32"), Profile: Profile{Delay: 1e6}}, Via: "send0"},
			{Dest: Dest{Prefix: netip.MustParsePrefix("192.0.2.3/32"), Profile: Profile{Duplicate: 1}}, Via: "send0"},
			{Dest: Dest{Prefix: netip.MustParsePrefix("192.0.2.4/32"), Profile: Profile{Delay: 1e6}}, Via: "send0"},
		}}
		t, err := st.Apply(ns)
		if err != nil {
			if errors.Is(err, ErrNoNetem) {
				return err
			}
			return fmt.Errorf("%v: %w", err, ErrNoOwnDevice)
		}
		return t.Remove()
	})
}
