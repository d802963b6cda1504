package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dest is one destination of a per-destination tree: packets whose
// destination address is in Prefix get Profile.
type Dest struct {
	Prefix  netip.Prefix
	Profile Profile
}

// Tree is a per-destination impairment tree on one interface:
//
//	1:   htb root, default class 1:1
//	1:1  htb class, unimpaired: traffic no filter matches
//	1:N  htb class per destination (N = 10, 11, ... in tc's hex) with netem leaf N:
//	u32 filters on the destination address (IPv4 prio 1, IPv6 prio 2)
//
// HTB classes get a 100 Gbit/s rate so that HTB itself never shapes.
type Tree struct {
	bySrc  bool // filters match the source address instead
	ns     netns.NsHandle
	link   string
	dests  []Dest
	leaves map[netip.Prefix]*Qdisc
}

const (
	treeMajor      = 1
	treeDefault    = 1
	treeFirstMinor = 0x10 // tc prints handles in hex: classes 1:10, 1:11, ...
	// unshapedRate in bits/s: far above anything a veth in a testbed sees.
	unshapedRate = 100e9
)

// ApplyTree installs a per-destination tree on link in ns, replacing
// nothing: it fails if link already has a root qdisc other than the
// default. Prefixes must not overlap (u32 has no longest-prefix match).
// On error, whatever was installed is removed.
//
// Equivalent to, for destinations 10.0.0.2/32 (P1) and 10.0.0.3/32 (P2):
//
//	tc qdisc add dev LINK root handle 1: htb default 1
//	tc class add dev LINK parent 1: classid 1:1 htb rate 100gbit
//	tc class add dev LINK parent 1: classid 1:10 htb rate 100gbit
//	tc qdisc add dev LINK parent 1:10 handle 10: netem P1
//	tc filter add dev LINK parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.2/32 flowid 1:10
//	tc class add dev LINK parent 1: classid 1:11 htb rate 100gbit
//	tc qdisc add dev LINK parent 1:11 handle 11: netem P2
//	tc filter add dev LINK parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.3/32 flowid 1:11
//
// (IPv6 prefixes use "protocol ipv6 prio 2 u32 match ip6 dst PREFIX").
func ApplyTree(ns netns.NsHandle, link string, dests []Dest) (_ *Tree, err error) {
	return applyTree(ns, link, dests, false)
}

// ApplySourceTree is ApplyTree with filters on the source address: Dest
// then names a sender, and the tree impairs what each sender sends toward
// this link. Put on the egress of the link that leads to a host, it gives
// per-sender profiles toward that host (the harness applies the direction
// A>B on the queue toward B, so that a capture on A's own interface sees
// every packet before impairment).
//
// Equivalent to ApplyTree with "match ip src PREFIX" ("match ip6 src").
func ApplySourceTree(ns netns.NsHandle, link string, sources []Dest) (*Tree, error) {
	return applyTree(ns, link, sources, true)
}

func applyTree(ns netns.NsHandle, link string, dests []Dest, bySrc bool) (_ *Tree, err error) {
	if len(dests) > 0xffff-treeFirstMinor {
		return nil, fmt.Errorf("netem: tree on %s: %d destinations is too many", link, len(dests))
	}
	for i, d := range dests {
		if !d.Prefix.IsValid() {
			return nil, fmt.Errorf("netem: tree on %s: dests[%d].Prefix is not set", link, i)
		}
		if err := d.Profile.Validate(); err != nil {
			return nil, fmt.Errorf("netem: tree on %s: dests[%d] (%s): %w", link, i, d.Prefix, err)
		}
		for j := 0; j < i; j++ {
			if dests[j].Prefix.Overlaps(d.Prefix) {
				return nil, fmt.Errorf("netem: tree on %s: dests[%d].Prefix %s overlaps dests[%d].Prefix %s", link, i, d.Prefix, j, dests[j].Prefix)
			}
		}
	}
	t := &Tree{bySrc: bySrc, ns: ns, link: link, dests: append([]Dest(nil), dests...), leaves: map[netip.Prefix]*Qdisc{}}
	c, err := dial(ns)
	if err != nil {
		return nil, &OpError{Op: "tree", Link: link, Err: err}
	}
	defer c.close()
	l, err := c.h.LinkByName(link)
	if err != nil {
		return nil, &OpError{Op: "tree", Link: link, Err: err}
	}
	idx := l.Attrs().Index
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(treeMajor, 0), Parent: netlink.HANDLE_ROOT})
	root.Defcls = treeDefault
	if err := c.h.QdiscAdd(root); err != nil {
		return nil, &OpError{Op: "tree root", Link: link, Err: err}
	}
	defer func() {
		if err != nil {
			if rerr := t.Remove(); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if err := addClass(c, idx, treeDefault); err != nil {
		return nil, &OpError{Op: "tree default class", Link: link, Err: err}
	}
	for i, d := range t.dests {
		minor := uint16(treeFirstMinor + i)
		if err := addClass(c, idx, minor); err != nil {
			return nil, &OpError{Op: "tree class", Link: link, Err: err}
		}
		q, err := Add(Target{NS: ns, Link: link, Parent: netlink.MakeHandle(treeMajor, minor), Handle: netlink.MakeHandle(minor, 0)}, d.Profile)
		if err != nil {
			return nil, err
		}
		t.leaves[d.Prefix] = q
		if err := c.h.FilterAdd(u32Addr(idx, d.Prefix, netlink.MakeHandle(treeMajor, minor), bySrc)); err != nil {
			return nil, &OpError{Op: "tree filter " + d.Prefix.String(), Link: link, Err: err}
		}
	}
	return t, nil
}

func addClass(c *conn, idx int, minor uint16) error {
	cl := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(treeMajor, 0),
		Handle: netlink.MakeHandle(treeMajor, minor)}, netlink.HtbClassAttrs{Rate: unshapedRate, Quantum: 200000})
	return c.h.ClassAdd(cl)
}

// u32Addr matches the destination address (IPv4 header offset 16, IPv6
// 24) or the source address (IPv4 12, IPv6 8).
func u32Addr(idx int, p netip.Prefix, flow uint32, bySrc bool) *netlink.U32 {
	p = p.Masked()
	addr := p.Addr().AsSlice()
	proto, prio, off := uint16(unix.ETH_P_IP), uint16(1), int32(16)
	if bySrc {
		off = 12
	}
	if p.Addr().Is6() {
		proto, prio, off = unix.ETH_P_IPV6, 2, 24
		if bySrc {
			off = 8
		}
	}
	var keys []netlink.TcU32Key
	bits := p.Bits()
	for w := 0; w < len(addr)/4 && bits > 0; w++ {
		n := min(bits, 32)
		bits -= n
		m := uint32(0xffffffff) << (32 - n)
		// vishvananda/netlink converts Mask and Val to network byte order
		// when it serialises the key: give them as numbers.
		keys = append(keys, netlink.TcU32Key{
			Mask: m,
			Val:  binary.BigEndian.Uint32(addr[4*w:4*w+4]) & m,
			Off:  off + int32(4*w),
		})
	}
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(treeMajor, 0), Priority: prio, Protocol: proto},
		ClassId:     flow,
		Sel:         &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: keys},
	}
}

// Dests returns the destinations as last applied.
func (t *Tree) Dests() []Dest { return append([]Dest(nil), t.dests...) }

// Leaf returns the netem qdisc serving prefix, or nil.
func (t *Tree) Leaf(prefix netip.Prefix) *Qdisc { return t.leaves[prefix] }

// Change sets the profile toward one destination in place (see
// Qdisc.Change, including ErrTableStuck); other destinations are not
// touched.
//
// Equivalent to: `tc qdisc change dev LINK parent 1:N handle N: netem P`.
func (t *Tree) Change(prefix netip.Prefix, p Profile) error {
	q := t.leaves[prefix]
	if q == nil {
		return fmt.Errorf("netem: tree on %s has no destination %s", t.link, prefix)
	}
	if err := q.Change(p); err != nil {
		return err
	}
	for i := range t.dests {
		if t.dests[i].Prefix == prefix {
			t.dests[i].Profile = p
		}
	}
	return nil
}

// Remove deletes the whole tree (root qdisc, classes, filters and leaves
// go together); the link is left with its default qdisc.
//
// Equivalent to: `tc qdisc del dev LINK root`.
func (t *Tree) Remove() error {
	return withConn("tree remove", Target{NS: t.ns, Link: t.link}, func(c *conn) error {
		return c.deleteQdisc(Target{Link: t.link, Handle: netlink.MakeHandle(treeMajor, 0)})
	})
}
