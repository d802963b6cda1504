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
	// own are the senders on a device of their own (SourceTree), in the
	// order they were installed; their leaves are in leaves too.
	own []*ownDevice
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
// A duplicating profile is refused unless it is the only sender (the
// kernel allows a duplicating netem only alone on its device): use
// SourceTree.Apply, which gives such a sender a device of its own.
func ApplySourceTree(ns netns.NsHandle, link string, sources []Dest) (*Tree, error) {
	st := SourceTree{Link: link}
	for _, d := range sources {
		st.Sources = append(st.Sources, Source{Dest: d})
	}
	return st.Apply(ns)
}

// Apply installs t in ns: an HTB tree on t.Link with a netem leaf per
// sender, keyed by source address, and a device of its own for each
// sender Plan places there (see SourceTree). On error, whatever was
// installed is removed.
//
// Equivalent to, for a sender 10.0.0.1 (P1) and a duplicating sender
// 10.0.0.3 (P3, port p2) toward host 10.0.0.2 behind p1:
//
//	tc qdisc add dev p1 root handle 1: htb default 1
//	tc class add dev p1 parent 1: classid 1:1 htb rate 100gbit
//	tc class add dev p1 parent 1: classid 1:10 htb rate 100gbit
//	tc qdisc add dev p1 parent 1:10 handle 10: netem P1
//	tc filter add dev p1 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.1/32 flowid 1:10
//	ip link add p1-11 type ifb && ip link set p1-11 up
//	tc qdisc add dev p1-11 root netem P3
//	tc qdisc add dev p2 ingress
//	tc filter add dev p2 parent ffff: protocol ip prio IFINDEX(p1) u32 \
//		match ip src 10.0.0.3/32 match ip dst 10.0.0.2/32 action mirred egress redirect dev p1-11
func (t SourceTree) Apply(ns netns.NsHandle) (*Tree, error) {
	dests := make([]Dest, len(t.Sources))
	for i, s := range t.Sources {
		dests[i] = s.Dest
	}
	if err := checkDests(t.Link, dests); err != nil {
		return nil, err
	}
	plan := t.Plan(nil)
	var perr []error
	for _, p := range plan {
		if p.Err != nil {
			perr = append(perr, p.Err)
		}
	}
	if len(perr) > 0 {
		return nil, fmt.Errorf("netem: tree on %s: %w", t.Link, errors.Join(perr...))
	}
	return install(ns, t.Link, dests, true, func(c *conn, tr *Tree, i int) (bool, error) {
		if !plan[i].Own {
			return false, nil
		}
		return true, tr.addOwn(c, t.Sources[i], t.Host, plan[i])
	})
}

// checkDests refuses what no tree can hold.
func checkDests(link string, dests []Dest) error {
	if len(dests) > 0xffff-treeFirstMinor {
		return fmt.Errorf("netem: tree on %s: %d destinations is too many", link, len(dests))
	}
	for i, d := range dests {
		if !d.Prefix.IsValid() {
			return fmt.Errorf("netem: tree on %s: dests[%d].Prefix is not set", link, i)
		}
		if err := d.Profile.Validate(); err != nil {
			return fmt.Errorf("netem: tree on %s: dests[%d] (%s): %w", link, i, d.Prefix, err)
		}
		for j := 0; j < i; j++ {
			if dests[j].Prefix.Overlaps(d.Prefix) {
				return fmt.Errorf("netem: tree on %s: dests[%d].Prefix %s overlaps dests[%d].Prefix %s", link, i, d.Prefix, j, dests[j].Prefix)
			}
		}
	}
	return nil
}

func applyTree(ns netns.NsHandle, link string, dests []Dest, bySrc bool) (*Tree, error) {
	if err := checkDests(link, dests); err != nil {
		return nil, err
	}
	return install(ns, link, dests, bySrc, nil)
}

// install builds the tree; elsewhere, when set, may install dests[i]
// somewhere else than a leaf and says whether it did.
func install(ns netns.NsHandle, link string, dests []Dest, bySrc bool, elsewhere func(*conn, *Tree, int) (bool, error)) (_ *Tree, err error) {
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
		if elsewhere != nil {
			done, err := elsewhere(c, t, i)
			if err != nil {
				return nil, err
			}
			if done {
				continue
			}
		}
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
	proto, keys := u32Keys(p, bySrc)
	prio := uint16(1)
	if proto == unix.ETH_P_IPV6 {
		prio = 2
	}
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(treeMajor, 0), Priority: prio, Protocol: proto},
		ClassId:     flow,
		Sel:         &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: keys},
	}
}

// u32Keys are the u32 keys matching p as source or destination address,
// and the protocol (ethertype) they apply to.
func u32Keys(p netip.Prefix, bySrc bool) (uint16, []netlink.TcU32Key) {
	p = p.Masked()
	addr := p.Addr().AsSlice()
	proto, off := uint16(unix.ETH_P_IP), int32(16)
	if bySrc {
		off = 12
	}
	if p.Addr().Is6() {
		proto, off = unix.ETH_P_IPV6, 24
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
	return proto, keys
}

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
// go together); the link is left with its default qdisc. Own devices go
// too, with their redirect filters (and the ingress qdisc that carried
// them once no filter is left in it, if a tree added it).
//
// Equivalent to: `tc qdisc del dev LINK root`, and for each own device
// `tc filter del dev VIA parent ffff: prio N && ip link del DEVICE`.
func (t *Tree) Remove() error {
	return withConn("tree remove", Target{NS: t.ns, Link: t.link}, func(c *conn) error {
		errs := []error{c.deleteQdisc(Target{Link: t.link, Handle: netlink.MakeHandle(treeMajor, 0)})}
		for _, o := range t.own {
			errs = append(errs, o.remove(c, t.ns))
		}
		return errors.Join(errs...)
	})
}
